"""Classify what survived a cut against the ledger (docs/architecture.md, "The checker's contract"):
the checker's public API.

The check is O(blocks checked): the blocks written in the cycle plus a sample of older blocks.
Everything is columnar numpy over (blocks × sectors); the only Python loops are over findings.
Reading is in rig/check/verify/reads.py, the per-block rules in rig/check/verify/rules.py, the
finding types in rig/check/verify/findings.py; their public names are re-exported here for the
checker's callers.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rig.check import readback

# the classes are rows of rig/check/failures.py; their names are re-exported for the checker's
# callers
from rig.check.failures import (
    ALLOWED_LOSS,
    COLLATERAL,
    CORRUPTION,
    COUNTER_ANOMALY,
    DEAD,
    FLYING,
    HANG,
    LOST_DURABLE,
    READ_ERROR,
    RESURRECTED,
    SHORN,
    SLOW_READY,
    UNCHECKED,
    UNSERIALIZABLE,
)
from rig.check.verify.evidence import CycleWrites, sorted_unique
from rig.check.verify.findings import NO_OP, CheckResult, Finding, drive_finding
from rig.check.verify.read_spans import Judging
from rig.check.verify.reads import (
    GONE_ERRNOS,
    BlockReader,
    Budget,
    DriveGone,
    ReadBack,
    ReadFailure,
    ReadPolicy,
    Unread,
    runs,
)
from rig.io.ledger import CycleLog, Durability, LbaState

__all__ = [
    "ALLOWED_LOSS",
    "COLLATERAL",
    "CORRUPTION",
    "COUNTER_ANOMALY",
    "DEAD",
    "FLYING",
    "GONE_ERRNOS",
    "HANG",
    "LOST_DURABLE",
    "NO_OP",
    "READ_ERROR",
    "RESURRECTED",
    "SCAN_CHUNK_BLOCKS",
    "SHORN",
    "SLOW_READY",
    "UNCHECKED",
    "UNSERIALIZABLE",
    "BlockReader",
    "Budget",
    "CheckResult",
    "DriveGone",
    "Finding",
    "ReadFailure",
    "ReadPolicy",
    "Unread",
    "check",
    "drive_finding",
    "runs",
    "scan_rest",
]


def check(
    campaign: int,
    state: LbaState,
    log: CycleLog,
    durability: Durability,
    extra_blocks: npt.NDArray[np.int64],
    read: BlockReader | readback.Reader,
    block_size: int,
    max_read_blocks: int = 256,
    policy: ReadPolicy | None = None,
    atomic_blocks: int = 1,
    budget: Budget | None = None,
    zeroes: bool = False,
) -> CheckResult:
    """Read back and classify this cycle's blocks plus `extra_blocks`; update `state.committed`.

    Per-block rules (docs/checker.md; `rules.claims`): unreadable -> read error; a sector
    failing its checksum -> bit corruption (block written this cycle) or collateral damage (not
    written); old damage still there under a durable write of this cycle -> lost durable write;
    a valid sector written for another LBA -> flying write; sectors of different generations ->
    shorn write; a whole block older than its floor -> lost durable write (a durable write of this
    cycle) or collateral damage; zeros where older data was committed -> metadata loss (a read
    error of kind "unmapped"); a generation newer than the floor that this cycle never wrote ->
    flying write. A block several rules claim takes the class of strongest precedence in the
    class table (rig/check/failures.py). With `atomic_blocks` > 1 (the drive's physical block or
    atomic write unit, in logical blocks), a write that covered a whole aligned unit must
    survive in it all or nothing: a unit holding some of its blocks new and others old is shorn
    too.

    Discards (docs/checker.md, "Discards") are writes of the log with the discard flag: zeroes
    read where one was issued stand for its generation. With `zeroes` (the drive promises
    zeroes after a discard) an acknowledged, flushed discard raises the floor like a write, and
    a block reading its data from before it is a resurrected discard; without, a discard
    leaves the block open to zeroes or its old data."""
    policy = policy or ReadPolicy()
    cyc = CycleWrites(log, durability, zeroes)
    checked = sorted_unique(np.concatenate([cyc.lba, extra_blocks.astype(np.int64)]))
    idx = checked - state.first_lba
    budget = budget or Budget(policy.max_reads, policy.max_hangs)
    with ReadBack(checked, read, block_size, max_read_blocks, policy, budget) as reading:
        # the ledger's side of the evidence, while the first batches are read
        judging = Judging(
            campaign, cyc, checked, state.committed, idx, atomic_blocks, state.trimmed, zeroes
        )
        try:
            # each batch judged and settled as soon as it is read and parsed, while the next
            # ones are read
            reads = reading.collect(judging.take)
        except BaseException:
            judging.undo()  # a check that stops leaves the state as it found it
            raise
    findings = list(reads.errors)
    judged, nondurable, survived = judging.findings(reads)
    findings.extend(judged)
    unread = reads.unread
    unchecked = sum(f.lba_count for f in unread)
    return CheckResult(findings, len(checked) - unchecked, nondurable, survived, unchecked, unread)


SCAN_CHUNK_BLOCKS = 1 << 16  # ~20 MiB of per-block working arrays per chunk of a full scan


def scan_rest(
    campaign: int,
    state: LbaState,
    judged: npt.NDArray[np.int64],
    read: BlockReader,
    block_size: int,
    max_read_blocks: int = 256,
    policy: ReadPolicy | None = None,
    chunk_blocks: int | None = None,
    zeroes: bool = False,
) -> CheckResult:
    """The rest of a full scan: every block of the region not in `judged` (the blocks `check`
    has judged this cycle, which hold all of the cycle's writes), `chunk_blocks` at a time so
    memory stays bounded on a region of any size. Blocks this cycle did not write are judged
    against their committed generation alone, so an empty cycle gives them exactly the findings
    `check` would. One read budget covers the whole scan (a dying drive is not re-tried chunk
    after chunk). A run of damaged blocks that crosses a chunk boundary is two findings."""
    policy = policy or ReadPolicy()
    chunk_blocks = chunk_blocks or SCAN_CHUNK_BLOCKS
    budget = Budget(policy.max_reads, policy.max_hangs)
    empty = CycleLog()
    no_writes = empty.durability(0, 0)
    judged = np.unique(judged.astype(np.int64))
    reader = readback.reader_for(read, block_size, policy.timeout_s)  # one queue for the scan
    findings: list[Finding] = []
    unread: list[Finding] = []
    checked = 0
    end = state.first_lba + state.nblocks
    for lo in range(state.first_lba, end, chunk_blocks):
        hi = min(lo + chunk_blocks, end)
        a, b = np.searchsorted(judged, [lo, hi])
        blocks = np.setdiff1d(np.arange(lo, hi, dtype=np.int64), judged[a:b], assume_unique=True)
        if len(blocks):
            part = check(
                campaign, state, empty, no_writes, blocks, reader, block_size,
                max_read_blocks, policy, budget=budget, zeroes=zeroes,
            )  # fmt: skip
            findings.extend(part.findings)
            checked += part.blocks_checked
            unread.extend(part.unchecked)
    return CheckResult(findings, checked, 0, 0, sum(f.lba_count for f in unread), unread)
