"""The evidence each checked block gives the checker's rules (docs/checker.md): this cycle's writes
per block (`CycleWrites`), what the ledger says of each checked block before it is read
(`ledgered`), and what its sectors show (`SeenRows`, filled batch by batch while the next batches
are read); joined, the `Evidence` the rules of rig/check/verify/rules.py claim classes from."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rig.check.verify.findings import NO_OP
from rig.check.verify.reads import Reads
from rig.check.verify.sectors import block_facts, sector_gens
from rig.io import media
from rig.io.ledger import CycleLog, Durability, is_uncertain, known_floor


class CycleWrites:
    """This cycle's writes expanded to one entry per block, with each write's durability."""

    def __init__(self, log: CycleLog, durability: Durability, zeroes: bool = False) -> None:
        """`zeroes`: the drive promises zeroes after a discard (docs/checker.md, "Discards");
        without that promise a discard never raises the floor a block must hold."""
        nblocks = log.column("nblocks")
        total = int(nblocks.sum())
        self.write = np.repeat(np.arange(len(nblocks)), nblocks)
        offset_in_write = np.arange(total) - np.repeat(log.column("gen_offset"), nblocks)
        self.lba = np.repeat(log.column("first_lba"), nblocks) + offset_in_write
        self.gen = log.generations().astype(np.int64)
        self.discard_write = log.column("discard") == 1  # per write
        self.discard = self.discard_write[self.write]  # per block entry
        self.durable = durability.durable[self.write] & (zeroes | ~self.discard)
        self.op_seq = log.column("op_seq")
        self.log_nblocks = nblocks
        self.worker = log.column("worker")
        self.issue_ns = log.column("issue_ns")
        self.complete_ns = log.column("complete_ns")
        self.acked = durability.acked
        self.durability = durability
        ok = log.column("flush_status") == 0
        self.flush_done = np.sort(log.column("flush_complete_ns")[ok])
        self._positions: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    @functools.cached_property
    def keys(self) -> npt.NDArray[np.int64]:
        """Every (LBA, generation) this cycle wrote, as sorted `lba << 32 | gen` keys (asked
        first while the first batches are read, not before they are started)."""
        keys = self.lba << 32 | self.gen
        if len(keys) > 1 and not (keys[1:] >= keys[:-1]).all():  # (a sequential cycle's are)
            keys = np.sort(keys)
        return keys

    def positions(self, checked: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row of each block entry in `checked` (sorted, holding every LBA of the cycle); the
        last answer is kept, as every rule of one check asks it of the same array."""
        if self._positions is None or self._positions[0] is not checked:
            self._positions = (checked, np.searchsorted(checked, self.lba))
        return self._positions[1]

    def last_flush_to_cut_ns(self, cut_ns: int) -> int:
        """Time from the last flush that completed before the cut to the cut (-1: none)."""
        before = self.flush_done[(self.flush_done >= 0) & (self.flush_done < cut_ns)]
        return int(cut_ns - before[-1]) if len(before) else -1


@dataclass(frozen=True)
class Evidence:
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
    obs_gen: npt.NDArray[np.int64]
    obs_op: npt.NDArray[np.int64]
    obs_worker: npt.NDArray[np.int64]
    carries_new: npt.NDArray[np.bool_]  # some sector holds a generation this cycle wrote here
    rejudged: npt.NDArray[np.bool_]  # unknown, unjudged, but this cycle's write reached it
    in_cycle: npt.NDArray[np.bool_]  # holds a generation this cycle wrote to it
    # discards (docs/checker.md, "Discards"): the newest discard a zero block stands for (0:
    # none), whether it reads zeroes standing for one, whether its floor is a discard
    zero_gen: npt.NDArray[np.int64]
    zeroed: npt.NDArray[np.bool_]
    floor_discard: npt.NDArray[np.bool_]

    @property
    def judged(self) -> npt.NDArray[np.bool_]:
        """Read, and judged against its floor (its old content known, or a durable write of
        this cycle over it)."""
        return self.readable & ~(self.unknown & ~self.has_durable)


@dataclass(frozen=True)
class Ledgered:
    """Per checked block, what the ledger says before anything is read."""

    touched: npt.NDArray[np.bool_]
    has_durable: npt.NDArray[np.bool_]
    floor: npt.NDArray[np.int64]
    floor_write: npt.NDArray[np.int64]
    unknown: npt.NDArray[np.bool_]
    zero_gen: npt.NDArray[np.int64]  # the newest discard of the block (this cycle's, or its
    #   committed one): what zeroes read there stand for (0: no discard)
    zero_write: npt.NDArray[np.int64]  # the write (a discard) of this cycle behind it, or NO_OP
    floor_discard: npt.NDArray[np.bool_]  # the generation it must hold is a discard's: zeroes


def ledgered(
    cyc: CycleWrites,
    checked: npt.NDArray[np.int64],
    committed: npt.NDArray[np.int64],
    trimmed: npt.NDArray[np.int64] | None = None,
) -> Ledgered:
    # floor: newest durable generation of this cycle, else the committed one (for a block whose
    # content is unknown: the oldest generation it may hold)
    pos = cyc.positions(checked)
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
    unknown = is_uncertain(committed)
    zero_gen = np.zeros(len(checked), dtype=np.int64) if trimmed is None else trimmed.copy()
    zero_write = np.full(len(checked), NO_OP, dtype=np.int64)
    floor_discard = ~has_durable & (zero_gen > 0) & (zero_gen == committed)
    if cyc.discard.any():
        d_pos, d_gen = pos[cyc.discard], cyc.gen[cyc.discard]
        newest = np.zeros(len(checked), dtype=np.int64)
        np.maximum.at(newest, d_pos, d_gen)
        ours = newest > zero_gen
        zero_gen = np.where(ours, newest, zero_gen)
        top_d = d_gen == zero_gen[d_pos]
        zero_write[d_pos[top_d]] = cyc.write[cyc.discard][top_d]
        with_write = floor_write != NO_OP
        floor_discard[with_write] = cyc.discard_write[floor_write[with_write]]
    return Ledgered(
        touched, has_durable, floor, floor_write, unknown, zero_gen, zero_write, floor_discard
    )


EVERY_ROW = slice(None)

_SEEN = ("corrupt", "misplaced", "mixed", "gen", "obs_op", "obs_worker", "carries_new",
         "lands_new", "in_cycle", "zeroed")  # fmt: skip


class SeenRows:
    """What the checked blocks' sectors show, filled batch by batch (`fill`, once a batch is
    read and parsed: the checker judges it while the next batches are read), then joined with
    the ledger's side (`evidence`)."""

    def __init__(self, campaign: int, cyc: CycleWrites, checked: npt.NDArray[np.int64]) -> None:
        self.campaign, self.cyc, self.checked = campaign, cyc, checked
        n = len(checked)
        self.columns = {
            name: np.zeros(n, dtype=np.int64 if name in ("gen", "obs_op", "obs_worker") else bool)
            for name in _SEEN
        }

    def fill(self, rows: slice, led: Ledgered, reads: Reads) -> None:
        campaign, cyc, out = self.campaign, self.cyc, self.columns
        checked, sec = self.checked[rows], reads.sectors.part(rows)
        readable = reads.readable[rows]
        seen = block_facts(campaign, checked, sec)
        # zeroes where a discard of the block was issued stand for the newest such discard's
        # generation (docs/checker.md, "Discards")
        zero_gen = led.zero_gen[rows]
        zeroed = (
            readable & (seen.gen == 0) & (zero_gen > 0) & (sec.state0 == media.ZERO) & sec.uniform
        )
        gen = np.where(zeroed, zero_gen, seen.gen)
        # A block whose old content is unknown (an earlier finding) is still judged for damage to
        # this cycle's write (torn, corrupt, misplaced) once some sector carries one of its
        # generations: looked up by sector 0's key, per sector only in the rare mixed blocks.
        in_cycle = member(checked << 32 | gen, cyc.keys)
        carries_new = in_cycle & seen.placed
        torn = np.flatnonzero(seen.mixed)
        if len(torn):
            ours, sector_gen, lba = sector_gens(sec.rows(torn), campaign)
            keys = checked[torn, None] << 32 | sector_gen
            placed = ours & (lba == checked[torn, None])
            carries_new[torn] = (member(keys, cyc.keys) & placed).any(axis=1)
        # ... and for a flying write of this cycle: a sector written by this cycle for another
        # LBA does not belong there, whatever the block held before; only rows of unknown,
        # misplaced blocks are looked at (few, so the check stays cheap)
        open_rows = readable & led.unknown[rows] & ~led.has_durable[rows]
        stray = np.flatnonzero(open_rows & seen.misplaced)
        if len(stray):
            ours, sector_gen, lba = sector_gens(sec.rows(stray), campaign)
            away = ours & (lba != checked[stray, None])
            out["lands_new"][rows][stray] = (member(lba << 32 | sector_gen, cyc.keys) & away).any(
                axis=1
            )
        out["corrupt"][rows] = seen.corrupt
        out["misplaced"][rows] = seen.misplaced
        out["mixed"][rows] = seen.mixed
        out["gen"][rows] = gen
        obs_op = np.where(seen.ours0, sec.op0, NO_OP)
        obs_worker = np.where(seen.ours0, sec.worker0, NO_OP)
        discard = led.zero_write[rows]
        by_discard = zeroed & (discard != NO_OP)  # the discard is what reads back
        if by_discard.any():
            obs_op[by_discard] = cyc.op_seq[discard[by_discard]]
            obs_worker[by_discard] = cyc.worker[discard[by_discard]]
        out["obs_op"][rows] = obs_op
        out["obs_worker"][rows] = obs_worker
        out["zeroed"][rows] = zeroed
        out["carries_new"][rows] = carries_new
        out["in_cycle"][rows] = in_cycle

    def evidence(
        self, led: Ledgered, readable: npt.NDArray[np.bool_], rows: slice = EVERY_ROW
    ) -> Evidence:
        """The evidence of `rows` (filled), every block's by default."""
        c = {name: column[rows] for name, column in self.columns.items()}
        readable, unknown, has_durable = readable[rows], led.unknown[rows], led.has_durable[rows]
        open_rows = readable & unknown & ~has_durable
        return Evidence(
            readable=readable,
            touched=led.touched[rows],
            has_durable=has_durable,
            floor=led.floor[rows],
            floor_write=led.floor_write[rows],
            unknown=unknown,
            corrupt=c["corrupt"],
            misplaced=c["misplaced"],
            mixed=c["mixed"],
            sound=readable & ~c["corrupt"] & ~c["misplaced"] & ~c["mixed"],
            gen=c["gen"],
            obs_gen=np.where(readable, c["gen"], -1),
            obs_op=c["obs_op"],
            obs_worker=c["obs_worker"],
            carries_new=c["carries_new"],
            rejudged=open_rows & (c["carries_new"] | c["lands_new"]),
            in_cycle=c["in_cycle"],
            zero_gen=led.zero_gen[rows],
            zeroed=c["zeroed"],
            floor_discard=led.floor_discard[rows],
        )


def evidence(
    campaign: int,
    cyc: CycleWrites,
    checked: npt.NDArray[np.int64],
    committed: npt.NDArray[np.int64],
    reads: Reads,
    trimmed: npt.NDArray[np.int64] | None = None,
) -> Evidence:
    """Every block's evidence at once (the checker fills `SeenRows` batch by batch)."""
    led = ledgered(cyc, checked, committed, trimmed)
    seen = SeenRows(campaign, cyc, checked)
    seen.fill(slice(0, len(checked)), led, reads)
    return seen.evidence(led, reads.readable)


def sorted_unique(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """np.unique by one sort and one pass (numpy's default is hash-based, several times slower
    here); an already sorted input (a sequential cycle) skips the sort."""
    if len(values) > 1 and not (values[1:] >= values[:-1]).all():
        values = np.sort(values)
    if len(values) < 2:
        return values.copy()
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def member(keys: npt.NDArray[np.int64], sorted_set: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """np.isin(keys, sorted_set) for a sorted set: a binary search per key (keys that come
    sorted, as the checked blocks' are, make each search start where the last one ended)."""
    if len(sorted_set) == 0:
        return np.zeros(keys.shape, dtype=bool)
    pos = np.searchsorted(sorted_set, keys)
    return sorted_set[np.minimum(pos, len(sorted_set) - 1)] == keys
