"""The report's timing section: per campaign and strategy, how its cuts fell against their
plan (store v14 `realized_delay_ns`, `delay_in_range`; rig/campaign/cutcycle/cuts.py
`fidelity`), read from the store file, or as the central database gave it (`Dataset.timing`).
A store of an older rig, or a campaign shipped before fleet v8, has no section."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from reports.load.dataset import Dataset
from reports.render.templating import ENV
from rig.store.reader import StoreReader

OUTSIDE_WARN = 0.01  # as `rig status`: more than this share of cuts outside the range


@dataclass(frozen=True)
class CampaignTiming:
    source: str
    campaign: str
    strategy: str
    cuts: int
    outside_range: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None

    @property
    def warn(self) -> bool:
        return self.cuts > 0 and self.outside_range > OUTSIDE_WARN * self.cuts


def analyse(data: Dataset) -> list[CampaignTiming]:
    rows = []
    for c in data.campaigns:
        found = data.timing.get((c.source, c.campaign_id))  # (the central database's)
        if found is None and os.path.isfile(c.source):
            db = StoreReader(c.source)
            try:
                found = db.timing_of_campaign(c.campaign_id)
            finally:
                db.close()
        if not found or not found["cuts"]:
            continue
        cut = c.config.get("cut", {})
        strategy = str(cut.get("strategy", "uniform")) if isinstance(cut, dict) else "uniform"
        rows.append(
            CampaignTiming(
                os.path.basename(c.source),
                c.name,
                strategy,
                int(found["cuts"] or 0),
                int(found["outside_range"] or 0),
                _ms(found["p50_ms"]),
                _ms(found["p99_ms"]),
                _ms(found["max_ms"]),
            )
        )
    return rows


def _ms(value: float | int | None) -> float | None:
    return None if value is None else float(value)


def to_json(rows: list[CampaignTiming]) -> list[dict[str, Any]]:
    return [{**asdict(r), "warn": r.warn} for r in rows]


def section(rows: list[CampaignTiming]) -> str:
    """The section, or "" when no campaign has a realized delay (the page is unchanged)."""

    def ms(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f} ms"

    return str(ENV.get_template("timing.html.j2").render(rows=rows, ms=ms))
