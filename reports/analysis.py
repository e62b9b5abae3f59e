"""From a merged dataset to the figures a per-model reliability report states (pure, no I/O).

Units. A *cut* is a cycle whose power cut reached the drive: status ok, or dead (the drive's last
cut, which it failed). Rig errors (status error: a fault of the rig, ARCHITECTURE §4) and cycles
marked interrupted are not cuts of the drive; they are counted and shown apart. A cut *fails* when
it has at least one failure finding (of the classes the criteria name, for the verdict).

Dependence. Cuts on one drive are not independent trials: a drive with a lying flush fails again
and again. The pooled per-cut bound treats all cuts of a model as exchangeable trials and is what
a certification criterion such as "p < 1e-3 per cut at 95%" is stated in; beside it the report
gives every drive's own bound and a drive-level bound (drives with any failure out of drives),
which counts each drive once and so needs no independence between cuts. The verdict is the
campaign's criterion on the pooled bound plus its dead-drive limit; docs/reports.md explains how
to read the other two.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from reports import stats
from reports import verdict as verdicts
from reports.cuts import (
    Counted,
    CutTable,
    DelayPoints,
    FloatArray,
    StoredDelayPoints,
    add_counts,
    let_go,
    table_of,
)
from reports.dataset import Campaign, Dataset, DriveRun
from reports.endurance import EnduranceSeries, TrimPair, endurance_series, trim_pairs
from reports.sequential import SequentialReport
from reports.sequential import analyse as analyse_sequential
from rig.check import failures
from rig.health.delta import COUNTERS

DELAY_BINS_MS = (0.0, 1.0, 10.0, 100.0, 1000.0, math.inf)


@dataclass(frozen=True)
class Criteria:
    max_failure_rate: float  # per cut, the upper bound must stay below this
    confidence: float
    classes: tuple[str, ...]  # failure classes that count; () = every failure class
    min_cycles: int  # cuts every drive needs before the model can pass; 0 = no such rule
    stated: bool  # False: the campaign states none and the rig's default applies
    origin: str  # which campaign(s) stated them

    @property
    def counts_dead(self) -> bool:
        return not self.classes or failures.DEAD in self.classes

    def describe(self) -> str:
        what = ", ".join(self.classes) if self.classes else "any failure class"
        text = (
            f"per-cut probability of a cut with {what} below {self.max_failure_rate:g}"
            f" at {self.confidence:.0%} confidence (one-sided Clopper-Pearson)"
        )
        if self.counts_dead:
            text += "; no dead drive"
        if self.min_cycles:
            text += f"; at least {self.min_cycles} cuts on every drive"
        return text


DEFAULT_CRITERIA = Criteria(1e-3, 0.95, (), 0, False, "rig default")


def criteria_of(campaign: Campaign) -> Criteria | None:
    """Pass criteria a campaign states: the `campaign.criteria` column (rig.config.Criteria as
    JSON, store v5) where the store has it, else the campaign file's `[criteria]` table. Keys:
    max_failure_probability, confidence, classes, min_cycles. The rig fills the column with its
    defaults when the file has no `[criteria]`: such a campaign states none."""
    if not isinstance(campaign.config.get("criteria"), dict):
        return None
    table = campaign.criteria or campaign.config["criteria"]
    if not isinstance(table, dict):
        return None
    classes = table.get("classes", ())
    rate = table.get("max_failure_probability", table.get("max_failure_rate"))
    return Criteria(
        float(rate if rate is not None else DEFAULT_CRITERIA.max_failure_rate),
        float(table.get("confidence", DEFAULT_CRITERIA.confidence)),
        tuple(str(c) for c in classes) if isinstance(classes, list | tuple) else (),
        int(table.get("min_cycles", 0)),
        True,
        campaign.name,
    )


def merged_criteria(campaigns: Iterable[Campaign]) -> tuple[Criteria, str]:
    """The criteria for a model whose cuts come from several campaigns: the strictest stated
    (smallest rate, highest confidence, most cuts per drive, union of classes), with a note."""
    stated = [c for c in (criteria_of(x) for x in campaigns) if c is not None]
    if not stated:
        return DEFAULT_CRITERIA, "the campaign states no pass criteria; the rig's default applies"
    if len({(c.max_failure_rate, c.confidence, c.classes, c.min_cycles) for c in stated}) == 1:
        return stated[0], f"stated in campaign {stated[0].origin}"
    classes: tuple[str, ...] = ()
    if all(c.classes for c in stated):
        classes = tuple(sorted({k for c in stated for k in c.classes}))
    strictest = Criteria(
        min(c.max_failure_rate for c in stated),
        max(c.confidence for c in stated),
        classes,
        max(c.min_cycles for c in stated),
        True,
        ", ".join(sorted({c.origin for c in stated})),
    )
    return strictest, "campaigns state different criteria; the strictest of each applies"


@dataclass
class Proportion:
    failed: int
    trials: int
    rate: float | None
    upper: float | None  # one-sided upper bound at the report's confidence
    lower95: float | None  # two-sided interval at the same confidence
    upper95: float | None


def proportion(failed: int, trials: int, confidence: float) -> Proportion:
    if trials == 0:
        return Proportion(failed, 0, None, None, None, None)
    low, high = stats.clopper_pearson_interval(failed, trials, confidence)
    return Proportion(
        failed,
        trials,
        failed / trials,
        stats.clopper_pearson_upper(failed, trials, confidence),
        low,
        high,
    )


@dataclass
class ClassStat:
    cls: str
    findings: int
    blocks: int
    cuts: Proportion  # cuts with at least one finding of this class


@dataclass
class DriveStat:
    key: str
    model: str
    serial: str
    wwn: str
    firmware: list[str]
    stations: list[str]
    campaigns: list[str]
    channels: list[int]
    profile: str
    cuts: Proportion  # cuts with any failure on this drive
    rig_errors: int
    interrupted: int
    findings: dict[str, int]
    allowed_losses: int
    bytes_written: int  # by the rig's writers over all cycles
    blocks_checked: int  # read back and judged, over all cuts
    full_scans: int  # cuts whose check read the whole test region
    dead_at_cut: int | None  # cumulative cut count at which the drive died
    median_return_ms: float | None
    # DEAD | FAIL (a failure finding) | PASS (none, and its own cuts reach the claim) |
    # NOT YET DEMONSTRATED (none so far, too few cuts alone for the claim)
    verdict: str
    blocks_unchecked: int = 0  # meant to be read, left unread by a read budget (not a failure)


@dataclass
class DelayBin:
    low_ms: float
    high_ms: float | None
    cuts: Proportion


@dataclass
class Survival:
    subjects: list[tuple[int, bool]]  # (cuts survived or until death, died)
    steps: list[stats.KmStep]


HEALTH_FIELDS = (*COUNTERS, "available_spare", "critical_warning", "temperature_c")


@dataclass
class CounterDelta:
    field: str
    first: float
    last: float
    delta: float


@dataclass
class DriveHealth:
    """One drive's health snapshots in one campaign, first against last."""

    drive: str  # serial (else WWN)
    campaign: str
    source: str
    snapshots: int
    cuts: int  # cuts between the first and the last snapshot
    deltas: list[CounterDelta]
    # (cuts since the first snapshot, rise of the unsafe-shutdown counter): one per cut if honest
    unsafe_rise: list[tuple[int, float]]
    anomalies: dict[str, int]  # counter -> anomalies found (counter_anomaly findings)
    # where the unsafe-shutdown count was read ("ata:174:Unsafe_Shutdown_Count"); None: this
    # model has no such counter (or smartctl could not name it), so no cut was judged by it
    unsafe_source: str | None = None


@dataclass
class RailStat:
    """One drive's rail-sense results (the relay board's ADC around each off edge)."""

    drive: str
    measured: int
    ends: dict[str, int]  # fell | timeout | on | busy
    hi_us: dict[str, float]  # quantiles of the time to fall below the high threshold
    lo_us: dict[str, float]
    hi_threshold: int
    lo_threshold: int
    curves: list[tuple[float, list[int]]]  # (sample spacing µs, ADC counts from the edge)


MAX_RAIL_CURVES = 12


PASS, FAIL, NOT_YET = "PASS", "FAIL", "NOT YET DEMONSTRATED"
# what a drive did not tell (its firmware version): the one wording of the report, its JSON and CSV
NOT_REPORTED = "(not reported)"


@dataclass
class Verdict:
    passed: bool
    label: str  # PASS | FAIL | NOT YET DEMONSTRATED
    reasons: list[str]
    cuts_needed: int = 0  # NOT YET DEMONSTRATED: more failure-free cuts that reach the claim

    @property
    def css(self) -> str:
        """A class name for the label (no spaces)."""
        return self.label.replace(" ", "-")


@dataclass
class ModelReport:
    model: str
    firmware: dict[str, Proportion]  # per firmware version: cuts with any failure
    drives: list[DriveStat]
    campaigns: list[str]
    cuts: int
    rig_errors: int
    interrupted: int
    classes: list[ClassStat]
    any_failure: Proportion
    criteria_failure: Proportion  # cuts failing the criteria's classes
    reliability_demonstrated: float | None
    cuts_needed: int  # success-run: failure-free cuts that would meet the criteria
    drive_level: Proportion  # drives with any failure out of drives
    drives_dead: int
    survival: Survival
    return_ms: FloatArray  # every cut's return time, in cut order
    return_quantiles: dict[str, float]
    delays: DelayPoints  # every cut, in order
    # lost durable writes: ms from acknowledgement / covering flush to the cut (FAST'13 saw
    # losses up to 700 ms after completion)
    lost_after_ack_ms: Counted  # sorted, as (value, count)
    lost_after_flush_ms: Counted
    ack_bins: list[DelayBin]
    flush_bins: list[DelayBin]
    examples: list[dict[str, Any]]  # first failure findings of each drive
    health: list[DriveHealth]
    anomalies: list[dict[str, Any]]  # every counter anomaly (drive, seq, field, before, after, ...)
    intervals: list[dict[str, Any]]
    rail: list[RailStat]
    criteria: Criteria
    criteria_note: str
    verdict: Verdict
    endurance: list[EnduranceSeries] = field(default_factory=list)  # PTS rounds, fill, cliff
    trim_pairs: list[TrimPair] = field(default_factory=list)  # same drive, discard off and on
    # the sequential plan's decision, where the model's campaigns state a plan (decision 173)
    sequential: SequentialReport | None = None


@dataclass
class Comparison:
    outcome: str  # "any failure" or a failure class: cuts with it vs cuts without
    model_a: str
    model_b: str
    a: Proportion
    b: Proportion
    p_value: float
    p_holm: float
    significant: bool  # at 1 - confidence after Holm's correction


@dataclass
class Report:
    sources: list[str]
    campaigns: list[dict[str, Any]]
    confidence: float
    models: list[ModelReport]
    comparisons: list[Comparison]
    unread_tables: dict[str, list[str]] = field(default_factory=dict)


# what the campaign file planned, as the certificate states it: (label, table, key, unit)
PLAN_KEYS = (
    ("cycles per drive", "campaign", "cycles", ""),
    ("duration", "campaign", "duration_s", "s"),
    ("test region", "campaign", "region_mib", "MiB"),
    ("test region", "campaign", "region_kib", "KiB"),
    ("test region", "campaign", "region_bytes", "bytes"),
    ("cut delay", "cut", "delay_ms", "ms"),
    ("power off", "cut", "off_ms", "ms"),
    ("writers", "workload", "workers", ""),
    ("flush every", "workload", "flush_every", "writes"),
)


def plan_of(config: dict[str, Any]) -> dict[str, str]:
    """The plan the campaign file states (its cycles, region, cut and workload keys), as
    label -> text; a key the file leaves to the rig's default is not listed."""
    plan: dict[str, str] = {}
    for label, table, key, unit in PLAN_KEYS:
        value = config.get(table, {}).get(key) if isinstance(config.get(table), dict) else None
        if value is None:
            continue
        text = "–".join(map(_plain, value)) if isinstance(value, list) else _plain(value)
        plan[label] = f"{text} {unit}".strip()
    return plan


def _plain(value: object) -> str:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return f"{value:g}" if number else str(value)


def analyse(data: Dataset, confidence: float = 0.95) -> Report:
    by_model: dict[str, list[DriveRun]] = {}
    for run in data.runs:
        by_model.setdefault(run.model, []).append(run)
    parts = RunParts()
    models = [_model(name, runs, confidence, parts) for name, runs in sorted(by_model.items())]
    campaigns = [
        {
            "source": c.source,
            "name": c.name,
            "station": c.station,
            "status": c.status,
            "started_at": c.started_at,
            "ended_at": c.ended_at,
            "seed": c.seed,
            "plan": plan_of(c.config),
        }
        for c in data.campaigns
    ]
    return Report(
        data.sources,
        campaigns,
        confidence,
        models,
        compare(models, confidence),
        data.unread_tables,
    )


ANY_FAILURE = "any failure"


def compare(models: Sequence[ModelReport], confidence: float) -> list[Comparison]:
    """Every pair of models, Fisher's exact test (two-sided) on cuts with vs without the outcome,
    for any failure and for each failure class seen; Holm-corrected over all those tests."""
    classes = failures.ordered(s.cls for m in models for s in m.classes)

    def outcome(m: ModelReport, name: str) -> Proportion:
        if name == ANY_FAILURE:
            return m.any_failure
        found = next((s.cuts for s in m.classes if s.cls == name), None)
        return found or Proportion(0, m.cuts, 0.0 if m.cuts else None, None, None, None)

    tests = [
        (name, a, b, outcome(a, name), outcome(b, name))
        for name in (ANY_FAILURE, *classes)
        for i, a in enumerate(models)
        for b in models[i + 1 :]
        if a.cuts and b.cuts
    ]
    # a class neither model of a pair ever showed says nothing (p = 1): not a test in the family
    tests = [t for t in tests if t[0] == ANY_FAILURE or t[3].failed or t[4].failed]
    raw = [
        stats.fisher_exact(pa.failed, pa.trials - pa.failed, pb.failed, pb.trials - pb.failed)
        for _, _, _, pa, pb in tests
    ]
    adjusted = stats.holm(raw)
    return [
        Comparison(name, a.model, b.model, pa, pb, p, q, q < 1.0 - confidence)
        for (name, a, b, pa, pb), p, q in zip(tests, raw, adjusted, strict=True)
    ]


@dataclass
class RunPart:
    """One run's cycles reduced, in one pass over its table, to what the analysis states of
    them: counts, sums, the return times (every cut's, for exact quantiles) and where it died.
    A report holds these for every run at once, never the runs' tables (issue 27)."""

    cuts: int  # cycles with status ok or dead
    class_counts: dict[frozenset[str], int]  # cuts per set of failure classes
    class_sets: list[frozenset[str]]  # the sets the table knows, in its order
    statuses: dict[str, int]  # cycles per status, cuts or not
    dead_at: int | None  # the cut (1-based, among the run's cuts) the drive died at
    returns: FloatArray  # return times of the cuts with status ok that have one, in order
    bytes_written: int  # over every cycle
    blocks_checked: int  # over the cuts
    full_scans: int
    blocks_unchecked: int

    @classmethod
    def of(cls, t: CutTable) -> RunPart:
        m = t.is_cut
        hist = np.bincount(t.classes[m], minlength=len(t.class_sets))
        counts: dict[frozenset[str], int] = {}
        for i, s in enumerate(t.class_sets):
            counts[s] = counts.get(s, 0) + int(hist[i])
        dead_at = None
        if "dead" in t.statuses:
            found = np.flatnonzero(t.status[m] == t.statuses.index("dead"))
            dead_at = int(found[0]) + 1 if len(found) else None
        values = t.columns["return_ms"][m & t.status_mask("ok")]
        return cls(
            cuts=int(m.sum()),
            class_counts=counts,
            class_sets=list(t.class_sets),
            statuses={name: t.count_status(name) for name in t.statuses},
            dead_at=dead_at,
            returns=values[~np.isnan(values)],
            bytes_written=int(t.columns["bytes_written"].sum()),
            blocks_checked=int(t.columns["blocks_checked"][m].sum()),
            full_scans=int(t.columns["full_scan"][m].sum()),
            blocks_unchecked=int(t.columns["blocks_unchecked"][m].sum()),
        )


class RunParts:
    """Each run's RunPart, made once per report from its table (read one run at a time)."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[DriveRun, RunPart]] = {}

    def of(self, run: DriveRun) -> RunPart:
        if id(run) not in self.made:  # (the run is kept with it: its id stays its own)
            self.made[id(run)] = (run, RunPart.of(table_of(run.cuts)))
            let_go()  # (its columns read back from their files when next asked for)
        return self.made[id(run)][1]


@dataclass
class Cuts:
    """The cut rows (status ok or dead) of some drive runs, in order, as their RunParts."""

    runs: list[DriveRun]
    parts: list[RunPart]

    @classmethod
    def of(cls, runs: Iterable[DriveRun], parts: RunParts) -> Cuts:
        runs = list(runs)
        return cls(runs, [parts.of(r) for r in runs])

    @property
    def count(self) -> int:
        return sum(p.cuts for p in self.parts)

    def where(self, keep: Callable[[frozenset[str]], bool]) -> int:
        """Cuts whose set of failure classes `keep` accepts."""
        return sum(n for p in self.parts for s, n in p.class_counts.items() if keep(s))

    def returns(self) -> FloatArray:
        """Return times of cuts with status ok that have one."""
        return _cat([p.returns for p in self.parts])

    def cycles(self, status: str) -> int:
        """Cycles of this status, cuts or not."""
        return sum(p.statuses.get(status, 0) for p in self.parts)

    def delays(self) -> DelayPoints:
        """Every cut's delays and outcome, made from the runs' tables when read (one model's
        in memory at a time: reports.cuts.StoredDelayPoints)."""
        # class-set codes in one canonical order (no failure first), not in the order the rows
        # came: a store and the fleet's database give the same analysis of the same cuts
        sets: set[frozenset[str]] = {frozenset()}
        for p in self.parts:
            sets.update(p.class_sets)
        order = sorted(sets, key=lambda s: (len(s), failures.ordered(s)))
        lists = [failures.ordered(s) for s in order]
        runs = self.runs

        def make() -> DelayPoints:
            codes = {s: i for i, s in enumerate(order)}
            columns: dict[str, list[FloatArray]] = {k: [] for k in DELAY_COLUMNS}
            mapped = []
            for r in runs:
                t = table_of(r.cuts)
                m = t.is_cut
                for name in DELAY_COLUMNS:
                    columns[name].append(t.columns[name][m])
                remap = np.array([codes[s] for s in t.class_sets] or [0], np.int32)
                mapped.append(remap[t.classes[m]])
            ack, flush, delay = (_joined(columns[name]) for name in DELAY_COLUMNS)
            return DelayPoints(
                ack,
                flush,
                delay,
                np.concatenate(mapped or [np.empty(0, np.int32)]).astype(np.int32),
                lists,
            )

        return StoredDelayPoints(make, self.count, lists)


DELAY_COLUMNS = ("ack_to_cut_ms", "flush_to_cut_ms", "cut_delay_ms")


def _joined(arrays: list[FloatArray]) -> FloatArray:
    """The arrays end to end; one array as it is (not copied: a model of one drive)."""
    return arrays[0] if len(arrays) == 1 else _cat(arrays)


def _cat(arrays: list[FloatArray]) -> FloatArray:
    return np.concatenate(arrays) if arrays else np.empty(0, np.float64)


def _model(model: str, runs: list[DriveRun], confidence: float, parts: RunParts) -> ModelReport:
    runs = sorted(runs, key=lambda r: (r.campaign.started_at, r.channel))
    criteria, note = merged_criteria({id(r.campaign): r.campaign for r in runs}.values())
    cuts = Cuts.of(runs, parts)
    n = cuts.count
    classes_present = failures.ordered(k for r in runs for k in r.findings)
    class_stats = [
        ClassStat(
            cls,
            sum(r.findings.get(cls, 0) for r in runs),
            sum(r.blocks.get(cls, 0) for r in runs),
            proportion(cuts.where(lambda s, cls=cls: cls in s), n, confidence),  # type: ignore[misc]
        )
        for cls in classes_present
    ]
    counted = set(criteria.classes)
    criteria_failed = cuts.where(lambda s: bool(s & counted) if counted else bool(s))
    drives = _drives(runs, confidence, criteria, parts)
    any_failure = proportion(cuts.where(bool), n, confidence)
    crit = proportion(criteria_failed, n, criteria.confidence)
    returns = cuts.returns()
    firmware: dict[str, list[DriveRun]] = {}
    for r in runs:
        firmware.setdefault(r.firmware or NOT_REPORTED, []).append(r)
    dead = sum(d.dead_at_cut is not None for d in drives)
    delays = cuts.delays()
    ack_bins = _bins(delays.ack_to_cut_ms, delays.failed, confidence)
    flush_bins = _bins(delays.flush_to_cut_ms, delays.failed, confidence)
    let_go()  # (this model's delay points: made again when a chart or report.json reads them)
    return ModelReport(
        model=model,
        firmware={
            fw: proportion((c := Cuts.of(rs, parts)).where(bool), c.count, confidence)
            for fw, rs in sorted(firmware.items())
        },
        drives=drives,
        campaigns=sorted({f"{r.campaign.name} ({r.campaign.station})" for r in runs}),
        cuts=n,
        rig_errors=cuts.cycles("error"),
        interrupted=cuts.cycles("interrupted"),
        classes=class_stats,
        any_failure=any_failure,
        criteria_failure=crit,
        reliability_demonstrated=(
            stats.reliability_demonstrated(crit.failed, crit.trials, criteria.confidence)
            if crit.trials
            else None
        ),
        cuts_needed=stats.success_run_trials(1.0 - criteria.max_failure_rate, criteria.confidence),
        drive_level=proportion(sum(d.cuts.failed > 0 for d in drives), len(drives), confidence),
        drives_dead=dead,
        survival=_survival(drives, confidence),
        return_ms=returns,
        return_quantiles=_quantiles(returns),
        delays=delays,
        lost_after_ack_ms=_lost_after(runs, 0),
        lost_after_flush_ms=_lost_after(runs, 1),
        ack_bins=ack_bins,
        flush_bins=flush_bins,
        examples=[dict(e, drive=r.serial or r.wwn) for r in runs for e in r.examples],
        health=[h for h in (_health(r) for r in runs) if h is not None],
        anomalies=[dict(a, drive=r.serial or r.wwn) for r in runs for a in r.anomalies],
        intervals=[dict(i, drive=r.key) for r in runs for i in r.intervals],
        rail=[s for s in (_rail(r) for r in runs) if s is not None],
        criteria=criteria,
        criteria_note=note,
        verdict=_verdict(criteria, crit, dead, drives),
        endurance=(series := endurance_series(runs)),
        trim_pairs=trim_pairs(series),
        sequential=analyse_sequential(runs, criteria.classes),
    )


def _lost_after(runs: list[DriveRun], which: int) -> Counted:
    """Ack (0) or flush (1) to cut of every lost durable write of the runs."""
    counts: dict[float, int] = {}
    for r in runs:
        add_counts(counts, (r.lost_ack if which == 0 else r.lost_flush).items())
    return Counted(counts)


def _dead_at(cuts: Cuts) -> int | None:
    """The cut count (1-based, over the runs in order) at which the drive died."""
    offset = 0
    for p in cuts.parts:
        if p.dead_at is not None:
            return offset + p.dead_at
        offset += p.cuts
    return None


def _drives(
    runs: list[DriveRun], confidence: float, criteria: Criteria, parts: RunParts
) -> list[DriveStat]:
    by_key: dict[str, list[DriveRun]] = {}
    for r in runs:
        by_key.setdefault(r.key, []).append(r)
    result = []
    for key, group in by_key.items():
        cuts = Cuts.of(group, parts)
        n = cuts.count
        dead_at = _dead_at(cuts)
        findings: dict[str, int] = {}
        for r in group:
            for cls, k in r.findings.items():
                findings[cls] = findings.get(cls, 0) + k
        returns = np.sort(cuts.returns())
        failed = cuts.where(bool)
        first = group[0]
        result.append(
            DriveStat(
                key=key,
                model=first.model,
                serial=first.serial,
                wwn=first.wwn,
                firmware=sorted({r.firmware for r in group if r.firmware}),
                stations=sorted({r.campaign.station for r in group}),
                campaigns=sorted({r.campaign.name for r in group}),
                channels=sorted({r.channel for r in group}),
                profile=first.profile,
                cuts=proportion(failed, n, confidence),
                rig_errors=cuts.cycles("error"),
                interrupted=cuts.cycles("interrupted"),
                findings={k: findings[k] for k in failures.ordered(findings)},
                allowed_losses=sum(r.allowed_losses for r in group),
                bytes_written=sum(p.bytes_written for p in cuts.parts),
                blocks_checked=sum(p.blocks_checked for p in cuts.parts),
                full_scans=sum(p.full_scans for p in cuts.parts),
                dead_at_cut=dead_at,
                median_return_ms=_median(returns),
                verdict=_drive_verdict(dead_at, failed, n, criteria),
                blocks_unchecked=sum(p.blocks_unchecked for p in cuts.parts),
            )
        )
    return result


def _median(ordered: FloatArray) -> float | None:
    """statistics.median of sorted values."""
    n = len(ordered)
    if not n:
        return None
    if n % 2:
        return float(ordered[n // 2])
    return (float(ordered[n // 2 - 1]) + float(ordered[n // 2])) / 2


def _drive_verdict(dead_at: int | None, failed: int, cuts: int, criteria: Criteria) -> str:
    """The per-drive rule (reports/verdict.py), shared with the end table and `rig status`."""
    return verdicts.drive_verdict(
        dead_at is not None, failed, cuts, criteria.max_failure_rate, criteria.confidence
    )


def _health(run: DriveRun) -> DriveHealth | None:
    if not run.health:
        return None
    first, last = run.health[0], run.health[-1]
    deltas = []
    for name in HEALTH_FIELDS:
        a, b = _number(first.fields.get(name)), _number(last.fields.get(name))
        if a is not None and b is not None:
            deltas.append(CounterDelta(name, a, b, b - a))
    base = _number(first.fields.get("unsafe_shutdowns"))
    rise = []
    for h in run.health:
        value = _number(h.fields.get("unsafe_shutdowns"))
        if base is not None and value is not None:
            rise.append((h.after_seq - first.after_seq, value - base))
    anomalies: dict[str, int] = {}
    for anomaly in run.anomalies:
        key = str(anomaly.get("field", "?"))
        anomalies[key] = anomalies.get(key, 0) + 1
    return DriveHealth(
        run.serial or run.wwn,
        run.campaign.name,
        ", ".join(sorted({h.source for h in run.health})),
        len(run.health),
        last.after_seq - first.after_seq,
        deltas,
        rise,
        anomalies,
        next((str(s) for h in run.health if (s := h.fields.get("unsafe_shutdowns_source"))), None),
    )


def _rail(run: DriveRun) -> RailStat | None:
    if not run.rail:
        return None
    ends: dict[str, int] = {}
    for r in run.rail:
        ends[str(r.get("end", "?"))] = ends.get(str(r.get("end", "?")), 0) + 1
    hi = [v for v in (_number(r.get("hi_us")) for r in run.rail) if v is not None]
    lo = [v for v in (_number(r.get("lo_us")) for r in run.rail) if v is not None]
    curves = []
    for r in run.rail:
        samples, dt = r.get("samples"), _number(r.get("dt_us"))
        if isinstance(samples, list) and samples and dt:
            curves.append((dt, [int(s) for s in samples]))
    last = run.rail[-1]
    return RailStat(
        run.serial or run.wwn,
        len(run.rail),
        ends,
        _quantiles(hi),
        _quantiles(lo),
        int(_number(last.get("hi_threshold")) or 0),
        int(_number(last.get("lo_threshold")) or 0),
        curves[:MAX_RAIL_CURVES],
    )


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _survival(drives: list[DriveStat], confidence: float) -> Survival:
    """Drives vs cuts: a dead drive is an event at the cut it died on; a drive still alive is
    censored at the cuts it has taken."""
    subjects = [
        (d.dead_at_cut, True) if d.dead_at_cut is not None else (d.cuts.trials, False)
        for d in drives
    ]
    steps = stats.kaplan_meier([t for t, _ in subjects], [e for _, e in subjects], confidence)
    return Survival(subjects, steps)


def _quantiles(values: Sequence[float] | FloatArray) -> dict[str, float]:
    if not len(values):
        return {}
    ordered = np.sort(np.asarray(values, dtype=np.float64))

    def q(p: float) -> float:  # nearest rank: an observed value, never an interpolated one
        return float(ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))])

    return {
        "min": float(ordered[0]),
        "p50": q(0.5),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": float(ordered[-1]),
        "mean": math.fsum(ordered) / len(ordered),  # (not tolist: a float object per value)
    }


def _bins(values: FloatArray, failed: npt.NDArray[np.bool_], confidence: float) -> list[DelayBin]:
    result = []
    for low, high in itertools.pairwise(DELAY_BINS_MS):
        inside = (values >= low) & (values < high)  # NaN (no value) is in no bin
        result.append(
            DelayBin(
                low,
                None if math.isinf(high) else high,
                proportion(int(failed[inside].sum()), int(inside.sum()), confidence),
            )
        )
    return result


def _verdict(criteria: Criteria, crit: Proportion, dead: int, drives: list[DriveStat]) -> Verdict:
    """PASS: the pooled upper bound is below the claim, every drive has its cuts, no dead drive
    (where dead drives count). FAIL: a dead drive, or failures enough that even the lower bound
    lies above the claim (the rate is shown to be too high). Otherwise NOT YET DEMONSTRATED, with
    the failure-free cuts still needed to reach the claim."""
    reasons: list[str] = []
    failed = False
    needed_total = stats.trials_to_demonstrate(
        crit.failed, criteria.max_failure_rate, criteria.confidence
    )
    needed = max(0, needed_total - crit.trials)
    if crit.trials == 0:
        reasons.append(
            f"no cuts recorded; {needed} failure-free cuts are needed for"
            f" p < {criteria.max_failure_rate:g} at {criteria.confidence:.0%}"
        )
    else:
        assert crit.upper is not None
        lower = stats.clopper_pearson_lower(crit.failed, crit.trials, criteria.confidence)
        if crit.upper < criteria.max_failure_rate:
            reasons.append(
                f"{crit.failed} failing cuts in {crit.trials}: p < {crit.upper:.3g} per cut at"
                f" {criteria.confidence:.0%}, below {criteria.max_failure_rate:g}"
            )
        elif lower > criteria.max_failure_rate:
            failed = True
            reasons.append(
                f"{crit.failed} failing cut(s) in {crit.trials}: p > {lower:.3g} per cut at"
                f" {criteria.confidence:.0%}, above {criteria.max_failure_rate:g}"
            )
        else:
            reasons.append(
                f"not demonstrated: {crit.failed} failing cut(s) in {crit.trials} shows only"
                f" p < {crit.upper:.3g} at {criteria.confidence:.0%};"
                f" {needed} more failure-free cuts ({needed_total} in all) are needed for"
                f" p < {criteria.max_failure_rate:g}"
            )
    if dead and criteria.counts_dead:
        failed = True
        reasons.append(f"{dead} dead drive(s): a drive that died fails the model")
    short = [d for d in drives if d.cuts.trials < criteria.min_cycles]
    if short:
        needed = max(needed, sum(criteria.min_cycles - d.cuts.trials for d in short))
        reasons.append(
            f"{len(short)} drive(s) with fewer than the {criteria.min_cycles} cuts each drive"
            f" needs: {', '.join(f'{d.serial or d.wwn} ({d.cuts.trials})' for d in short)}"
        )
    if failed:
        return Verdict(False, FAIL, reasons, 0)
    if (
        crit.trials
        and crit.upper is not None
        and crit.upper < criteria.max_failure_rate
        and (not short)
    ):
        return Verdict(True, PASS, reasons, 0)
    return Verdict(False, NOT_YET, reasons, max(needed, 1))
