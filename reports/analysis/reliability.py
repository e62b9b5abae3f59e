"""From a merged dataset to the figures a per-model reliability report states (pure, no I/O).

Units. A *cut* is a cycle whose power cut reached the drive: status ok, or dead (the drive's last
cut, which it failed). Rig errors (status error: a fault of the rig, docs/architecture.md,
"The checker's contract") and cycles marked interrupted are not cuts of the drive; they are
counted and shown apart. A cut *fails* when it has at least one failure finding (of the classes
the criteria name, for the verdict).

Dependence. RunCuts on one drive are not independent trials: a drive with a lying flush fails again
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
from collections.abc import Sequence

import numpy as np

from reports.analysis import exposure
from reports.analysis.compare import compare
from reports.analysis.endurance import endurance_series, trim_pairs
from reports.analysis.record import (
    NOT_REPORTED,
    ClassExposure,
    ClassStat,
    CounterDelta,
    DelayBin,
    DriveHealth,
    DriveStat,
    ModelReport,
    Proportion,
    RailStat,
    Report,
    ReportCriteria,
    Survival,
    Verdict,
)
from reports.analysis.sequential import SequentialReport
from reports.analysis.sequential import analyse as analyse_sequential
from reports.load import ordered
from reports.load.binned import DELAY_BINS_MS, BinnedDelays, BinnedReturns
from reports.load.counted import Counted, add_counts
from reports.load.criteria import merged_criteria, plan_of
from reports.load.cuts import DelayPoints, FloatArray, StoredReturns, let_go
from reports.load.dataset import Dataset, DriveData
from reports.load.ordered import nearest_rank
from reports.load.run_parts import RunCuts, RunParts
from rig.check import failures
from rig.health.delta import COUNTERS
from rig.verdict import rule as verdicts
from rig.verdict import stats

HEALTH_FIELDS = (*COUNTERS, "available_spare", "critical_warning", "temperature_c")
MAX_RAIL_CURVES = 12


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


def analyse(data: Dataset, confidence: float = 0.95) -> Report:
    by_model: dict[str, list[DriveData]] = {}
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


def _model(model: str, runs: list[DriveData], confidence: float, parts: RunParts) -> ModelReport:
    runs = sorted(runs, key=lambda r: (r.campaign.started_at, r.channel))
    criteria, note = merged_criteria({id(r.campaign): r.campaign for r in runs}.values())
    cuts = RunCuts.of(runs, parts)
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
    returns = cuts.returns()  # (made when read: the quantiles, a chart, report.json)
    quantiles = _return_quantiles(returns)
    firmware: dict[str, list[DriveData]] = {}
    for r in runs:
        firmware.setdefault(r.firmware or NOT_REPORTED, []).append(r)
    dead = sum(d.dead_at_cut is not None for d in drives)
    delays = cuts.delays()
    ack_bins = _bins(delays, "ack_to_cut_ms", confidence)
    flush_bins = _bins(delays, "flush_to_cut_ms", confidence)
    let_go()  # (this model's delay points and return times: made again when read)
    zero = exposure.zero_tolerance_of({id(r.campaign): r.campaign for r in runs}.values())
    exposed = exposure.per_class(cuts, criteria, zero, proportion)
    seq = analyse_sequential(runs, criteria.classes, zero)
    return ModelReport(
        model=model,
        firmware={
            fw: proportion((c := RunCuts.of(rs, parts)).where(bool), c.count, confidence)
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
        return_quantiles=quantiles,
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
        verdict=_verdict(criteria, crit, dead, drives, exposed, seq),
        endurance=(series := endurance_series(runs)),
        trim_pairs=trim_pairs(series),
        sequential=seq,
        exposure=exposed,
    )


def _verdict(
    criteria: ReportCriteria,
    crit: Proportion,
    dead: int,
    drives: list[DriveStat],
    exposed: list[ClassExposure],
    seq: SequentialReport | None,
) -> Verdict:
    """The model's one verdict (reports/analysis/exposure.py:decide) over the pooled rule."""
    drive_cuts = [(d.serial or d.wwn, d.cuts.trials) for d in drives]
    base = model_verdict(criteria, crit, dead, drive_cuts)
    short = any(n < criteria.min_cycles for _, n in drive_cuts)
    return exposure.decide(base, exposed, criteria, short, _plan_decided(seq))


def _plan_decided(seq: SequentialReport | None) -> tuple[str, int] | None:
    """The model's sequential decision and its cuts, where its plan decided."""
    if seq is None or seq.model.decision not in (verdicts.PASS, verdicts.FAIL):
        return None
    return seq.model.decision, seq.model.cuts


def _lost_after(runs: list[DriveData], which: int) -> Counted:
    """Ack (0) or flush (1) to cut of every lost durable write of the runs."""
    counts: dict[float, int] = {}
    for r in runs:
        add_counts(counts, (r.lost_ack if which == 0 else r.lost_flush).items())
    return Counted(counts)


def _dead_at(cuts: RunCuts) -> int | None:
    """The cut count (1-based, over the runs in order) at which the drive died."""
    offset = 0
    for p in cuts.parts:
        if p.dead_at is not None:
            return offset + p.dead_at
        offset += p.cuts
    return None


def _drives(
    runs: list[DriveData], confidence: float, criteria: ReportCriteria, parts: RunParts
) -> list[DriveStat]:
    by_key: dict[str, list[DriveData]] = {}
    for r in runs:
        by_key.setdefault(r.key, []).append(r)
    result = []
    for key, group in by_key.items():
        cuts = RunCuts.of(group, parts)
        n = cuts.count
        dead_at = _dead_at(cuts)
        findings: dict[str, int] = {}
        for r in group:
            for cls, k in r.findings.items():
                findings[cls] = findings.get(cls, 0) + k
        returns = cuts.returns()
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
                median_return_ms=_median_of(returns),
                verdict=_drive_verdict(dead_at, failed, n, criteria),
                blocks_unchecked=sum(p.blocks_unchecked for p in cuts.parts),
            )
        )
    return result


def _median_of(returns: StoredReturns) -> float | None:
    """statistics.median of the values, from them in order a piece at a time."""
    if isinstance(returns, BinnedReturns):
        return returns.histogram.median()
    n = len(returns)
    if not n:
        return None
    middle = [n // 2] if n % 2 else [n // 2 - 1, n // 2]
    found = ordered.ranks(ordered.sorted_pieces(returns.pieces), middle)
    if n % 2:
        return found[n // 2]
    return (found[n // 2 - 1] + found[n // 2]) / 2


def _return_quantiles(returns: StoredReturns) -> dict[str, float]:
    """As `_quantiles`, from the values in order a piece at a time: none held; from
    the bins of a histogram (the central report: reports/load/binned.py states its error)."""
    if isinstance(returns, BinnedReturns):
        return returns.histogram.quantiles()
    n = len(returns)
    if not n:
        return {}
    at = {"min": 0, "p50": 0.5, "p90": 0.9, "p99": 0.99, "max": n - 1}
    wanted = {k: v if isinstance(v, int) else ordered.nearest_rank(v, n) for k, v in at.items()}
    found = ordered.ranks(ordered.sorted_pieces(returns.pieces), wanted.values())
    quantiles = {k: found[r] for k, r in wanted.items()}
    quantiles["mean"] = math.fsum(v for p in returns.pieces() for v in p.tolist()) / n
    return quantiles


def _drive_verdict(dead_at: int | None, failed: int, cuts: int, criteria: ReportCriteria) -> str:
    """The per-drive rule (rig/verdict/rule.py), shared with the end table and `rig status`."""
    return verdicts.drive_verdict(
        dead_at is not None, failed, cuts, criteria.max_failure_rate, criteria.confidence
    )


def _health(run: DriveData) -> DriveHealth | None:
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


def _rail(run: DriveData) -> RailStat | None:
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
    return _quantiles_of_sorted(np.sort(np.asarray(values, dtype=np.float64)))


def _quantiles_of_sorted(ordered: FloatArray) -> dict[str, float]:
    if not len(ordered):
        return {}

    def q(p: float) -> float:  # nearest rank: an observed value, never an interpolated one
        return float(ordered[nearest_rank(p, len(ordered))])

    return {
        "min": float(ordered[0]),
        "p50": q(0.5),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": float(ordered[-1]),
        "mean": math.fsum(ordered) / len(ordered),  # (not tolist: a float object per value)
    }


def _bins(delays: DelayPoints, column: str, confidence: float) -> list[DelayBin]:
    """Cuts and failing cuts per bin of one delay column, counted a piece of the points at a
    time (never the model's points whole)."""
    edges = list(itertools.pairwise(DELAY_BINS_MS))
    inside = np.zeros(len(edges), np.int64)
    failing = np.zeros(len(edges), np.int64)
    if isinstance(delays, BinnedDelays):  # counted by the server (the central report)
        inside += delays.counts.inside.get(column, 0)
        failing += delays.counts.failing.get(column, 0)
    for piece in delays.chunks():
        values, failed = getattr(piece, column), piece.failed
        for i, (low, high) in enumerate(edges):
            here = (values >= low) & (values < high)  # NaN (no value) is in no bin
            inside[i] += int(here.sum())
            failing[i] += int(failed[here].sum())
    return [
        DelayBin(
            low,
            None if math.isinf(high) else high,
            proportion(int(failing[i]), int(inside[i]), confidence),
        )
        for i, (low, high) in enumerate(edges)
    ]


def model_verdict(
    criteria: ReportCriteria, crit: Proportion, dead: int, drive_cuts: Sequence[tuple[str, int]]
) -> Verdict:
    """A model's verdict from its counts: the criteria-failing cuts (`crit`), its dead drives
    and each drive's (name, cuts); the same from the cuts or from the fleet's summaries. PASS:
    the pooled upper bound is below the claim, every drive has its cuts, no dead drive (where
    dead drives count). FAIL: a dead drive, or failures enough that even the lower bound
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
    short = [(name, n) for name, n in drive_cuts if n < criteria.min_cycles]
    if short:
        needed = max(needed, sum(criteria.min_cycles - n for _, n in short))
        reasons.append(
            f"{len(short)} drive(s) with fewer than the {criteria.min_cycles} cuts each drive"
            f" needs: {', '.join(f'{name} ({n})' for name, n in short)}"
        )
    if failed:
        return Verdict(False, verdicts.FAIL, reasons, 0)
    if (
        crit.trials
        and crit.upper is not None
        and crit.upper < criteria.max_failure_rate
        and (not short)
    ):
        return Verdict(True, verdicts.PASS, reasons, 0)
    return Verdict(False, verdicts.NOT_YET, reasons, max(needed, 1))
