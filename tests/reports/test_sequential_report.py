"""The report's sequential section from stated plans (reports/analysis/sequential.py): which plan a
model's campaigns state, and nothing at all for a model without one."""

from __future__ import annotations

from reports.analysis.sequential import merged_plan, plan_of
from reports.load.dataset import CampaignData
from reports.render.sequential_html import sequential_section
from rig.verdict.sequential import Plan


def campaign(
    name: str, criteria: dict[str, object], config: dict[str, object] | None = None
) -> CampaignData:
    return CampaignData("s.sqlite", 1, name, "st", "done", 0.0, 1.0, 1, config or {}, criteria)


PLAN = {"p0": 0.01, "p1": 0.1, "alpha": 0.05, "beta": 0.1, "max_cuts": 200, "scope": "model"}


def test_the_plan_is_read_from_the_stored_criteria_or_the_file() -> None:
    assert plan_of(campaign("a", {"sequential": PLAN})) == (
        Plan(0.01, 0.1, 0.05, 0.1, 200),
        "model",
    )
    from_file = campaign("b", {}, {"criteria": {"sequential": {**PLAN, "scope": "drive"}}})
    assert plan_of(from_file) == (Plan(0.01, 0.1, 0.05, 0.1, 200), "drive")
    assert plan_of(campaign("c", {"max_failure_probability": 0.001})) is None
    assert plan_of(campaign("d", {"sequential": {"p0": 0.01}})) is None  # not a whole plan


def test_campaigns_that_state_different_plans_get_the_strictest_of_each() -> None:
    other = {**PLAN, "p0": 0.005, "p1": 0.2, "beta": 0.05, "max_cuts": 100}
    merged = merged_plan(
        [campaign("a", {"sequential": PLAN}), campaign("b", {"sequential": other})]
    )
    assert merged is not None
    plan, scope, origin = merged
    assert plan == Plan(0.005, 0.1, 0.05, 0.05, 200) and scope == "model"
    assert "different plans" in origin
    same = merged_plan([campaign("a", {"sequential": PLAN}), campaign("b", {"sequential": PLAN})])
    assert same is not None and same[2] == "stated in campaign a, b"
    assert merged_plan([campaign("a", {})]) is None


def test_no_plan_no_section() -> None:
    assert sequential_section(None) == ""
