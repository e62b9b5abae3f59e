"""Score the checker against the simulated drive's ground truth (docs/checker.md, "Scoring against
the ground truth").

A campaign runs through the production campaign code on in-process virtual drives. Afterwards,
for every cycle, the ground-truth log of the fault core (what the drive did at that cut) is
turned into the findings the checker should have made, block by block, and compared with the
findings in the store. The host's promise (which writes were durable at the cut) comes from the
stored ledger through `CycleLog.durability`, the same function the campaign uses: the scorer
judges the checker's reading of the media, not the durability rule (tests/io/test_ledger.py).
"""

from __future__ import annotations

import dataclasses
import io
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fixtures import discardfaults, sim_station, statefaults
from fixtures import faultcore as fc
from fixtures.virtual_drive import VirtualDrive
from fixtures.virtual_health import VirtualHealth
from rig.campaign.model import DriveSummary
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.check import failures, verify
from rig.config import campaign_file
from rig.io.ledger import CycleLog
from rig.power.base import Edge, PendingCut, PowerSwitch
from rig.store import Store

# what the checker must report for a block, by the kind of fault the drive injected there
_BY_KIND = {
    fc.TORN: verify.SHORN,
    fc.MISDIRECT_LANDED: verify.FLYING,
    fc.UNMAPPED: verify.READ_ERROR,
    fc.READ_FAIL: verify.READ_ERROR,
    fc.READ_HANG: verify.READ_ERROR,
    fc.REVERTED: verify.COLLATERAL,
    statefaults.RECOVERY_REVERTED: verify.COLLATERAL,  # a cut during recovery: older blocks
}
_DROPS = (fc.LOST_UNFLUSHED, fc.LOST_FLUSHED, fc.MISDIRECTED)  # the host's version is gone
# sectors fail their checksum
_DAMAGE = (fc.BIT_FLIP, fc.RETRO_CORRUPT, fc.BIT_ROT, statefaults.RECOVERY_CORRUPT)
SCORED = failures.failure_names("block", "cut")  # the checker's classes, in table order


@dataclass
class Score:
    """Per class: true positives, false positives, false negatives (blocks; cuts for
    unserializable writes), plus injected faults and what fell outside the test region."""

    tp: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)
    injected: int = 0
    unjudged: int = 0  # expected findings on blocks a rig ERROR left unjudged
    errors: int = 0  # rig ERROR cycles
    outside_region: int = 0
    outside_scope: int = 0
    cuts: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, other: Score) -> None:
        self.tp.update(other.tp)
        self.fp.update(other.fp)
        self.fn.update(other.fn)
        self.injected += other.injected
        self.unjudged += other.unjudged
        self.errors += other.errors
        self.outside_region += other.outside_region
        self.outside_scope += other.outside_scope
        self.cuts += other.cuts
        self.examples.extend(other.examples[:20])

    def precision(self, cls: str) -> float:
        found = self.tp[cls] + self.fp[cls]
        return self.tp[cls] / found if found else 1.0

    def recall(self, cls: str) -> float:
        real = self.tp[cls] + self.fn[cls]
        return self.tp[cls] / real if real else 1.0

    def table(self) -> str:
        lines = [f"{'class':<22} {'tp':>7} {'fp':>5} {'fn':>5} {'precision':>9} {'recall':>7}"]
        for cls in SCORED:
            lines.append(
                f"{cls:<22} {self.tp[cls]:>7} {self.fp[cls]:>5} {self.fn[cls]:>5}"
                f" {self.precision(cls):>9.4f} {self.recall(cls):>7.4f}"
            )
        lines.append(
            f"cuts {self.cuts}, injected faults {self.injected},"
            f" truth events outside the test region {self.outside_region},"
            f" rig ERROR cycles {self.errors} (faults left unjudged: {self.unjudged})"
        )
        return "\n".join(lines)

    @property
    def perfect(self) -> bool:
        return not (sum(self.fp.values()) or sum(self.fn.values()))


DRIVE = """
[[drive]]
channel = {channel}
model = "SIM {profile}"
serial = "SC{channel:04d}"
profile = "{profile}"
"""


def campaign_text(
    profiles: list[str],
    cycles: int,
    seed: int = 7,
    flush_every: int = 2,
    full_scan_every: int = 1,
    discard_share: float = 0.0,
    delay_ms: tuple[float, float] = (0.3, 6),
) -> str:
    """A small region scanned in full at every cut (by default), so every injected fault is
    observable; `full_scan_every = 0` checks only the blocks at risk; `discard_share`: that
    share of the operations discards; `delay_ms`: the range of the cut's delay after the arm."""
    drives = "".join(DRIVE.format(channel=i, profile=p) for i, p in enumerate(profiles))
    return f"""
[campaign]
name = "scoring"
cycles = {cycles}
seed = {seed}
region_mib = 2
[station]
kind = "simulated"
[workload]
workers = 4
write_blocks = [1, 2, 4, 8]
flush_every = {flush_every}
{f"discard_share = {discard_share}" if discard_share else ""}
[cut]
delay_ms = [{delay_ms[0]}, {delay_ms[1]}]
off_ms = 0
sample_blocks = 0
full_scan_every = {full_scan_every}
read_timeout_s = 5
{drives}"""


class _UncertainCut:
    def __init__(self, pending: PendingCut, error_ns: int) -> None:
        self._pending = pending
        self._error_ns = error_ns

    def wait(self, timeout_s: float) -> Edge:
        edge = self._pending.wait(timeout_s)
        return dataclasses.replace(edge, error_ns=edge.error_ns + self._error_ns)


class UncertainPower:
    """A power switch whose cut edges come with a wider error bound, like a relay board whose
    clock mapping is loose: the checker must then excuse every completion inside the bound."""

    def __init__(self, power: PowerSwitch, error_ns: int) -> None:
        self._power = power
        self._error_ns = error_ns

    @property
    def channels(self) -> int:
        return self._power.channels

    def on(self, channel: int) -> Edge:
        return self._power.on(channel)

    def off(self, channel: int) -> Edge:
        return self._power.off(channel)

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> PendingCut:
        return _UncertainCut(self._power.cut(channel, delay_s, off_s), self._error_ns)

    def state(self, channel: int) -> bool:
        return self._power.state(channel)

    def safe(self) -> None:
        self._power.safe()

    def close(self) -> None:
        self._power.close()


def run(
    path: Path, text: str, cut_error_ns: int = 0, health: bool = False
) -> tuple[list[DriveSummary], list[VirtualDrive], Store]:
    """`health`: the drives answer health queries (fixtures/virtual_health.py), so the checker
    knows what they promise (zeroes after a discard)."""
    campaign = campaign_file.parse(text)
    station, drives = sim_station.build(campaign)
    if health:
        station = dataclasses.replace(station, health=VirtualHealth(drives).health)
    if cut_error_ns:
        station.power = UncertainPower(station.power, cut_error_ns)
    store = Store(str(path))
    summaries = run_campaign(campaign, station, store, Observer())
    return summaries, drives, store


def _ledger(blob: bytes) -> CycleLog:
    with np.load(io.BytesIO(blob)) as npz:
        arrays = {name: npz[name] for name in npz.files}
    log = CycleLog()
    gens = arrays["generations"]
    for i in range(len(arrays["worker"])):
        offset, count = int(arrays["gen_offset"][i]), int(arrays["nblocks"][i])
        log.add_write(
            int(arrays["worker"][i]),
            int(arrays["op_seq"][i]),
            int(arrays["first_lba"][i]),
            gens[offset : offset + count],
            int(arrays["issue_ns"][i]),
            int(arrays["complete_ns"][i]),
            int(arrays["status"][i]),
            bool(arrays["fua"][i]),
            "discard" in arrays and bool(arrays["discard"][i]),
        )
    for i in range(len(arrays["flush_worker"])):
        log.add_flush(
            int(arrays["flush_worker"][i]),
            int(arrays["flush_issue_ns"][i]),
            int(arrays["flush_complete_ns"][i]),
            int(arrays["flush_status"][i]),
        )
    return log


@dataclass
class DriveTruth:
    """What one simulated drive did, cut by cut (cut n is the rig's cycle n: one cut per
    cycle): the fault core's events, and what every block written since the previous power-on
    held after each cut (`FaultCore.persisted`)."""

    name: str
    cuts: int
    events: dict[int, list[fc.TruthEvent]]
    persisted: dict[int, dict[int, int]]

    @classmethod
    def of_virtual(cls, drive: VirtualDrive) -> DriveTruth:
        events: dict[int, list[fc.TruthEvent]] = {}
        for event in drive.core.truth:
            events.setdefault(event.cut, []).append(event)
        return cls(drive.profile.name, drive.core.cuts, events, drive.core.persisted)

    @classmethod
    def of_twin(
        cls,
        name: str,
        channel: int,
        truth: list[dict[str, Any]],
        persisted: dict[str, Any],
        cut_edges: dict[int, int],
    ) -> DriveTruth:
        """From the twin's truth log (`<store>.truth.jsonl`) and per-cut block contents
        (`<store>.truth.persisted.json`) of one channel. `cut_edges`: the rig's cut edge per
        cycle (host ns); every event's cut must be the cycle whose edge it was written with,
        so the pairing of cuts with cycles is checked, not assumed."""
        events: dict[int, list[fc.TruthEvent]] = {}
        for row in truth:
            if row["channel"] != channel:
                continue
            event = fc.TruthEvent(row["cut"], row["kind"], row["lba"], row.get("detail", {}))
            edge = row.get("edge_ns") or 0
            if edge and cut_edges:
                # (the simulator's edge may trail the rig's mapped cut by tens of ms under load;
                # cycles are hundreds of ms apart)
                nearest = min(cut_edges, key=lambda seq: abs(cut_edges[seq] - edge))
                assert nearest == event.cut, (
                    f"{name}: truth event of cut {event.cut} at {edge} is nearest to cycle"
                    f" {nearest}'s cut at {cut_edges[nearest]}, not cycle {event.cut}'s"
                )
            events.setdefault(event.cut, []).append(event)
        blocks = {
            int(cut): {int(lba): int(tag) for lba, tag in held.items()}
            for cut, held in persisted.get(str(channel), {}).items()
        }
        return cls(name, max(blocks, default=0), events, blocks)


def score_drive(
    store: Store,
    channel: int,
    drive: VirtualDrive | DriveTruth,
    at_risk_only: bool = False,
    allow_errors: bool = False,
) -> Score:
    """With `at_risk_only`, only blocks written in this cycle or the one before are scored (the
    checker's scope without full scans); faults elsewhere count as `outside_scope`.

    With `allow_errors`, a rig ERROR cycle is scored as what the rig does with it (docs/checker.md,
    "Scoring against the ground truth"): it reports nothing, and leaves unjudged every block it
    wrote (their content is unknown) and every block the drive's faults of that cut hit (their
    damage shows at the next full scan, mixed with that cut's own). Those blocks are left out of the
    comparison in later cycles that do not write them, until a write of a later cycle settles on
    them; the expected findings left out are counted as `unjudged`."""
    truth = drive if isinstance(drive, DriveTruth) else DriveTruth.of_virtual(drive)
    score = Score()
    (first, count), cycles = _drive_cycles(store, channel)
    assert allow_errors or all(c["status"] == "ok" for c in cycles), "a rig ERROR cycle"
    assert len(cycles) == truth.cuts, "one cut per cycle"
    previous: set[int] = set()
    tainted: set[int] = set()  # blocks a rig ERROR left unjudged
    for cycle in cycles:
        events = truth.events.get(cycle["seq"], [])
        persisted = truth.persisted.get(cycle["seq"], {})
        log = _ledger(cycle["writes"]) if cycle["writes"] is not None else CycleLog()
        _, lbas, gens = _blocks(log)
        written = set(zip(lbas.tolist(), gens.tolist(), strict=True))
        if cycle["status"] != "ok":
            assert cycle["status"] == "error" and cycle["cut_ns"] is not None, dict(cycle)
            assert not _observed(store, cycle["id"]), "a rig ERROR cycle reported findings"
            score.errors += 1
            hit = {e.lba for e in events if first <= e.lba < first + count}
            score.unjudged += len(hit)
            tainted |= hit | {lba for lba, _ in written}
            score.cuts += 1
            continue
        expected, unserializable, touched = _expected(
            cycle, log, events, persisted, (first, count), score
        )
        observed = _observed(store, cycle["id"])
        if tainted:
            skip = tainted - touched
            score.unjudged += sum(lba in skip for lba in expected)
            expected = {lba: cls for lba, cls in expected.items() if lba not in skip}
            observed = {lba: cls for lba, cls in observed.items() if lba not in skip}
            tainted -= {lba for lba, gen in written if persisted.get(lba) == gen}  # settled
        if at_risk_only:
            scope = touched | previous
            score.outside_scope += sum(lba not in scope for lba in expected)
            expected = {lba: cls for lba, cls in expected.items() if lba in scope}
        previous = touched
        label = f"{truth.name} cycle {cycle['seq']}"
        _compare_blocks(score, label, events, expected, observed)
        _compare_unserializable(score, label, unserializable, cycle["unserializable_writes"])
        score.injected += len(expected) + unserializable
        score.cuts += 1
    return score


def _drive_cycles(store: Store, channel: int) -> tuple[tuple[int, int], list[sqlite3.Row]]:
    """The drive's test region (first LBA, blocks) and its cycles with their ledgers, in order."""
    (drv,) = store.query(
        "SELECT d.id, d.region_first_lba, d.region_blocks FROM drive d WHERE d.channel = ?",
        (channel,),
    )
    cycles = store.query(
        "SELECT c.id, c.seq, c.status, c.cut_ns, c.cut_error_ns, c.unserializable_writes,"
        " l.writes FROM cycle c LEFT JOIN ledger l ON l.cycle_id = c.id WHERE c.drive_id = ?"
        " ORDER BY c.seq",
        (drv["id"],),
    )
    return (drv["region_first_lba"], drv["region_blocks"]), cycles


def _compare_blocks(
    score: Score,
    label: str,
    events: list[fc.TruthEvent],
    expected: dict[int, str],
    observed: dict[int, str],
) -> None:
    """Each block's expected class against the checker's (the first 20 misses as examples)."""
    for lba in set(expected) | set(observed):
        want, got = expected.get(lba), observed.get(lba)
        if want == got:
            if want is not None:
                score.tp[want] += 1
            continue
        if want is not None:
            score.fn[want] += 1
        if got is not None:
            score.fp[got] += 1
        if len(score.examples) < 20:
            score.examples.append(
                f"{label} lba {lba}: want {want}, got {got};"
                f" truth {[e for e in events if e.lba == lba]}"
            )


def _compare_unserializable(score: Score, label: str, unserializable: int, got_count: int) -> None:
    if unserializable and got_count == unserializable:
        score.tp[verify.UNSERIALIZABLE] += 1
    elif unserializable or got_count:
        score.examples.append(
            f"{label}: {unserializable} unserializable writes expected, {got_count} found"
        )
        score.fn[verify.UNSERIALIZABLE] += bool(unserializable)
        score.fp[verify.UNSERIALIZABLE] += bool(got_count)


def _expected(
    row: sqlite3.Row,
    log: CycleLog,
    events: list[fc.TruthEvent],
    persisted: dict[int, int],
    region: tuple[int, int],
    score: Score,
) -> tuple[dict[int, str], int, set[int]]:
    """The failure class the checker must report per block of this cut, and how many durable
    writes must count as unserializable."""
    durability = log.durability(row["cut_ns"], row["cut_error_ns"])
    nblocks = log.column("nblocks")
    write, lbas, gens = _blocks(log)
    durable = durability.durable[write]
    discard = log.column("discard")[write] == 1
    touched = set(lbas.tolist())
    top_durable: dict[int, int] = {}
    for lba, gen in zip(lbas[durable].tolist(), gens[durable].tolist(), strict=True):
        top_durable[lba] = max(gen, top_durable.get(lba, 0))
    # zeroes where this cycle discarded a block stand for its newest discard (docs/checker.md)
    zero_gen: dict[int, int] = {}
    for lba, gen in zip(lbas[discard].tolist(), gens[discard].tolist(), strict=True):
        zero_gen[lba] = max(gen, zero_gen.get(lba, 0))
    durable_discards = set(
        zip(lbas[durable & discard].tolist(), gens[durable & discard].tolist(), strict=True)
    )

    def held(lba: int, tag: int) -> int:
        return zero_gen.get(lba, 0) if tag == 0 else tag

    expected: dict[int, str] = {}
    first, count = region
    for event in events:
        if not first <= event.lba < first + count:
            score.outside_region += 1
            continue
        cls: str | None
        top = top_durable.get(event.lba, -2)
        if event.kind in _DROPS or event.kind == discardfaults.DISCARD_ATE_WRITE:
            lost = top > held(event.lba, event.detail["tag"])
            cls = verify.LOST_DURABLE if lost else None
        elif event.kind == discardfaults.RESURRECTED:
            # the old data is back: a failure where the newest durable operation on the block
            # was a discard the drive promised to read as zeroes (all profiles promise it)
            promised = (event.lba, top) in durable_discards and top > event.detail["tag"]
            cls = verify.RESURRECTED if promised else None
        elif event.kind in _DAMAGE:
            cls = verify.CORRUPTION if event.lba in touched else verify.COLLATERAL
        else:
            cls = _BY_KIND.get(event.kind)
        if cls is not None:
            expected[event.lba] = cls

    lost_writes = np.zeros(len(nblocks), dtype=bool)
    survived = np.zeros(len(nblocks), dtype=bool)
    for i, (lba, gen) in enumerate(zip(lbas.tolist(), gens.tolist(), strict=True)):
        holds = held(lba, persisted.get(lba, -3))
        if durable[i] and expected.get(lba) == verify.LOST_DURABLE and holds < gen:
            lost_writes[write[i]] = True
        if lba not in expected and holds == gen:
            survived[write[i]] = True
    unserializable = 0
    if lost_writes.any() and survived.any():
        latest = log.column("issue_ns")[survived].max()
        unserializable = int((lost_writes & (log.column("complete_ns") < latest)).sum())
    return expected, unserializable, touched


def _blocks(log: CycleLog) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per block a cycle's writes carried: the write's index, the LBA, the generation."""
    nblocks = log.column("nblocks")
    write = np.repeat(np.arange(len(nblocks)), nblocks)
    lbas = np.repeat(log.column("first_lba"), nblocks) + (
        np.arange(int(nblocks.sum())) - np.repeat(log.column("gen_offset"), nblocks)
    )
    return write, lbas, log.generations().astype(np.int64)


def _observed(store: Store, cycle_id: int) -> dict[int, str]:
    others = [c for c in failures.names() if c not in failures.names("block")]
    rows = store.query(
        "SELECT class, lba_first, lba_count FROM finding WHERE cycle_id = ? AND failure = 1"
        f" AND class NOT IN ({', '.join('?' * len(others))})",
        (cycle_id, *others),
    )
    observed: dict[int, str] = {}
    for row in rows:
        for lba in range(row["lba_first"], row["lba_first"] + row["lba_count"]):
            assert lba not in observed, f"block {lba} classed twice in cycle {cycle_id}"
            observed[lba] = row["class"]
    return observed


def score_campaign(store: Store, drives: list[VirtualDrive], at_risk_only: bool = False) -> Score:
    total = Score()
    for channel, drive in enumerate(drives):
        total.add(score_drive(store, channel, drive, at_risk_only))
    return total
