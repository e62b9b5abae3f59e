"""A campaign's pass criteria and plan as the report reads them from the store."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reports.load.dataset import CampaignData
from rig.check import failures


@dataclass(frozen=True)
class ReportCriteria:
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


DEFAULT_CRITERIA = ReportCriteria(1e-3, 0.95, (), 0, False, "rig default")


def criteria_of(campaign: CampaignData) -> ReportCriteria | None:
    """Pass criteria a campaign states: the `campaign.criteria` column (rig.config.campaign.Criteria
    as JSON, store v5) where the store has it, else the campaign file's `[criteria]` table. Keys:
    max_failure_probability, confidence, classes, min_cycles. The rig fills the column with its
    defaults when the file has no `[criteria]`: such a campaign states none."""
    if not isinstance(campaign.config.get("criteria"), dict):
        return None
    table = campaign.criteria or campaign.config["criteria"]
    if not isinstance(table, dict):
        return None
    classes = table.get("classes", ())
    rate = table.get("max_failure_probability", table.get("max_failure_rate"))
    return ReportCriteria(
        float(rate if rate is not None else DEFAULT_CRITERIA.max_failure_rate),
        float(table.get("confidence", DEFAULT_CRITERIA.confidence)),
        tuple(str(c) for c in classes) if isinstance(classes, list | tuple) else (),
        int(table.get("min_cycles", 0)),
        True,
        campaign.name,
    )


def merged_criteria(campaigns: Iterable[CampaignData]) -> tuple[ReportCriteria, str]:
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
    strictest = ReportCriteria(
        min(c.max_failure_rate for c in stated),
        max(c.confidence for c in stated),
        classes,
        max(c.min_cycles for c in stated),
        True,
        ", ".join(sorted({c.origin for c in stated})),
    )
    return strictest, "campaigns state different criteria; the strictest of each applies"


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
