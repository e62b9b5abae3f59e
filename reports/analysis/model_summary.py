"""A model's verdict and figures from the central database's per-drive totals (schema v5): the
cuts, the cuts per set of failure classes, the dead drives and each drive's cuts are all the
report's verdict rule reads (reports/analysis/reliability.py: model_verdict, rig/verdict/rule.py),
so the dashboard states the report's verdict from a few rows per drive instead of every cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reports.analysis import exposure as exposures
from reports.analysis.record import ClassExposure, Proportion, ReportCriteria, Verdict
from reports.analysis.reliability import model_verdict, proportion
from reports.load.criteria import merged_criteria
from reports.load.dataset import CampaignData
from reports.load.run_parts import RunCuts, RunPart
from rig.check import exposure, failures
from rig.verdict import rule as verdicts

CONFIDENCE = 0.95  # the report's default confidence (reports.analysis.reliability.analyse)


@dataclass(frozen=True)
class ClassRow:
    name: str
    cuts: int
    findings: int
    blocks: int


@dataclass(frozen=True)
class ModelDriveSummary:
    name: str  # serial, else WWN
    stations: list[str]
    cuts: int
    failing: int  # cuts with a failure finding of any class
    dead: bool
    verdict: str
    # per judged class: exposed cuts, failing ones, the bound (read for a model's page only)
    exposure: list[ClassExposure] = field(default_factory=list)


@dataclass(frozen=True)
class ModelSummary:
    model: str
    cuts: int
    rig_errors: int
    interrupted: int
    drives: list[ModelDriveSummary]
    failing_sets: dict[frozenset[str], int]  # cuts per set of failure classes
    criteria: ReportCriteria
    criteria_note: str
    criteria_failure: Proportion
    any_failure: Proportion
    verdict: Verdict
    # failure classes: (name, cuts with it, findings, blocks); read for a model's page only
    classes: list[ClassRow] = field(default_factory=list)
    # per judged class, over the cuts exposed to it (reports/analysis/exposure.py); a model's page
    # only
    exposure: list[ClassExposure] = field(default_factory=list)

    def cuts_with(self, cls: str) -> int:
        return sum(n for s, n in self.failing_sets.items() if cls in s)


def _drive_key(row: Any) -> str:  # as reports.load.dataset.DriveData.key: the physical drive
    model = row["model"]
    return f"{model}|{row['serial']}" if row["serial"] else f"{model}|wwn:{row['wwn']}"


def summarise(
    model: str,
    drive_rows: Iterable[Any],
    failing_rows: Iterable[Any],
    campaigns: Mapping[tuple[str, int], CampaignData],
) -> ModelSummary:
    """The model's summary from its drives' rows (`model_drive_totals`) and cuts per set of
    failure classes (`model_failing_sets`), judged on the criteria of the campaigns its drives
    ran in (`campaigns` by station and uid; drives of other campaigns are left out, as the
    report leaves them)."""
    drives = [r for r in drive_rows if (r["station"], r["campaign_uid"]) in campaigns]
    owners = {(r["station"], r["campaign_uid"]) for r in drives}
    criteria, note = merged_criteria(campaigns[k] for k in sorted(owners))
    sets_of: dict[tuple[str, int, int], dict[frozenset[str], int]] = {}
    for r in failing_rows:
        found = sets_of.setdefault((r["station"], r["campaign_uid"], r["channel"]), {})
        s = frozenset(r["classes"].split(","))
        found[s] = found.get(s, 0) + int(r["cuts"])
    by_key: dict[str, list[Any]] = {}
    for r in drives:
        by_key.setdefault(_drive_key(r), []).append(r)
    all_sets: dict[frozenset[str], int] = {}
    listed = []
    for group in by_key.values():
        failing = 0
        for r in group:
            for s, n in sets_of.get((r["station"], r["campaign_uid"], r["channel"]), {}).items():
                all_sets[s] = all_sets.get(s, 0) + n
                failing += n
        cuts = sum(int(r["cuts"]) for r in group)
        dead = any(r["dead"] for r in group)
        listed.append(
            ModelDriveSummary(
                group[0]["serial"] or group[0]["wwn"],
                sorted({r["station"] for r in group}),
                cuts,
                failing,
                dead,
                verdicts.drive_verdict(
                    dead, failing, cuts, criteria.max_failure_rate, criteria.confidence
                ),
            )
        )
    cuts = sum(int(r["cuts"]) for r in drives)
    counted = set(criteria.classes)
    crit_failed = sum(n for s, n in all_sets.items() if (s & counted if counted else s))
    crit = proportion(crit_failed, cuts, criteria.confidence)
    dead_drives = sum(d.dead for d in listed)
    return ModelSummary(
        model=model,
        cuts=cuts,
        rig_errors=sum(int(r["rig_errors"]) for r in drives),
        interrupted=sum(int(r["interrupted"]) for r in drives),
        drives=listed,
        failing_sets=all_sets,
        criteria=criteria,
        criteria_note=note,
        criteria_failure=crit,
        any_failure=proportion(sum(all_sets.values()), cuts, CONFIDENCE),
        verdict=model_verdict(criteria, crit, dead_drives, [(d.name, d.cuts) for d in listed]),
    )


def read_summaries(
    central: Any, model: str | None = None, campaign: str | None = None
) -> dict[str, ModelSummary]:
    """Per model (or the one `model`), its summary over every campaign, or over the one campaign
    whose key (station/uid) is `campaign`, from the central database's per-drive totals."""
    from reports.load.central import campaign_of

    campaigns = {
        (r["station"], r["uid"]): campaign_of(r)
        for r in central.campaign_rows()
        if campaign is None or f"{r['station']}/{r['uid']}" == campaign
    }
    drives: dict[str, list[Any]] = {}
    for r in central.model_drive_totals(model):
        drives.setdefault(r["model"], []).append(r)
    failing: dict[str, list[Any]] = {}
    for r in central.model_failing_sets(model):
        failing.setdefault(r["model"], []).append(r)
    found = {}
    for name, rows in sorted(drives.items()):
        if any((r["station"], r["campaign_uid"]) in campaigns for r in rows):
            found[name] = summarise(name, rows, failing.get(name, []), campaigns)
    for name, m in found.items():  # the verdict on exposed cuts, as the report's
        kept = [r for r in drives[name] if (r["station"], r["campaign_uid"]) in campaigns]
        judged = [campaigns[k] for k in sorted({(r["station"], r["campaign_uid"]) for r in kept})]
        found[name] = _exposed(m, kept, central.model_exposure_sets(name), judged)
    if model is not None and model in found:  # a model's page: its classes too
        m = found[model]
        rows = [r for r in central.model_class_totals(model) if r["failure"]]
        ordered = failures.ordered(r["class"] for r in rows)
        by_class = {r["class"]: r for r in rows}
        classes = [
            ClassRow(k, m.cuts_with(k), int(by_class[k]["findings"]), int(by_class[k]["blocks"]))
            for k in ordered
        ]
        found[model] = replace(m, classes=classes)
    return found


def _exposed(
    m: ModelSummary, drive_rows: list[Any], rows: Iterable[Any], judged: list[CampaignData]
) -> ModelSummary:
    """The model's and each drive's (of `drive_rows`: the judged campaigns' drives) exposure
    per judged class, by the report's own rule
    (reports/analysis/exposure.py: per_class) over the cuts per set of failure classes and of
    classes exposed to (`model_exposure_sets`), as reports/load/central.py counts a drive's
    aggregates."""
    parts: dict[tuple[str, int, int], RunPart] = {}
    for r in rows:
        part = parts.setdefault(
            (r["station"], r["campaign_uid"], r["channel"]),
            RunPart(0, {}, [frozenset()], {}, None, 0, 0, 0, 0, 0, {}),
        )
        text = r["failure_classes"]
        pair = (
            frozenset(text.split(",")) if text else frozenset(),
            exposure.from_text(r["exposed"]),
        )
        part.exposure_counts[pair] = part.exposure_counts.get(pair, 0) + int(r["cuts"])
    zero = exposures.zero_tolerance_of(judged)

    def of(keys: Iterable[tuple[str, int, int]]) -> list[ClassExposure]:
        cuts = RunCuts([], [parts[k] for k in keys if k in parts])
        return exposures.per_class(cuts, m.criteria, zero, proportion)

    by_name: dict[str, list[tuple[str, int, int]]] = {}
    for r in drive_rows:
        by_name.setdefault(r["serial"] or r["wwn"], []).append(
            (r["station"], r["campaign_uid"], r["channel"])
        )
    listed = [replace(d, exposure=of(by_name.get(d.name, []))) for d in m.drives]
    classes = of(k for keys in by_name.values() for k in keys)
    short = any(d.cuts < m.criteria.min_cycles for d in listed)
    verdict = exposures.decide(m.verdict, classes, m.criteria, short, None)
    return replace(m, drives=listed, exposure=classes, verdict=verdict)
