"""Classify what survived a cut against the ledger (ARCHITECTURE §4).

The check is O(blocks checked): the blocks written in the cycle plus a sample of older blocks.
Everything is columnar numpy over (blocks × sectors); the only Python loops are over findings.

Per block, `floor` is the generation the block must at least read back: the newest durable write
of this cycle, else the committed generation from before the cycle. Any newer generation written
this cycle (acknowledged but unflushed, or in flight) may survive or not, whole per atomic unit.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rig import failures, media

# the classes are rows of rig/failures.py; their names are re-exported for the checker's callers
from rig.failures import (
    ALLOWED_LOSS,
    COLLATERAL,
    CORRUPTION,
    COUNTER_ANOMALY,  # noqa: F401 (re-exported for rig.campaign)
    DEAD,  # noqa: F401 (re-exported for rig.campaign)
    FLYING,
    LOST_DURABLE,
    READ_ERROR,
    SHORN,
    UNCHECKED,
    UNSERIALIZABLE,
)
from rig.ledger import CycleLog, Durability, LbaState, is_uncertain, known_floor, uncertain

NO_OP = -1
# What a read gets from a drive that left the bus under the checker (rig/blockio.py makes a
# removed disk's empty reads ENODEV; ENXIO: a device node without its device): the drive is gone,
# which is no read error of its media. The check stops (`DriveGone`), and the cycle is a rig
# ERROR whose blocks stay unjudged.
GONE_ERRNOS = frozenset({errno.ENODEV, errno.ENXIO})


class DriveGone(OSError):
    """The drive left the bus while the checker read it."""


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

    def __post_init__(self) -> None:
        failures.row(self.cls)  # KeyError for a class the table (rig/failures.py) does not hold

    @property
    def failure(self) -> bool:
        return failures.is_failure(self.cls)


def drive_finding(cls: str, detail: dict[str, Any]) -> Finding:
    """A finding about the whole drive, not a block range (dead, a health counter that moved
    wrongly, metadata lost at the bus): the one place such findings are built outside the
    checker's block rules. No LBAs, no generations."""
    return Finding(
        cls=cls, lba_first=0, lba_count=0, expected_gen=-1, observed_gen=-1, detail=detail
    )


@dataclass(frozen=True)
class CheckResult:
    findings: list[Finding]
    blocks_checked: int  # read back and judged
    nondurable_writes: int
    nondurable_survived: int
    blocks_unchecked: int = 0  # meant to be read, left unread by a read budget (not a failure)
    unchecked: list[Finding] = field(default_factory=list)  # where (class UNCHECKED), apart


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
        self.log_nblocks = nblocks
        self.worker = log.column("worker")
        self.issue_ns = log.column("issue_ns")
        self.complete_ns = log.column("complete_ns")
        self.acked = durability.acked
        self.durability = durability
        self.keys = np.sort(self.lba << 32 | self.gen)
        ok = log.column("flush_status") == 0
        self.flush_done = np.sort(log.column("flush_complete_ns")[ok])

    def last_flush_to_cut_ns(self, cut_ns: int) -> int:
        """Time from the last flush that completed before the cut to the cut (-1: none)."""
        before = self.flush_done[(self.flush_done >= 0) & (self.flush_done < cut_ns)]
        return int(cut_ns - before[-1]) if len(before) else -1


@dataclass(frozen=True)
class ReadPolicy:
    """How the checker reads: failing ranges are split down to single blocks; a single block is
    tried `attempts` times; a read that has not returned after `timeout_s` counts as a hang and is
    not retried (the drive is sitting on it). `max_reads` bounds the extra reads spent on failing
    ranges per check, `max_hangs` the hangs (each costs a timeout); past either, what is left is
    `unchecked` (counted and reported, never a read error: no read of those blocks failed)."""

    attempts: int = 2
    timeout_s: float | None = None
    max_reads: int = 2048
    max_hangs: int = 16


@dataclass(frozen=True)
class _Sectors:
    """Per checked block × sector: what the headers say (rows of unreadable blocks stay zero)."""

    state: npt.NDArray[np.uint8]
    lba: npt.NDArray[np.int64]
    gen: npt.NDArray[np.int64]
    op: npt.NDArray[np.int64]
    worker: npt.NDArray[np.int64]
    campaign: npt.NDArray[np.uint64]

    @classmethod
    def empty(cls, rows: int, per_block: int) -> _Sectors:
        shape = (rows, per_block)
        return cls(
            np.full(shape, media.ZERO, dtype=np.uint8),
            np.zeros(shape, dtype=np.int64),
            np.zeros(shape, dtype=np.int64),
            np.zeros(shape, dtype=np.int64),
            np.zeros(shape, dtype=np.int64),
            np.zeros(shape, dtype=np.uint64),
        )

    def fill(self, rows: slice, data: npt.NDArray[np.uint8]) -> None:
        parsed = media.parse(data)
        count = rows.stop - rows.start
        self.state[rows] = parsed.state.reshape(count, -1)
        self.lba[rows] = parsed.lba.astype(np.int64).reshape(count, -1)
        self.gen[rows] = parsed.generation.astype(np.int64).reshape(count, -1)
        self.op[rows] = parsed.op_seq.astype(np.int64).reshape(count, -1)
        self.worker[rows] = parsed.worker.astype(np.int64).reshape(count, -1)
        self.campaign[rows] = parsed.campaign.reshape(count, -1)


def check(
    campaign: int,
    state: LbaState,
    log: CycleLog,
    durability: Durability,
    extra_blocks: npt.NDArray[np.int64],
    read: BlockReader,
    block_size: int,
    max_read_blocks: int = 256,
    policy: ReadPolicy | None = None,
    atomic_blocks: int = 1,
    budget: _Budget | None = None,
) -> CheckResult:
    """Read back and classify this cycle's blocks plus `extra_blocks`; update `state.committed`.

    Per-block rules (docs/checker.md; `_claims`): unreadable -> read error; a sector failing its
    checksum -> bit corruption (block written this cycle) or collateral damage (not written);
    old damage still there under a durable write of this cycle -> lost durable write; a valid
    sector written for another LBA -> flying write; sectors of different generations -> shorn
    write; a whole block older than its floor -> lost durable write (a durable write of this
    cycle) or collateral damage; zeros where older data was committed -> metadata loss (a read
    error of kind "unmapped"); a generation newer than the floor that this cycle never wrote ->
    flying write. A block several rules claim takes the class of strongest precedence in the
    class table (rig/failures.py). With `atomic_blocks` > 1 (the drive's physical block or
    atomic write unit, in logical blocks), a write that covered a whole aligned unit must
    survive in it all or nothing: a unit holding some of its blocks new and others old is shorn
    too."""
    policy = policy or ReadPolicy()
    cyc = _Cycle(log, durability)
    checked = np.unique(np.concatenate([cyc.lba, extra_blocks.astype(np.int64)]))
    idx = checked - state.first_lba
    committed = state.committed[idx].astype(np.int64)
    budget = budget or _Budget(policy.max_reads, policy.max_hangs)
    reads = _read_blocks(checked, read, block_size, max_read_blocks, policy, budget)
    ev = _evidence(campaign, cyc, checked, committed, reads)
    klass = _resolve(len(checked), _claims(ev))
    state.committed[idx] = _settle(ev, committed).astype(np.uint32)

    held = np.where(ev.sound, ev.gen, -1)  # -1: damaged, unread
    if atomic_blocks > 1:
        _atomic_tears(cyc, checked, held, klass, atomic_blocks)
    sec = reads.sectors
    blocks = _Classified(
        checked,
        klass,
        ev.floor,
        ev.obs_gen,
        ev.floor_write,
        ev.obs_op,
        ev.obs_worker,
        ev.sector_gen,
        sec.state == media.CORRUPT,
        sec.lba,
    )
    findings = list(reads.errors)
    findings.extend(_merge(blocks, cyc))
    allowed, nondurable, survived = _nondurable_outcomes(
        cyc, checked, ev.obs_gen, ev.readable, klass
    )
    findings.extend(allowed)
    findings.extend(_unserializable(cyc, checked, held, klass))
    unread = reads.unread
    unchecked = sum(f.lba_count for f in unread)
    return CheckResult(findings, len(checked) - unchecked, nondurable, survived, unchecked, unread)


@dataclass(frozen=True)
class _Reads:
    """What reading the checked blocks gave: their sectors' headers, which rows were read, the
    read errors and the ranges left unread."""

    sectors: _Sectors
    readable: npt.NDArray[np.bool_]
    errors: list[Finding]
    unread: list[Finding]


def _read_blocks(
    checked: npt.NDArray[np.int64],
    read: BlockReader,
    block_size: int,
    max_read_blocks: int,
    policy: ReadPolicy,
    budget: _Budget,
) -> _Reads:
    readable = np.ones(len(checked), dtype=bool)
    sec = _Sectors.empty(len(checked), block_size // media.SECTOR)
    errors: list[Finding] = []
    unread: list[Finding] = []
    for first, count in runs(checked, max_read_blocks):
        start = int(np.searchsorted(checked, first))
        for part_first, part_count, outcome in _read_range(read, first, count, policy, budget):
            rows = slice(start + part_first - first, start + part_first - first + part_count)
            if isinstance(outcome, Unread):
                # not read at all: treated like an unreadable block for the state (unchanged,
                # or uncertain if this cycle wrote it), but no read of it failed
                readable[rows] = False
                detail = {"reason": outcome.reason}
                unread.append(_unjudged(UNCHECKED, part_first, part_count, detail))
            elif isinstance(outcome, ReadFailure):
                readable[rows] = False
                errors.append(_unjudged(READ_ERROR, part_first, part_count, outcome.detail()))
            else:
                sec.fill(rows, outcome)
    return _Reads(sec, readable, errors, unread)


def _unjudged(cls: str, first: int, count: int, detail: dict[str, Any]) -> Finding:
    """A range whose content was not judged (unreadable, or not read): no generations."""
    return Finding(
        cls=cls, lba_first=first, lba_count=count, expected_gen=-1, observed_gen=-1, detail=detail
    )


@dataclass(frozen=True)
class _Evidence:
    """Per checked block: what the ledger says it must hold and what its sectors show."""

    readable: npt.NDArray[np.bool_]
    touched: npt.NDArray[np.bool_]  # written by this cycle
    has_durable: npt.NDArray[np.bool_]  # a durable write of this cycle covers it
    floor: npt.NDArray[np.int64]  # the generation it must at least hold
    floor_write: npt.NDArray[np.int64]  # the write of this cycle behind the floor (NO_OP: none)
    unknown: npt.NDArray[np.bool_]  # old content unknown (an earlier finding)
    corrupt: npt.NDArray[np.bool_]  # a sector fails its checksum
    misplaced: npt.NDArray[np.bool_]  # a valid sector of ours written for another LBA
    mixed: npt.NDArray[np.bool_]  # sectors of different generations
    sound: npt.NDArray[np.bool_]  # read, and none of the three above
    gen: npt.NDArray[np.int64]  # first sector's generation (0: nothing of ours)
    sector_gen: npt.NDArray[np.int64]
    obs_gen: npt.NDArray[np.int64]
    obs_op: npt.NDArray[np.int64]
    obs_worker: npt.NDArray[np.int64]
    carries_new: npt.NDArray[np.bool_]  # some sector holds a generation this cycle wrote here
    rejudged: npt.NDArray[np.bool_]  # unknown, unjudged, but this cycle's write reached it
    in_cycle: npt.NDArray[np.bool_]  # holds a generation this cycle wrote to it

    @property
    def judged(self) -> npt.NDArray[np.bool_]:
        """Read, and judged against its floor (its old content known, or a durable write of
        this cycle over it)."""
        return self.readable & ~(self.unknown & ~self.has_durable)


def _evidence(
    campaign: int,
    cyc: _Cycle,
    checked: npt.NDArray[np.int64],
    committed: npt.NDArray[np.int64],
    reads: _Reads,
) -> _Evidence:
    # floor: newest durable generation of this cycle, else the committed one (for a block whose
    # content is unknown: the oldest generation it may hold)
    pos = np.searchsorted(checked, cyc.lba)
    touched = np.zeros(len(checked), dtype=bool)
    touched[pos] = True
    floor = known_floor(committed)
    floor_write = np.full(len(checked), NO_OP, dtype=np.int64)
    durable_pos, durable_gen = pos[cyc.durable], cyc.gen[cyc.durable]
    has_durable = np.zeros(len(checked), dtype=bool)
    has_durable[durable_pos] = True
    cycle_floor = np.zeros(len(checked), dtype=np.int64)
    np.maximum.at(cycle_floor, durable_pos, durable_gen)
    floor[has_durable] = cycle_floor[has_durable]
    top = durable_gen == floor[durable_pos]
    floor_write[durable_pos[top]] = cyc.write[cyc.durable][top]

    sec, readable = reads.sectors, reads.readable
    unknown = is_uncertain(committed)
    ours = (sec.state == media.VALID) & (sec.campaign == np.uint64(campaign))
    # a sector that is all zero or another campaign's counts as generation 0: nothing of ours
    sector_gen = np.where(ours, sec.gen, 0)
    corrupt = (sec.state == media.CORRUPT).any(axis=1)
    misplaced = (ours & (sec.lba != checked[:, None])).any(axis=1)
    mixed = (sector_gen != sector_gen[:, :1]).any(axis=1)
    gen = sector_gen[:, 0]
    # A block whose old content is unknown (an earlier finding) is still judged for damage to
    # this cycle's write (torn, corrupt, misplaced) once some sector carries one of its
    # generations.
    sector_keys = checked[:, None] << 32 | sector_gen
    carries_new = (np.isin(sector_keys, cyc.keys) & ours & (sec.lba == checked[:, None])).any(1)
    # ... and for a flying write of this cycle: a sector written by this cycle for another LBA
    # does not belong there, whatever the block held before
    # (only rows of unknown, misplaced blocks are looked at: few, and the check stays cheap)
    open_rows = readable & unknown & ~has_durable
    lands_new = np.zeros(len(checked), dtype=bool)
    stray = np.flatnonzero(open_rows & misplaced)
    if len(stray):
        keys = sec.lba[stray] << 32 | sector_gen[stray]
        away = ours[stray] & (sec.lba[stray] != checked[stray, None])
        lands_new[stray] = (np.isin(keys, cyc.keys) & away).any(axis=1)
    return _Evidence(
        readable=readable,
        touched=touched,
        has_durable=has_durable,
        floor=floor,
        floor_write=floor_write,
        unknown=unknown,
        corrupt=corrupt,
        misplaced=misplaced,
        mixed=mixed,
        sound=readable & ~corrupt & ~misplaced & ~mixed,
        gen=gen,
        sector_gen=sector_gen,
        obs_gen=np.where(readable, gen, -1),
        obs_op=np.where(ours[:, 0], sec.op[:, 0], NO_OP),
        obs_worker=np.where(ours[:, 0], sec.worker[:, 0], NO_OP),
        carries_new=carries_new,
        rejudged=open_rows & (carries_new | lands_new),
        in_cycle=np.isin(checked << 32 | gen, cyc.keys),
    )


Claim = tuple[str, npt.NDArray[np.bool_]]  # a class, and the blocks a rule gives it


def _claims(ev: _Evidence) -> list[Claim]:
    """Every rule's class and the blocks it claims. Rules may overlap: `_resolve` gives each
    block the claimed class of strongest precedence (rig/failures.py), e.g. old damage under a
    lost durable write is that lost write, not the damage it shows; a misplaced sector makes a
    flying write, not a shorn one."""
    judged, sound, gen, floor = ev.judged, ev.sound, ev.gen, ev.floor
    # (an unknown block that this cycle's write reached is judged for damage to that write)
    damage_judged = judged | ev.rejudged
    intact = damage_judged & ~ev.corrupt
    # old damage (an earlier finding) still there, untouched by this cycle's durable write:
    # that write is lost, whatever the old damage looks like
    old_damage = (
        ev.readable
        & ev.unknown
        & ev.has_durable
        & ~ev.carries_new
        & (ev.corrupt | ev.misplaced | ev.mixed)
    )
    # A block whose content is unknown and that no durable write of this cycle reached is not
    # judged against one generation, but it may still not go back past its floor: older than
    # that, it lost data it was known to hold.
    older = sound & (gen < floor)
    unmapped = older & (gen == 0) & ~ev.has_durable & (floor > 0)
    return [
        (LOST_DURABLE, old_damage),
        (CORRUPTION, damage_judged & ev.corrupt & ev.touched),
        (COLLATERAL, judged & ev.corrupt & ~ev.touched),
        (FLYING, intact & ev.misplaced),
        (SHORN, intact & ev.mixed),
        (LOST_DURABLE, older & ev.has_durable),
        (COLLATERAL, older & ~ev.has_durable & ~unmapped),
        (READ_ERROR, unmapped),  # metadata loss: whole blocks read zero where data was
        # newer than the floor but not a write of this cycle: data where it was never written
        (FLYING, judged & sound & (gen > floor) & ~ev.in_cycle),
    ]


def _resolve(rows: int, claims: list[Claim]) -> npt.NDArray[Any]:
    """Each block's class ("" = fine): of the classes claiming it, the strongest by precedence."""
    klass = np.full(rows, "", dtype=object)
    weakest_first = sorted(claims, key=lambda c: failures.row(c[0]).precedence, reverse=True)
    for cls, blocks in weakest_first:
        klass[blocks] = cls
    return klass


def _settle(ev: _Evidence, committed: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The new committed state: whatever a whole, well-placed block holds now; unknown
    otherwise. An unknown block that was not judged is known again once it reads back whole:
    what it holds from now on is what it must keep holding, or a later loss there goes
    unseen."""
    unsure = uncertain(committed)  # keeps the floor: what it was last known to hold
    new_committed = np.where(ev.sound, ev.gen, unsure)
    # unreadable: unchanged if this cycle did not write it; else which version survived is unknown
    return np.where(ev.readable, new_committed, np.where(ev.touched, unsure, committed))


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
) -> CheckResult:
    """The rest of a full scan: every block of the region not in `judged` (the blocks `check`
    has judged this cycle, which hold all of the cycle's writes), `chunk_blocks` at a time so
    memory stays bounded on a region of any size. Blocks this cycle did not write are judged
    against their committed generation alone, so an empty cycle gives them exactly the findings
    `check` would. One read budget covers the whole scan (a dying drive is not re-tried chunk
    after chunk). A run of damaged blocks that crosses a chunk boundary is two findings."""
    policy = policy or ReadPolicy()
    chunk_blocks = chunk_blocks or SCAN_CHUNK_BLOCKS
    budget = _Budget(policy.max_reads, policy.max_hangs)
    empty = CycleLog()
    no_writes = empty.durability(0, 0)
    judged = np.unique(judged.astype(np.int64))
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
                campaign, state, empty, no_writes, blocks, read, block_size,
                max_read_blocks, policy, budget=budget,
            )  # fmt: skip
            findings.extend(part.findings)
            checked += part.blocks_checked
            unread.extend(part.unchecked)
    return CheckResult(findings, checked, 0, 0, sum(f.lba_count for f in unread), unread)


@dataclass(frozen=True)
class ReadFailure:
    """A range whose read failed: how (eio, timeout, hang) and after how many attempts."""

    kind: str
    errno: int | None
    message: str
    attempts: int

    def detail(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "errno": self.errno,
            "error": self.message,
            "attempts": self.attempts,
        }


@dataclass(frozen=True)
class Unread:
    """A range the check meant to read and did not (a budget was spent): `unchecked`."""

    reason: str


ReadOutcome = npt.NDArray[np.uint8] | ReadFailure | Unread


@dataclass
class _Budget:
    """What a check may still spend on failing reads: reads while splitting failing ranges,
    and reads that hang (each costs a whole timeout)."""

    reads: int
    hangs: int


def _read_range(
    read: BlockReader,
    first: int,
    count: int,
    policy: ReadPolicy,
    budget: _Budget,
    parent: ReadFailure | None = None,
) -> Iterator[tuple[int, int, ReadOutcome]]:
    """Read `count` blocks; a failing range is split in halves down to single blocks, so a bad
    range is located exactly while good neighbours are still checked. A block is a read error
    only when a read of it alone failed: past the budget, what is left of a failing range and
    any range not read at all (the drive hung too often) is `Unread` (some of it may read fine;
    calling it a read error would invent failures)."""
    if budget.hangs <= 0:
        yield first, count, Unread("the drive hung too often in this check")
        return
    if parent is not None and budget.reads <= 0:
        yield first, count, Unread(f"read budget spent inside a failing range ({parent.kind})")
        return
    attempts = policy.attempts if count == 1 else 1
    outcome = _attempt(read, first, count, policy, attempts, budget, parent is not None)
    if not isinstance(outcome, ReadFailure) or count == 1:
        yield first, count, outcome
        return
    half = count // 2
    yield from _read_range(read, first, half, policy, budget, outcome)
    yield from _read_range(read, first + half, count - half, policy, budget, outcome)


def _attempt(
    read: BlockReader,
    first: int,
    count: int,
    policy: ReadPolicy,
    attempts: int,
    budget: _Budget,
    splitting: bool,
) -> ReadOutcome:
    failure = ReadFailure("eio", None, "", 0)
    for attempt in range(1, attempts + 1):
        if splitting or attempt > 1:
            budget.reads -= 1
        try:
            return _timed_read(read, first, count, policy.timeout_s)
        except _Hung:
            budget.hangs -= 1
            return ReadFailure("hang", None, f"no answer within {policy.timeout_s} s", attempt)
        except OSError as error:
            if error.errno in GONE_ERRNOS:
                raise DriveGone(error.errno, f"drive gone during the check: {error}") from error
            kind = "timeout" if error.errno == errno.ETIMEDOUT else "eio"
            failure = ReadFailure(kind, error.errno, str(error), attempt)
        if budget.reads <= 0:
            break
    return failure


class _Hung(Exception):
    pass


def _timed_read(
    read: BlockReader, first: int, count: int, timeout_s: float | None
) -> npt.NDArray[np.uint8]:
    """A read that may not return: with a timeout it runs on a helper thread, which is left
    behind (daemon) if the drive never answers, so the campaign goes on."""
    if timeout_s is None:
        return read(first, count)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["data"] = read(first, count)
        except BaseException as error:  # an I/O error, or a bug: raised in the checker either way
            box["error"] = error

    thread = threading.Thread(target=run, name=f"check-read-{first}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise _Hung()
    if "error" in box:
        raise box["error"]
    data: npt.NDArray[np.uint8] = box["data"]
    return data


@dataclass(frozen=True)
class _Classified:
    """Per checked block: its class ("" = fine), the generation it had to hold at least, what it
    holds, the writes behind both, and its sectors' generations, damage and stored LBAs."""

    checked: npt.NDArray[np.int64]
    klass: npt.NDArray[Any]
    floor: npt.NDArray[np.int64]
    obs_gen: npt.NDArray[np.int64]
    floor_write: npt.NDArray[np.int64]
    obs_op: npt.NDArray[np.int64]
    obs_worker: npt.NDArray[np.int64]
    sector_gen: npt.NDArray[np.int64]
    corrupt_sector: npt.NDArray[np.bool_]
    sector_lba: npt.NDArray[np.int64]

    def continues(self, prev: int, row: int) -> bool:
        """Same finding: consecutive LBAs, same class, same expected and observed writes."""
        return bool(
            self.checked[row] == self.checked[prev] + 1
            and self.klass[row] == self.klass[prev]
            and self.floor_write[row] == self.floor_write[prev]
            and self.obs_op[row] == self.obs_op[prev]
            and self.klass[row] not in (SHORN, CORRUPTION, COLLATERAL)  # each stands alone
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
    lba = int(blocks.checked[first])
    detail: dict[str, Any] = {}
    expected_op = NO_OP
    if write != NO_OP:
        expected_op = int(cyc.op_seq[write])
        detail["expected_worker"] = int(cyc.worker[write])
        if cls == LOST_DURABLE:
            detail["ack_to_cut_ns"] = int(cyc.durability.ack_to_cut_ns[write])
            detail["flush_to_cut_ns"] = int(cyc.durability.flush_to_cut_ns[write])
            cut_ns = int(cyc.complete_ns[write] + cyc.durability.ack_to_cut_ns[write])
            detail["last_flush_to_cut_ns"] = cyc.last_flush_to_cut_ns(cut_ns)
    if blocks.obs_worker[first] != NO_OP:
        detail["observed_worker"] = int(blocks.obs_worker[first])
    gens = blocks.sector_gen[first]
    if cls == SHORN:
        detail["tear_sectors"] = (np.flatnonzero(np.diff(gens) != 0) + 1).tolist()
        detail["sector_gens"] = gens.tolist()
        if not detail["tear_sectors"]:  # whole block old inside a unit partly written
            detail["atomic_unit_tear"] = True
    if cls in (CORRUPTION, COLLATERAL, LOST_DURABLE) and blocks.corrupt_sector[first].any():
        detail["corrupt_sectors"] = np.flatnonzero(blocks.corrupt_sector[first]).tolist()
    if cls == FLYING:
        stored = blocks.sector_lba[first]
        foreign = stored[stored != lba]
        if len(foreign) and blocks.obs_op[first] != NO_OP:
            detail["written_for_lba"] = int(foreign[0])
            detail["distance"] = lba - int(foreign[0])
        else:
            detail["kind"] = "unwritten"  # a generation this LBA never received
    if cls == READ_ERROR:
        detail["kind"] = "unmapped"  # whole blocks read zero where data was committed
    if len(run) > 1:
        detail["observed_gens"] = [int(blocks.obs_gen[r]) for r in run][:64]
    return Finding(
        cls=cls,
        lba_first=lba,
        lba_count=len(run),
        expected_gen=int(blocks.floor[first]),
        observed_gen=int(blocks.obs_gen[first]),
        expected_op=expected_op,
        observed_op=int(blocks.obs_op[first]),
        detail=detail,
    )


def _atomic_tears(
    cyc: _Cycle,
    checked: npt.NDArray[np.int64],
    held: npt.NDArray[np.int64],
    klass: npt.NDArray[Any],
    unit: int,
) -> None:
    """Mark as shorn the old blocks of every aligned atomic unit that a write of this cycle
    covered whole, where some blocks hold that write and others something older."""
    pos = np.searchsorted(checked, cyc.lba)
    newest = np.zeros(len(checked), dtype=np.int64)
    np.maximum.at(newest, pos, cyc.gen)  # a later write of this cycle over it decides instead
    for write in range(len(cyc.op_seq)):
        entries = np.flatnonzero(cyc.write == write)
        lbas = cyc.lba[entries]
        first_unit = -(-int(lbas[0]) // unit) * unit
        for start in range(first_unit, int(lbas[-1]) + 1 - unit + 1, unit):
            rows = pos[entries[start - lbas[0] : start - lbas[0] + unit]]
            gens = cyc.gen[entries[start - lbas[0] : start - lbas[0] + unit]]
            if (newest[rows] != gens).any() or (klass[rows] != "").any():
                continue
            new = held[rows] == gens
            old = (held[rows] >= 0) & (held[rows] < gens)
            if new.any() and old.any() and (new | old).all():
                klass[rows[old]] = SHORN


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
                cls=ALLOWED_LOSS,
                lba_first=first,
                lba_count=len(entries),
                expected_gen=int(cyc.gen[entries[0]]),
                observed_gen=int(obs_gen[pos[entries[0]]]),
                expected_op=int(cyc.op_seq[write]),
                detail={"acknowledged": bool(cyc.acked[write]), "outcome": outcome},
            )
        )
    return findings, len(writes), len(writes) - len(findings)


def _unserializable(
    cyc: _Cycle,
    checked: npt.NDArray[np.int64],
    held: npt.NDArray[np.int64],
    klass: npt.NDArray[Any],
) -> list[Finding]:
    """FAST'13 serializability: a durable write lost while a write issued after its completion
    survived (some block of it reads back whole with its generation). One finding per cut, with
    the count of such lost writes and the first of them."""
    pos = np.searchsorted(checked, cyc.lba)
    lost_entry = (klass[pos] == LOST_DURABLE) & cyc.durable & (held[pos] < cyc.gen)
    lost_durable = np.zeros(len(cyc.op_seq), dtype=bool)
    lost_durable[cyc.write[lost_entry]] = True
    survived = np.zeros(len(cyc.op_seq), dtype=bool)
    survived[cyc.write[(held[pos] == cyc.gen) & (klass[pos] == "")]] = True
    if not lost_durable.any() or not survived.any():
        return []
    latest_survivor_issue = cyc.issue_ns[survived].max()
    victims = np.flatnonzero(lost_durable & (cyc.complete_ns < latest_survivor_issue))
    if len(victims) == 0:
        return []
    first = int(cyc.lba[np.flatnonzero(cyc.write == victims[0])[0]])
    later = np.flatnonzero(survived & (cyc.issue_ns > cyc.complete_ns[victims[0]]))
    return [
        Finding(
            cls=UNSERIALIZABLE,
            lba_first=first,
            lba_count=int(cyc.log_nblocks[victims[0]]),
            expected_gen=-1,  # a cut-scope finding: about writes, not one block's generation
            observed_gen=-1,
            expected_op=int(cyc.op_seq[victims[0]]),
            observed_op=int(cyc.op_seq[later[0]]) if len(later) else NO_OP,
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
