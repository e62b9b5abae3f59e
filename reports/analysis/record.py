"""The report's record: what the analysis (reports/analysis/reliability.py) finds, as one typed
tree.

Every output is a consumer of a `Report`: the HTML page and the model pages (reports/render/html.py,
templates), report.json (reports/render/json_out.py), the CSV tables (reports/render/csv_tables.py),
JUnit XML (reports/render/junit.py), the Markdown summary (reports/render/markdown.py) and the print
certificate. The record holds figures, never markup; the wordings every output shares (NOT_REPORTED,
NOT_ENOUGH_DATA) live here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reports.analysis.endurance import EnduranceSeries, TrimPair
from reports.analysis.sequential import SequentialReport
from reports.load.counted import Counted
from reports.load.criteria import ReportCriteria
from reports.load.cuts import DelayPoints, FloatArray, StoredReturns
from rig.verdict import stats


@dataclass
class Proportion:
    failed: int
    trials: int
    rate: float | None
    upper: float | None  # one-sided upper bound at the report's confidence
    lower95: float | None  # two-sided interval at the same confidence
    upper95: float | None


@dataclass
class ClassStat:
    cls: str
    findings: int
    blocks: int
    cuts: Proportion  # cuts with at least one finding of this class


@dataclass
class ClassExposure:
    """One judged class of a model (reports/analysis/exposure.py): its cuts exposed and failing."""

    cls: str
    cuts: Proportion  # failing cuts of the class over the cuts exposed to it, with its bounds
    unknown: int  # of those, cuts whose exposure the store does not know
    zero_tolerance: bool  # its first occurrence fails the model
    verdict: str  # PASS | FAIL | NOT YET DEMONSTRATED | NOT EXERCISED


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


# what a drive did not tell (its firmware version): the one wording of the report, its JSON and CSV
NOT_REPORTED = "(not reported)"


@dataclass
class Verdict:
    passed: bool
    label: str  # PASS | FAIL | NOT YET DEMONSTRATED
    reasons: list[str]
    cuts_needed: int = 0  # NOT YET DEMONSTRATED: more failure-free cuts that reach the claim
    rule: str = (
        ""  # the one line naming the rule that decided (reports/analysis/exposure.py:decide)
    )

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
    return_ms: FloatArray | StoredReturns  # every cut's return time, in cut order
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
    criteria: ReportCriteria
    criteria_note: str
    verdict: Verdict
    endurance: list[EnduranceSeries] = field(default_factory=list)  # PTS rounds, fill, cliff
    trim_pairs: list[TrimPair] = field(default_factory=list)  # same drive, discard off and on
    # the sequential plan's decision, where the model's campaigns state a plan (docs/decisions.md,
    # "The report replays the plan over every store")
    sequential: SequentialReport | None = None
    # per judged class: exposed cuts, failing ones and the bound (reports/analysis/exposure.py)
    exposure: list[ClassExposure] = field(default_factory=list)


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


# a latency percentile its interval's samples cannot support: the HTML, endurance.csv and
# endurance_series.csv say this, never a number
NOT_ENOUGH_DATA = "not enough data"
