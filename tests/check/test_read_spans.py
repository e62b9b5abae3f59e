"""The checker applies its rules window by window while the next windows are read
(docs/decisions.md, "Rules run per group of batches while later batches are read"):
on random cycles (overlapping writes in any order, torn and dropped writes, flushes anywhere,
bit flips, zeroed, reverted and misdirected blocks, failing reads, blocks of unknown content,
atomic units of 1, 2 and 4 blocks, small windows parsed on the helper threads), it gives exactly
the findings, counts and committed state of the rules applied in one pass over the whole region
after the last read, as the checker did before (`whole_region_check` below)."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from unittest.mock import patch

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rig.check import verify
from rig.check.verify import evidence as verify_evidence
from rig.check.verify import read_spans
from rig.check.verify import reads as verify_reads
from rig.check.verify.rules import (
    FINE,
    Classified,
    atomic_tears,
    claims,
    code,
    merge,
    resolve,
    settle,
)
from rig.io.ledger import NOT_DONE, CycleLog, Durability, LbaState, uncertain
from tests.checker_scenario import BS, CAMPAIGN, Scenario

N = 96


def _nondurable_outcomes(
    cyc: verify_evidence.CycleWrites,
    checked: npt.NDArray[np.int64],
    obs_gen: npt.NDArray[np.int64],
    readable: npt.NDArray[np.bool_],
    klass: npt.NDArray[np.uint8],
) -> tuple[list[verify.Finding], int, int]:
    """The non-durable writes' outcomes over all blocks at once (the checker before 450)."""
    pos = cyc.positions(checked)
    visible = obs_gen[pos] >= cyc.gen
    clean = readable[pos] & (klass[pos] == FINE)
    nondurable = ~cyc.durability.durable
    writes = np.flatnonzero(nondurable)
    if len(writes) == 0:
        return [], 0, 0
    lost_blocks = np.bincount(cyc.write, weights=~visible & clean, minlength=len(nondurable))
    findings = []
    for write in writes[lost_blocks[writes] > 0].tolist():
        entries = np.flatnonzero(cyc.write == write)
        outcome = "lost" if lost_blocks[write] == len(entries) else "partial"
        findings.append(
            verify.Finding(
                cls=verify.ALLOWED_LOSS,
                lba_first=int(cyc.lba[entries[0]]),
                lba_count=len(entries),
                expected_gen=int(cyc.gen[entries[0]]),
                observed_gen=int(obs_gen[pos[entries[0]]]),
                expected_op=int(cyc.op_seq[write]),
                detail={"acknowledged": bool(cyc.acked[write]), "outcome": outcome},
            )
        )
    return findings, len(writes), len(writes) - len(findings)


def _unserializable(
    cyc: verify_evidence.CycleWrites,
    checked: npt.NDArray[np.int64],
    held: npt.NDArray[np.int64],
    klass: npt.NDArray[np.uint8],
) -> list[verify.Finding]:
    """The unserializable writes over all blocks at once (the checker before 450)."""
    pos = cyc.positions(checked)
    lost_entry = (klass[pos] == code(verify.LOST_DURABLE)) & cyc.durable & (held[pos] < cyc.gen)
    lost_durable = np.zeros(len(cyc.op_seq), dtype=bool)
    lost_durable[cyc.write[lost_entry]] = True
    survived = np.zeros(len(cyc.op_seq), dtype=bool)
    survived[cyc.write[(held[pos] == cyc.gen) & (klass[pos] == FINE)]] = True
    if not lost_durable.any() or not survived.any():
        return []
    victims = np.flatnonzero(lost_durable & (cyc.complete_ns < cyc.issue_ns[survived].max()))
    if len(victims) == 0:
        return []
    later = np.flatnonzero(survived & (cyc.issue_ns > cyc.complete_ns[victims[0]]))
    return [
        verify.Finding(
            cls=verify.UNSERIALIZABLE,
            lba_first=int(cyc.lba[np.flatnonzero(cyc.write == victims[0])[0]]),
            lba_count=int(cyc.log_nblocks[victims[0]]),
            expected_gen=-1,
            observed_gen=-1,
            expected_op=int(cyc.op_seq[victims[0]]),
            observed_op=int(cyc.op_seq[later[0]]) if len(later) else verify.NO_OP,
            detail={
                "lost_writes": len(victims),
                "lost_writes_worker_op": [
                    [int(w), int(op)]
                    for w, op in zip(
                        cyc.worker[victims][:64], cyc.op_seq[victims][:64], strict=True
                    )
                ],
            },
        )
    ]


def whole_region_check(
    state: LbaState,
    log: CycleLog,
    durability: Durability,
    extra: npt.NDArray[np.int64],
    read: verify.BlockReader,
    max_read_blocks: int,
    atomic_blocks: int,
) -> verify.CheckResult:
    """Every block read first, then every rule over the whole region at once."""
    policy = verify.ReadPolicy()
    cyc = verify_evidence.CycleWrites(log, durability)
    checked = verify_evidence.sorted_unique(np.concatenate([cyc.lba, extra]))
    idx = checked - state.first_lba
    budget = verify.Budget(policy.max_reads, policy.max_hangs)
    with verify_reads.ReadBack(checked, read, BS, max_read_blocks, policy, budget) as reading:
        reads = reading.collect()
    committed = state.committed[idx].astype(np.int64)
    ev = verify_evidence.evidence(CAMPAIGN, cyc, checked, committed, reads)
    klass = resolve(len(checked), claims(ev))
    state.committed[idx] = settle(ev, committed).astype(np.uint32)
    held = np.where(ev.sound, ev.gen, -1)
    if atomic_blocks > 1:
        atomic_tears(cyc, checked, held, klass, atomic_blocks)
    blocks = Classified(
        checked, klass, ev.floor, ev.obs_gen, ev.floor_write, ev.obs_op, ev.obs_worker,
        reads.sectors, CAMPAIGN, ev.zeroed,
    )  # fmt: skip
    findings = [*reads.errors, *merge(blocks, cyc)]
    allowed, nondurable, survived = _nondurable_outcomes(
        cyc, checked, ev.obs_gen, ev.readable, klass
    )
    findings.extend(allowed)
    findings.extend(_unserializable(cyc, checked, held, klass))
    unchecked = sum(f.lba_count for f in reads.unread)
    return verify.CheckResult(
        findings, len(checked) - unchecked, nondurable, survived, unchecked, reads.unread
    )


@dataclass
class RandomCycle:
    scenario: Scenario
    extra: npt.NDArray[np.int64]
    cut: int
    atomic: int


def _first_cycle(draw: st.DrawFn) -> tuple[Scenario, npt.NDArray[np.uint8], int]:
    """Every block written and flushed, some twice (an older version to revert to), some left of
    unknown content; the image after the first writes."""
    s = Scenario(nblocks=N)
    t = 0
    for lba in range(0, N, 8):
        s.write(lba, 8, issue=t, complete=t + 1)
        t += 2
    first = s.image.copy()
    for lba in draw(st.sets(st.integers(0, N - 4), max_size=8)):
        s.write(lba, 4, issue=t, complete=t + 1)
        t += 2
    s.flush(t, t + 1)
    s.check(cut=t + 10, extra=list(range(N)))
    s.new_cycle()
    unknown = np.array(sorted(draw(st.sets(st.integers(0, N - 1), max_size=12))), dtype=np.int64)
    if len(unknown):
        s.state.committed[unknown] = uncertain(s.state.committed[unknown])
    return s, first, t + 100


@st.composite
def random_cycle(draw: st.DrawFn) -> RandomCycle:
    s, first, t = _first_cycle(draw)
    for _ in range(draw(st.integers(1, 14))):
        if draw(st.integers(0, 4)) == 0:
            s.flush(t, t + draw(st.integers(1, 40)))
        lba, count = draw(st.integers(0, N - 4)), draw(st.integers(1, 4))
        landing = draw(st.sampled_from(("whole", "whole", "none", "torn", "blocks", "blocks")))
        done = draw(st.sampled_from((t + draw(st.integers(1, 40)), NOT_DONE)))
        data = s.write(lba, count, issue=t, complete=done, land=landing == "whole",
                       fua=draw(st.booleans()))  # fmt: skip
        if landing == "torn":  # some leading sectors of the write landed
            keep = draw(st.integers(1, count * BS // 512 - 1)) * 512
            s.image[lba * BS : lba * BS + keep] = data[:keep]
        if landing == "blocks" and count > 1:  # some leading blocks (an atomic unit's tear)
            keep = draw(st.integers(1, count - 1)) * BS
            s.image[lba * BS : lba * BS + keep] = data[:keep]
        t += draw(st.integers(1, 6))
    image = s.image
    for _ in range(draw(st.integers(0, 3))):
        image[draw(st.integers(0, N * BS - 1))] ^= 1 << draw(st.integers(0, 7))
    for _ in range(draw(st.integers(0, 2))):
        lba = draw(st.integers(0, N - 1))
        how = draw(st.sampled_from(("zero", "revert", "misdirect")))
        source = first[lba * BS : (lba + 1) * BS]
        if how == "misdirect":
            other = draw(st.integers(0, N - 1))
            source = image[other * BS : (other + 1) * BS].copy()
        image[lba * BS : (lba + 1) * BS] = 0 if how == "zero" else source
    for _ in range(draw(st.integers(0, 2))):
        start = draw(st.integers(0, N - 1))
        s.failing |= set(range(start, min(N, start + draw(st.integers(1, 5)))))
    extra = np.array(sorted(draw(st.sets(st.integers(0, N - 1), max_size=N))), dtype=np.int64)
    atomic = draw(st.sampled_from((1, 2, 2, 4)))
    return RandomCycle(s, extra, t + draw(st.integers(-30, 30)), atomic)


@settings(max_examples=300, deadline=None)
@given(random_cycle(), st.integers(1, 8), st.integers(1, 4), st.integers(1, 2 * N))
def test_rules_per_batch_judge_like_one_pass_over_the_region(
    c: RandomCycle, chunk: int, window: int, group: int
) -> None:
    s = c.scenario
    everything = np.arange(N, dtype=np.int64)
    before = s.state.committed[everything].copy()
    durability = s.log.durability(c.cut, 0)
    whole = whole_region_check(s.state, s.log, durability, c.extra, s.read, chunk, c.atomic)
    committed_whole = s.state.committed[everything].copy()
    s.state.committed[everything] = before
    with (
        patch.object(verify_reads, "BATCH_BYTES", window * chunk * BS),
        patch.object(verify_reads, "PARSE_THREAD_BYTES", BS),
        patch.object(read_spans, "JUDGE_ROWS", group),
    ):
        windowed = verify.check(
            CAMPAIGN, s.state, s.log, durability, c.extra, s.read, BS, chunk,
            atomic_blocks=c.atomic,
        )  # fmt: skip
    assert windowed == whole
    assert (s.state.committed[everything] == committed_whole).all()


def test_a_check_stopped_by_a_vanished_drive_leaves_the_state_as_it_found_it() -> None:
    """Windows judged before the drive left have written their settled state: it is put back,
    as when nothing was settled before the last read."""
    s, _, t = _first_cycle(lambda strategy: set())  # (no rewrites, no unknown blocks)
    s.write(0, N, issue=t, complete=t + 1)  # a new generation everywhere: settling changes it
    s.flush(t + 2, t + 3)
    everything = np.arange(N, dtype=np.int64)
    before = s.state.committed[everything].copy()

    def read(lba: int, count: int) -> npt.NDArray[np.uint8]:
        if lba + count > N // 2:
            raise OSError(errno.ENODEV, "No such device")
        return s.read(lba, count)

    judged = []
    judge = read_spans.Judging.take

    def take(self: read_spans.Judging, rows: slice, reads: verify_reads.Reads) -> None:
        judged.append(rows)
        judge(self, rows, reads)

    with (
        patch.object(verify_reads, "BATCH_BYTES", 8 * BS),
        patch.object(read_spans, "JUDGE_ROWS", 8),
        patch.object(read_spans.Judging, "take", take),
        pytest.raises(verify.DriveGone),
    ):
        verify.check(CAMPAIGN, s.state, s.log, s.log.durability(t + 10, 0), everything, read,
                     BS, 8)  # fmt: skip
    assert judged, "windows before the vanishing were judged"
    assert (s.state.committed[everything] == before).all()
