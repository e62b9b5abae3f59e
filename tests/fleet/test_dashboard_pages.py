"""The dashboard's HTML (overview, campaign fragment, page shell) of fixed inputs equals the
reference written by the dashboard before its templates (tests/fleet/golden/dashboard.html):
every branch a row can take (lagging, in-process, queued, ended, dead drives, stations, names
with quotes, ampersands and angle brackets). No PostgreSQL, no clock.

Regenerate (only for an intended change of the pages, saying so in the commit):
    .venv/bin/python -m tests.fleet.test_dashboard_pages
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from rig.interface.fleet import dashboard
from rig.interface.fleet.freshness import StationStatus
from rig.interface.fleet.verdicts import ModelVerdict
from rig.interface.fleet.views import CampaignProgress, FleetDriveProgress, Overview

REFERENCE = Path(__file__).resolve().parent / "golden" / "dashboard.html"
ODD = "Q'\"&<x> /#?"  # a name that must be escaped, and URL-quoted in a link


class Verdicts:
    """The verdict board's two questions, answered from a table (no dataset to judge)."""

    def __init__(self, by_campaign: dict[str, list[ModelVerdict]]) -> None:
        self.by_campaign = by_campaign

    def campaign(self, c: CampaignProgress) -> list[ModelVerdict]:
        return self.by_campaign.get(c.key, [])

    def models(self, view: Overview) -> dict[str, ModelVerdict]:
        return {v.model: v for vs in self.by_campaign.values() for v in vs}


def overview() -> Overview:
    drives = [
        FleetDriveProgress(0, ODD, "s<1>", "dead", 3, 2, 0, 1),
        FleetDriveProgress(1, "M2", "s2", "active", 5, 5, 1, 0),
    ]
    campaigns = [
        CampaignProgress(
            *("st/1", ODD, "st'a", "running", 7, 1.0, None, 10, 4, 3, 1, 2, 12.5, 300.0, 1),
            findings={"lost_write": 2, ODD: 1},
            drives=drives,
            state="shipping",
            lagging=True,
            reported_s=99.0,
            process_bound=True,
        ),
        CampaignProgress(
            *("q9", "c2", "st", "done", None, 1.0, 5000.0, 0, 0, 0, 0, 0, 0.0, None, 0),
            duration_s=8000.0,
        ),
        CampaignProgress("b/2", "c3", "b", "running", None, 2.0, None, 8, 2, 2, 0, 0, 3.0, 60.0, 0),
    ]
    stations = [StationStatus("st'a", 2, 3.0, "agent <1>"), StationStatus("b", 0, None, "x", 2.5)]
    return Overview("central <db>", stations, campaigns, [ODD, "M2", "M3"], 86400.0 * 400)


def verdicts() -> Verdicts:
    return Verdicts(
        {
            "st/1": [
                ModelVerdict(ODD, "FAIL", "FAIL", 3, 1),
                ModelVerdict("M2", "NOT YET DEMONSTRATED", "NOT-YET-DEMONSTRATED", 5, 1),
            ],
        }
    )


def pages(module: ModuleType) -> str:
    """Every page part of `module` (the dashboard) for the fixed inputs, one after another."""
    view = overview()
    parts = [module.overview_fragment(view), module.overview_fragment(view, verdicts())]
    empty = Overview("one store", [], [], [], 0.0)
    parts.append(module.overview_fragment(empty, verdicts()))
    for c in view.campaigns:
        parts += [module.campaign_fragment(c), module.campaign_fragment(c, verdicts())]
    live = module._live("/fragment/x'y", "<p>content</p>")
    parts.append(module._page(f"Campaign {ODD}", live))
    return "\n<!-- next part -->\n".join(parts) + "\n"


def test_dashboard_pages_are_unchanged() -> None:
    assert pages(dashboard) == REFERENCE.read_text(encoding="utf-8")


if __name__ == "__main__":
    REFERENCE.write_text(pages(dashboard), encoding="utf-8")
