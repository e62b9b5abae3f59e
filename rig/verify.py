"""Classify what survived a cut against the ledger (ARCHITECTURE §4).

The check is O(blocks checked): the blocks written in the cycle plus a sample of older blocks.
Everything is columnar numpy over (blocks × sectors); the only Python loops are over findings.

Per block, `floor` is the generation the block must at least read back: the newest durable write
of this cycle, else the committed generation from before the cycle. Any newer generation written
this cycle (acknowledged but unflushed, or in flight) may survive or not, whole per atomic unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rig import media
from rig.ledger import UNKNOWN, CycleLog, Durability, LbaState

LOST_DURABLE = "lost_durable_write"
UNSERIALIZABLE = "unserializable_write"
SHORN = "shorn_write"
CORRUPTION = "bit_corruption"
FLYING = "flying_write"
COLLATERAL = "collateral_damage"
READ_ERROR = "read_error"
DEAD = "dead_device"
COUNTER_ANOMALY = "counter_anomaly"  # from the health phase (rig/health/tracker.py)
ALLOWED_LOSS = "allowed_loss"  # a non-durable write lost whole per unit: allowed, reported
FAILURE_CLASSES = (
    LOST_DURABLE,
    UNSERIALIZABLE,
    SHORN,
    CORRUPTION,
    FLYING,
    COLLATERAL,
    READ_ERROR,
    DEAD,
    COUNTER_ANOMALY,
)

NO_OP = -1


@dataclass(frozen=True)
class Finding:
    cls: str
    lba_first: int
    lba_count: int
    expected_gen: int
    observed_gen: int
    expected_op: int = NO_OP  # op_seq of the write that should be there (this cycle's writes)
    observed_op: int = NO_OP  # op_seq found in the block's headers
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def failure(self) -> bool:
        return self.cls in FAILURE_CLASSES


@dataclass(frozen=True)
class CheckResult:
    findings: list[Finding]
    blocks_checked: int
    nondurable_writes: int
    nondurable_survived: int


BlockReader = Callable[[int, int], npt.NDArray[np.uint8]]


def runs(lbas: npt.NDArray[np.int64], longest: int) -> Iterator[tuple[int, int]]:
    """(first, count) runs of consecutive LBAs, each at most `longest` long."""
    if len(lbas) == 0:
        return
    breaks = np.flatnonzero(np.diff(lbas) != 1) + 1
    for run in np.split(lbas, breaks):
        for start in range(0, len(run), longest):
            yield int(run[start]), min(longest, len(run) - start)


class _Cycle:
    """This cycle's writes expanded to one entry per block, with each write's durability."""

    def __init__(self, log: CycleLog, durability: Durability) -> None:
        nblocks = log.column("nblocks")
        total = int(nblocks.sum())
        self.write = np.repeat(np.arange(len(nblocks)), nblocks)
        offset_in_write = np.arange(total) - np.repeat(log.column("gen_offset"), nblocks)
        self.lba = np.repeat(log.column("first_lba"), nblocks) + offset_in_write
        self.gen = log.generations().astype(np.int64)
        self.durable = durability.durable[self.write]
        self.op_seq = log.column("op_seq")
        self.worker = log.column("worker")
        self.issue_ns = log.column("issue_ns")
        self.complete_ns = log.column("complete_ns")
        self.acked = durability.acked
        self.durability = durability
        self.keys = np.sort(self.lba << 32 | self.gen)


def check(
    campaign: int,
    state: LbaState,
    log: CycleLog,
    durability: Durability,
    extra_blocks: npt.NDArray[np.int64],
    read: BlockReader,
    block_size: int,
    max_read_blocks: int = 256,
) -> CheckResult:
    """Read back and classify this cycle's blocks plus `extra_blocks`; update `state.committed`."""
    cyc = _Cycle(log, durability)
    checked = np.unique(np.concatenate([cyc.lba, extra_blocks.astype(np.int64)]))
    idx = checked - state.first_lba
    committed = state.committed[idx].astype(np.int64)

    # floor: newest durable generation of this cycle, else the committed one
    pos = np.searchsorted(checked, cyc.lba)
    floor = committed.copy()
    floor_write = np.full(len(checked), NO_OP, dtype=np.int64)
    durable_pos, durable_gen = pos[cyc.durable], cyc.gen[cyc.durable]
    has_durable = np.zeros(len(checked), dtype=bool)
    has_durable[durable_pos] = True
    cycle_floor = np.zeros(len(checked), dtype=np.int64)
    np.maximum.at(cycle_floor, durable_pos, durable_gen)
    floor[has_durable] = cycle_floor[has_durable]
    top = durable_gen == floor[durable_pos]
    floor_write[durable_pos[top]] = cyc.write[cyc.durable][top]

    per_block = block_size // media.SECTOR
    findings: list[Finding] = []
    obs_gen = np.full(len(checked), -1, dtype=np.int64)
    obs_op = np.full(len(checked), NO_OP, dtype=np.int64)
    klass = np.full(len(checked), "", dtype=object)
    tear_at: dict[int, list[int]] = {}
    readable = np.ones(len(checked), dtype=bool)
    sectors_lba = np.zeros((len(checked), per_block), dtype=np.int64)
    sectors_gen = np.zeros((len(checked), per_block), dtype=np.int64)
    sectors_state = np.zeros((len(checked), per_block), dtype=np.uint8)
    sectors_op = np.zeros((len(checked), per_block), dtype=np.int64)
    sectors_campaign = np.zeros((len(checked), per_block), dtype=np.uint64)

    for first, count in runs(checked, max_read_blocks):
        start = int(np.searchsorted(checked, first))
        rows = slice(start, start + count)
        try:
            data = _read_with_retries(read, first, count)
        except OSError as error:
            readable[rows] = False
            findings.append(
                Finding(
                    READ_ERROR,
                    first,
                    count,
                    -1,
                    -1,
                    detail={"errno": error.errno, "error": str(error)},
                )
            )
            continue
        sectors = media.parse(data)
        sectors_state[rows] = sectors.state.reshape(count, per_block)
        sectors_lba[rows] = sectors.lba.astype(np.int64).reshape(count, per_block)
        sectors_gen[rows] = sectors.generation.astype(np.int64).reshape(count, per_block)
        sectors_op[rows] = sectors.op_seq.astype(np.int64).reshape(count, per_block)
        sectors_campaign[rows] = sectors.campaign.reshape(count, per_block)

    ours = (sectors_state == media.VALID) & (sectors_campaign == np.uint64(campaign))
    # a sector that is all zero or another campaign's counts as generation 0: nothing of ours
    sector_gen = np.where(ours, sectors_gen, 0)
    corrupt = (sectors_state == media.CORRUPT).any(axis=1)
    misplaced = (ours & (sectors_lba != checked[:, None])).any(axis=1)
    mixed = (sector_gen != sector_gen[:, :1]).any(axis=1)
    gen = sector_gen[:, 0]
    obs_gen[:] = gen
    obs_op[:] = np.where(ours[:, 0], sectors_op[:, 0], NO_OP)
    unknown = committed == int(UNKNOWN)
    judged = readable & ~(unknown & ~has_durable)
    # A block whose old content is unknown (an earlier finding) is still judged for a tear of
    # this cycle's write: some sectors carry one of its generations and others do not.
    rejudged = readable & unknown & ~has_durable
    if rejudged.any():
        unsure = np.flatnonzero(rejudged)
        sector_keys = checked[unsure, None] << 32 | sector_gen[unsure]
        touched = np.isin(sector_keys, cyc.keys).any(axis=1)
        rejudged[unsure[~touched]] = False

    klass[judged & corrupt] = CORRUPTION
    klass[judged & ~corrupt & misplaced] = FLYING
    shorn = (judged | rejudged) & ~corrupt & ~misplaced & mixed
    klass[shorn] = SHORN
    for row in np.flatnonzero(shorn):
        tear_at[int(row)] = (np.flatnonzero(np.diff(sector_gen[row]) != 0) + 1).tolist()

    whole = judged & ~corrupt & ~misplaced & ~mixed
    key = checked << 32 | gen
    in_cycle = np.isin(key, cyc.keys)
    older = whole & (gen < floor)
    klass[older & has_durable] = LOST_DURABLE
    klass[older & ~has_durable] = COLLATERAL
    # newer than the floor but not a write of this cycle: data where it was never written
    klass[whole & (gen > floor) & ~in_cycle] = FLYING

    # new committed state: whatever a whole, well-placed block holds now; unknown otherwise
    new_committed = np.where(whole, gen, int(UNKNOWN))
    new_committed = np.where(readable, new_committed, committed)
    state.committed[idx] = new_committed.astype(np.uint32)

    blocks = _Classified(checked, klass, floor, obs_gen, floor_write, obs_op, tear_at)
    findings.extend(_merge(blocks, cyc))
    allowed, nondurable, survived = _nondurable_outcomes(cyc, checked, obs_gen, readable, klass)
    findings.extend(allowed)
    findings.extend(_unserializable(cyc, checked, obs_gen, klass))
    return CheckResult(findings, len(checked), nondurable, survived)


def _read_with_retries(
    read: BlockReader, first: int, count: int, attempts: int = 3
) -> npt.NDArray[np.uint8]:
    for attempt in range(attempts):
        try:
            return read(first, count)
        except OSError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class _Classified:
    """Per checked block: its class ("" = fine), the generation it had to hold at least, what it
    holds, and the writes behind both; plus the tear offsets of shorn blocks by row."""

    checked: npt.NDArray[np.int64]
    klass: npt.NDArray[Any]
    floor: npt.NDArray[np.int64]
    obs_gen: npt.NDArray[np.int64]
    floor_write: npt.NDArray[np.int64]
    obs_op: npt.NDArray[np.int64]
    tear_at: dict[int, list[int]]

    def continues(self, prev: int, row: int) -> bool:
        """Same finding: consecutive LBAs, same class, same expected and observed writes."""
        return bool(
            self.checked[row] == self.checked[prev] + 1
            and self.klass[row] == self.klass[prev]
            and self.floor_write[row] == self.floor_write[prev]
            and self.obs_op[row] == self.obs_op[prev]
            and self.klass[row] not in (SHORN, CORRUPTION)  # each torn/corrupt block stands alone
        )


def _merge(blocks: _Classified, cyc: _Cycle) -> Iterator[Finding]:
    """One finding per run of consecutive blocks with the same class and the same writes."""
    run: list[int] = []
    for row in np.flatnonzero(blocks.klass != "").tolist():
        if run and not blocks.continues(run[-1], row):
            yield _finding(run, blocks, cyc)
            run = []
        run.append(row)
    if run:
        yield _finding(run, blocks, cyc)


def _finding(run: list[int], blocks: _Classified, cyc: _Cycle) -> Finding:
    first = run[0]
    cls = str(blocks.klass[first])
    write = int(blocks.floor_write[first])
    detail: dict[str, Any] = {}
    expected_op = NO_OP
    if write != NO_OP:
        expected_op = int(cyc.op_seq[write])
        detail["expected_worker"] = int(cyc.worker[write])
        if cls == LOST_DURABLE:
            detail["ack_to_cut_ns"] = int(cyc.durability.ack_to_cut_ns[write])
            detail["flush_to_cut_ns"] = int(cyc.durability.flush_to_cut_ns[write])
    if cls == SHORN:
        detail["tear_sectors"] = blocks.tear_at[first]
    if len(run) > 1:
        detail["observed_gens"] = [int(blocks.obs_gen[r]) for r in run][:64]
    return Finding(
        cls,
        int(blocks.checked[first]),
        len(run),
        int(blocks.floor[first]),
        int(blocks.obs_gen[first]),
        expected_op,
        int(blocks.obs_op[first]),
        detail,
    )


def _nondurable_outcomes(
    cyc: _Cycle,
    checked: npt.NDArray[np.int64],
    obs_gen: npt.NDArray[np.int64],
    readable: npt.NDArray[np.bool_],
    klass: npt.NDArray[Any],
) -> tuple[list[Finding], int, int]:
    """Non-durable writes of this cycle: how many survived, and an allowed-loss row per loss."""
    pos = np.searchsorted(checked, cyc.lba)
    visible = obs_gen[pos] >= cyc.gen  # its data, or a newer write over it, reads back
    clean = readable[pos] & (klass[pos] == "")
    nondurable = ~cyc.durability.durable
    writes = np.flatnonzero(nondurable)
    if len(writes) == 0:
        return [], 0, 0
    lost_blocks = np.bincount(cyc.write, weights=~visible & clean, minlength=len(nondurable))
    findings = []
    for write in writes[lost_blocks[writes] > 0].tolist():
        entries = np.flatnonzero(cyc.write == write)
        first = int(cyc.lba[entries[0]])
        outcome = "lost" if lost_blocks[write] == len(entries) else "partial"
        findings.append(
            Finding(
                ALLOWED_LOSS,
                first,
                len(entries),
                int(cyc.gen[entries[0]]),
                int(obs_gen[pos[entries[0]]]),
                int(cyc.op_seq[write]),
                NO_OP,
                {"acknowledged": bool(cyc.acked[write]), "outcome": outcome},
            )
        )
    return findings, len(writes), len(writes) - len(findings)


def _unserializable(
    cyc: _Cycle,
    checked: npt.NDArray[np.int64],
    obs_gen: npt.NDArray[np.int64],
    klass: npt.NDArray[Any],
) -> list[Finding]:
    """FAST'13 serializability: a durable write lost while a write issued after its completion
    survived. One finding per cut, with the count of such lost writes."""
    pos = np.searchsorted(checked, cyc.lba)
    lost_durable = np.zeros(len(cyc.op_seq), dtype=bool)
    lost_durable[cyc.write[(klass[pos] == LOST_DURABLE) & cyc.durable]] = True
    survived = np.zeros(len(cyc.op_seq), dtype=bool)
    survived[cyc.write[obs_gen[pos] == cyc.gen]] = True
    if not lost_durable.any() or not survived.any():
        return []
    latest_survivor_issue = cyc.issue_ns[survived].max()
    victims = np.flatnonzero(lost_durable & (cyc.complete_ns < latest_survivor_issue))
    if len(victims) == 0:
        return []
    first = int(cyc.lba[np.flatnonzero(cyc.write == victims[0])[0]])
    return [
        Finding(
            UNSERIALIZABLE,
            first,
            1,
            -1,
            -1,
            int(cyc.op_seq[victims[0]]),
            NO_OP,
            {"lost_writes": len(victims)},
        )
    ]
