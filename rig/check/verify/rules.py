"""The checker's per-block rules (docs/checker.md), on the evidence each checked block gives
(rig/check/verify/evidence.py): the classes the rules claim for it resolved by the class table's
precedence (rig/check/failures.py), the settled committed state, findings merged into ranges,
atomic-unit tears, the outcomes of non-durable writes and unserializable writes.

Per block, `floor` is the generation the block must at least read back: the newest durable write
of this cycle, else the committed generation from before the cycle. Any newer generation written
this cycle (acknowledged but unflushed, or in flight) may survive or not, whole per atomic unit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rig.check import failures
from rig.check.failures import (
    ALLOWED_LOSS,
    COLLATERAL,
    CORRUPTION,
    FLYING,
    LOST_DURABLE,
    READ_ERROR,
    RESURRECTED,
    SHORN,
    UNSERIALIZABLE,
)
from rig.check.verify.evidence import CycleWrites, Evidence
from rig.check.verify.findings import NO_OP, Finding
from rig.check.verify.sectors import SectorSummary, sector_gens
from rig.io import media
from rig.io.ledger import uncertain

Claim = tuple[str, npt.NDArray[np.bool_]]  # a class, and the blocks a rule gives it


def claims(ev: Evidence) -> list[Claim]:
    """Every rule's class and the blocks it claims. Rules may overlap: `resolve` gives each
    block the claimed class of strongest precedence (rig/check/failures.py), e.g. old damage under a
    lost durable write is that lost write, not the damage it shows; a misplaced sector makes a
    flying write, not a shorn one."""
    judged, sound, gen, floor = ev.judged, ev.sound, ev.gen, ev.floor
    # an unknown block that this cycle's write reached is judged for damage to that write
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
    # the floor is a discard the drive promised to read as zeroes: data of ours from before it
    # came back (a loss of a write after the discard stays a lost durable write)
    resurrected = older & ev.floor_discard & (gen > 0)
    # a block a discard left open (no promise of zeroes: zeroes or its old data are allowed)
    # still holds nothing written for another LBA
    trim_open = ev.readable & ev.unknown & ~ev.has_durable & (ev.zero_gen > 0)
    return [
        (LOST_DURABLE, old_damage),
        (CORRUPTION, damage_judged & ev.corrupt & ev.touched),
        (COLLATERAL, judged & ev.corrupt & ~ev.touched),
        (FLYING, intact & ev.misplaced),
        (FLYING, trim_open & ~ev.corrupt & ev.misplaced),
        (SHORN, intact & ev.mixed),
        (RESURRECTED, resurrected),
        (LOST_DURABLE, older & ev.has_durable & ~resurrected),
        (COLLATERAL, older & ~ev.has_durable & ~unmapped & ~resurrected),
        (READ_ERROR, unmapped),  # metadata loss: whole blocks read zero where data was
        # newer than the floor but not a write of this cycle: data where it was never written
        (FLYING, judged & sound & (gen > floor) & ~ev.in_cycle),
    ]


# Per-block classes as small integer codes into CLASSES (0, FINE: no class): compared as numbers,
# not string by string.
CLASSES = ("", *failures.names())
FINE = 0


def code(cls: str) -> int:
    """The code of a class name in a per-block class array."""
    return CLASSES.index(cls)


def resolve(rows: int, claims: list[Claim]) -> npt.NDArray[np.uint8]:
    """Each block's class code (FINE: none): of the classes claiming it, the strongest by
    precedence."""
    klass = np.full(rows, FINE, dtype=np.uint8)
    weakest_first = sorted(claims, key=lambda c: failures.row(c[0]).precedence, reverse=True)
    for cls, blocks in weakest_first:
        klass[blocks] = code(cls)
    return klass


def settle(ev: Evidence, committed: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The new committed state: whatever a whole, well-placed block holds now; unknown
    otherwise. An unknown block that was not judged is known again once it reads back whole:
    what it holds from now on is what it must keep holding, or a later loss there goes
    unseen."""
    unsure = uncertain(committed)  # keeps the floor: what it was last known to hold
    new_committed = np.where(ev.sound, ev.gen, unsure)
    # unreadable: unchanged if this cycle did not write it; else which version survived is unknown
    return np.where(ev.readable, new_committed, np.where(ev.touched, unsure, committed))


def settle_discards(
    ev: Evidence,
    settled: npt.NDArray[np.int64],
    trimmed: npt.NDArray[np.int64],
    zeroes: bool,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The settled state and the discard each block's state stands for (docs/checker.md,
    "Discards"). A block reading zeroes for a discard holds that discard; an unreadable one
    this cycle discarded may hold it. On a drive without zeroes after discard a block whose
    newest discard no newer write covers stays open: zeroes or its data from before the
    discard may read back at any later check (its floor: what it had to hold before)."""
    zeroed = ev.sound & ev.zeroed
    new_trimmed = np.where(
        ev.readable, np.where(zeroed, ev.gen, 0), np.where(ev.touched, ev.zero_gen, trimmed)
    )
    if zeroes:
        return settled, new_trimmed
    still_open = ev.sound & (ev.zero_gen > 0) & (ev.gen <= ev.zero_gen)
    settled = np.where(still_open, uncertain(ev.floor).astype(np.int64), settled)
    return settled, np.where(still_open, ev.zero_gen, new_trimmed)


@dataclass(frozen=True)
class Classified:
    """Per checked block: its class code (FINE: none), the generation it had to hold at least,
    what it holds, the writes behind both, and its sectors (for a finding's details)."""

    checked: npt.NDArray[np.int64]
    klass: npt.NDArray[np.uint8]
    floor: npt.NDArray[np.int64]
    obs_gen: npt.NDArray[np.int64]
    floor_write: npt.NDArray[np.int64]
    obs_op: npt.NDArray[np.int64]
    obs_worker: npt.NDArray[np.int64]
    sectors: SectorSummary
    campaign: int
    zeroed: npt.NDArray[np.bool_]  # reads zeroes standing for a discard (obs_gen is its gen)

    def continues(self, prev: int, row: int) -> bool:
        """Same finding: consecutive LBAs, same class, same expected and observed writes."""
        return bool(
            self.checked[row] == self.checked[prev] + 1
            and self.klass[row] == self.klass[prev]
            and self.floor_write[row] == self.floor_write[prev]
            and self.obs_op[row] == self.obs_op[prev]
            and CLASSES[self.klass[row]] not in (SHORN, CORRUPTION, COLLATERAL)  # stand alone
        )


def merge(blocks: Classified, cyc: CycleWrites) -> Iterator[Finding]:
    """One finding per run of consecutive blocks with the same class and the same writes."""
    run: list[int] = []
    for row in np.flatnonzero(blocks.klass != FINE).tolist():
        if run and not blocks.continues(run[-1], row):
            yield _finding(run, blocks, cyc)
            run = []
        run.append(row)
    if run:
        yield _finding(run, blocks, cyc)


def _finding(run: list[int], blocks: Classified, cyc: CycleWrites) -> Finding:
    first = run[0]
    cls = CLASSES[blocks.klass[first]]
    write = int(blocks.floor_write[first])
    lba = int(blocks.checked[first])
    detail: dict[str, Any] = {}
    expected_op = NO_OP
    if write != NO_OP:
        expected_op = int(cyc.op_seq[write])
        detail["expected_worker"] = int(cyc.worker[write])
        if cls in (LOST_DURABLE, RESURRECTED):
            detail["ack_to_cut_ns"] = int(cyc.durability.ack_to_cut_ns[write])
            detail["flush_to_cut_ns"] = int(cyc.durability.flush_to_cut_ns[write])
            cut_ns = int(cyc.complete_ns[write] + cyc.durability.ack_to_cut_ns[write])
            detail["last_flush_to_cut_ns"] = cyc.last_flush_to_cut_ns(cut_ns)
    if blocks.obs_worker[first] != NO_OP:
        detail["observed_worker"] = int(blocks.obs_worker[first])
    if blocks.zeroed[first]:  # it reads zeroes: the discard named by observed_op/_gen
        detail["observed_discard"] = True
    if cls == RESURRECTED:
        detail["discard_gen"] = int(blocks.floor[first])  # what had to read back as zeroes
    sector = blocks.sectors.rows(np.array([first]))
    gens = sector_gens(sector, blocks.campaign)[1][0]
    corrupt_sector = sector.state[0] == media.CORRUPT
    if cls == SHORN:
        detail["tear_sectors"] = (np.flatnonzero(np.diff(gens) != 0) + 1).tolist()
        detail["sector_gens"] = gens.tolist()
        if not detail["tear_sectors"]:  # whole block old inside a unit partly written
            detail["atomic_unit_tear"] = True
    if cls in (CORRUPTION, COLLATERAL, LOST_DURABLE) and corrupt_sector.any():
        detail["corrupt_sectors"] = np.flatnonzero(corrupt_sector).tolist()
    if cls == FLYING:
        stored = sector.lba[0]
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


def atomic_tears(
    cyc: CycleWrites,
    checked: npt.NDArray[np.int64],
    held: npt.NDArray[np.int64],
    klass: npt.NDArray[np.uint8],
    unit: int,
) -> None:
    """Mark as shorn the old blocks of every aligned atomic unit that a write of this cycle
    covered whole, where some blocks hold that write and others something older."""
    pos = cyc.positions(checked)
    newest = np.zeros(len(checked), dtype=np.int64)
    np.maximum.at(newest, pos, cyc.gen)  # a later write of this cycle over it decides instead
    for write in range(len(cyc.op_seq)):
        entries = np.flatnonzero(cyc.write == write)
        lbas = cyc.lba[entries]
        first_unit = -(-int(lbas[0]) // unit) * unit
        for start in range(first_unit, int(lbas[-1]) + 1 - unit + 1, unit):
            rows = pos[entries[start - lbas[0] : start - lbas[0] + unit]]
            gens = cyc.gen[entries[start - lbas[0] : start - lbas[0] + unit]]
            if (newest[rows] != gens).any() or (klass[rows] != FINE).any():
                continue
            new = held[rows] == gens
            old = (held[rows] >= 0) & (held[rows] < gens)
            if new.any() and old.any() and (new | old).all():
                klass[rows[old]] = code(SHORN)


class WriteTally:
    """What each write of this cycle shows, gathered batch by batch (`add`: the checked
    blocks' entries of a batch once their classes are final), for the rules about writes rather
    than blocks: whether a durable write was lost or a write survived (`unserializable`), and
    how many blocks of each write read back older though clean (`nondurable_outcomes`)."""

    def __init__(self, cyc: CycleWrites, checked: npt.NDArray[np.int64]) -> None:
        self.cyc = cyc
        self.pos = cyc.positions(checked)
        nwrites = len(cyc.op_seq)
        self.lost_durable = np.zeros(nwrites, dtype=bool)
        self.survived = np.zeros(nwrites, dtype=bool)
        self.lost_blocks = np.zeros(nwrites, dtype=np.int64)
        self.any_nondurable = not cyc.durability.durable.all()

    def add(
        self,
        entries: slice | npt.NDArray[np.int64],
        klass: npt.NDArray[np.uint8],
        held: npt.NDArray[np.int64],
        obs_gen: npt.NDArray[np.int64],
        readable: npt.NDArray[np.bool_],
    ) -> None:
        """Count the cycle's block `entries` (each entry's block row already classed)."""
        cyc, pos = self.cyc, self.pos[entries]
        write, gen = cyc.write[entries], cyc.gen[entries]
        block_class, block_held = klass[pos], held[pos]
        fine = block_class == FINE
        lost = (block_class == code(LOST_DURABLE)) & cyc.durable[entries] & (block_held < gen)
        self.lost_durable[write[lost]] = True
        self.survived[write[(block_held == gen) & fine]] = True
        if self.any_nondurable:
            # older than its write (no newer write over it either), though clean and read
            older = (obs_gen[pos] < gen) & readable[pos] & fine
            np.add.at(self.lost_blocks, write[older], 1)


def nondurable_outcomes(
    tally: WriteTally, obs_gen: npt.NDArray[np.int64]
) -> tuple[list[Finding], int, int]:
    """Non-durable writes of this cycle: how many survived, and an allowed-loss row per loss."""
    cyc = tally.cyc
    writes = np.flatnonzero(~cyc.durability.durable & ~cyc.discard_write)
    if len(writes) == 0:
        return [], 0, 0
    findings = []
    for write in writes[tally.lost_blocks[writes] > 0].tolist():
        entries = np.flatnonzero(cyc.write == write)
        first = int(cyc.lba[entries[0]])
        outcome = "lost" if tally.lost_blocks[write] == len(entries) else "partial"
        findings.append(
            Finding(
                cls=ALLOWED_LOSS,
                lba_first=first,
                lba_count=len(entries),
                expected_gen=int(cyc.gen[entries[0]]),
                observed_gen=int(obs_gen[tally.pos[entries[0]]]),
                expected_op=int(cyc.op_seq[write]),
                detail={"acknowledged": bool(cyc.acked[write]), "outcome": outcome},
            )
        )
    return findings, len(writes), len(writes) - len(findings)


def unserializable(tally: WriteTally) -> list[Finding]:
    """FAST'13 serializability: a durable write lost while a write issued after its completion
    survived (some block of it reads back whole with its generation). One finding per cut, with
    the count of such lost writes and the first of them."""
    cyc, lost_durable, survived = tally.cyc, tally.lost_durable, tally.survived
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
