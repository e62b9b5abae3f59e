"""A model's sequential verdict in the report (docs/decisions.md, "The report replays the plan
over every store"): the plan its campaigns state (`campaign.criteria.sequential`,
rig/verdict/sequential.py), run over the model's cuts pooled over every store and station given,
in the order the cuts started, and over each drive's own cuts; the plan's exact OC and ASN
curves. Models whose campaigns state no plan have none (and the report shows only the
fixed-sample verdict for them, unchanged)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from reports.load.cuts import table_of
from reports.load.dataset import CampaignData, DriveData
from rig.campaign import settle
from rig.config.criteria import Criteria
from rig.verdict.sequential import Plan, curves, fixed_sample_size

CONTINUING = "continuing"  # the label of a plan that has not decided
CURVE_POINTS = 61  # p from 0 to 3 x p1 (and p0, p1 themselves)


@dataclass
class Decision:
    decision: str  # PASS, FAIL or "continuing"
    cuts: int  # cuts the plan used (every cut seen when continuing)
    failing: int  # failing cuts among them
    cuts_seen: int  # cuts recorded (a decided plan's drives may record a few more)


@dataclass
class DriveDecision:
    drive: str  # serial (or WWN)
    decision: Decision


@dataclass
class SequentialReport:
    plan: dict[str, Any]  # p0, p1, alpha, beta, max_cuts
    scope: str  # what the rig ran one plan over while the campaign ran: model or drive
    stopped_when_settled: bool  # a campaign had [stop] when = "settled"
    origin: str  # which campaign(s) state it, and how plans that differ were merged
    model: Decision  # the plan over the model's cuts, pooled
    drives: list[DriveDecision]
    exact_fail_at_p0: float  # producer's risk, exactly (recursion)
    exact_pass_at_p1: float  # consumer's risk, exactly
    asn_p0: float
    asn_p1: float
    fixed_sample_cuts: int  # the smallest fixed-sample plan with the same alpha and beta
    fixed_sample_failures: int  # ... FAIL when more than this many cuts fail
    p: list[float] = field(default_factory=list)  # the curves' points
    pass_probability: list[float] = field(default_factory=list)  # OC
    asn: list[float] = field(default_factory=list)
    asn_sd: list[float] = field(default_factory=list)


def plan_of(campaign: CampaignData) -> tuple[Plan, str] | None:
    """The plan a campaign states, from the stored criteria (or the file's [criteria])."""
    table = campaign.criteria or campaign.config.get("criteria") or {}
    stated = table.get("sequential") if isinstance(table, dict) else None
    if not isinstance(stated, dict):
        return None
    try:
        plan = Plan(
            float(stated["p0"]),
            float(stated["p1"]),
            float(stated.get("alpha", 0.05)),
            float(stated.get("beta", 0.1)),
            int(stated["max_cuts"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return plan, str(stated.get("scope", "model"))


def _stop_when(campaign: CampaignData) -> str:
    stop = campaign.config.get("stop")
    return str(stop.get("when", "cycles")) if isinstance(stop, dict) else "cycles"


def merged_plan(campaigns: Iterable[CampaignData]) -> tuple[Plan, str, str] | None:
    """The plan over a model's campaigns: the one they state, or where they differ the
    strictest of each figure (smallest p0, p1, alpha and beta; most cuts)."""
    stated = {c.name: p for c in campaigns if (p := plan_of(c)) is not None}
    if not stated:
        return None
    plans = {p for p, _ in stated.values()}
    scope = sorted({s for _, s in stated.values()})[0]
    names = ", ".join(sorted(stated))
    if len(plans) == 1:
        return next(iter(plans)), scope, f"stated in campaign {names}"
    strictest = Plan(
        min(p.p0 for p in plans),
        min(p.p1 for p in plans),
        min(p.alpha for p in plans),
        min(p.beta for p in plans),
        max(p.max_cuts for p in plans),
    )
    return strictest, scope, f"campaigns {names} state different plans; the strictest of each"


def analyse(
    runs: Sequence[DriveData],
    classes: tuple[str, ...],
    zero_tolerance: tuple[str, ...] | None = None,
) -> SequentialReport | None:
    """`runs`: one model's drive runs; `classes`: the failure classes that count (() = all);
    `zero_tolerance`: those whose first occurrence fails (None: the rig's default)."""
    merged = merged_plan({id(r.campaign): r.campaign for r in runs}.values())
    if merged is None:
        return None
    plan, scope, origin = merged
    settled = any(_stop_when(r.campaign) == "settled" for r in runs)
    judged = Criteria(classes=classes)
    if zero_tolerance is not None:
        judged = dataclasses.replace(judged, zero_tolerance=zero_tolerance)
    started, outcomes = _pooled(runs, classes)
    by_drive: dict[str, list[DriveData]] = {}
    for r in runs:
        by_drive.setdefault(r.key, []).append(r)
    drives = [
        DriveDecision(rs[0].serial or rs[0].wwn, _decision(plan, *_pooled(rs, classes), judged))
        for rs in by_drive.values()
    ]
    ps = np.unique(np.r_[np.linspace(0, min(1.0, 3 * plan.p1), CURVE_POINTS), plan.p0, plan.p1])
    c = curves(plan, ps)
    at0, at1 = int(np.searchsorted(ps, plan.p0)), int(np.searchsorted(ps, plan.p1))
    fixed_n, fixed_c = fixed_sample_size(plan.p0, plan.p1, plan.alpha, plan.beta)
    return SequentialReport(
        plan.as_json(),
        scope,
        settled,
        origin,
        _decision(plan, started, outcomes, judged),
        drives,
        float(c.fail_probability[at0]),
        float(c.pass_probability[at1]),
        float(c.asn[at0]),
        float(c.asn[at1]),
        fixed_n,
        fixed_c,
        ps.tolist(),
        c.pass_probability.tolist(),
        c.asn.tolist(),
        c.sd.tolist(),
    )


def _pooled(
    runs: Sequence[DriveData], classes: tuple[str, ...]
) -> tuple[npt.NDArray[np.float64], list[tuple[frozenset[str], frozenset[str] | None]]]:
    """The runs' cuts in the order they started (ties: the runs' order, then each run's
    cycle order): start times, and per cut its failure classes and its exposure."""
    del classes  # (the replay judges the classes itself)
    starts, outcomes = [], []
    for r in runs:
        t = table_of(r.cuts)
        mask = t.is_cut
        starts.append(t.columns["started_at"][mask])
        exposed = t.exposed if len(t.exposed) == len(t) else np.zeros(len(t), np.int32)
        for code, ex in zip(t.classes[mask], exposed[mask], strict=True):
            outcomes.append((t.class_sets[int(code)], t.exposed_sets[int(ex)]))
    started = np.concatenate(starts) if starts else np.empty(0)
    order = np.argsort(started, kind="stable")
    return started[order], [outcomes[i] for i in order]


def _decision(
    plan: Plan,
    started: npt.NDArray[np.float64],
    outcomes: list[tuple[frozenset[str], frozenset[str] | None]],
    judged: Criteria,
) -> Decision:
    """The rig's own rule replayed (rig/campaign/settle.py): one plan per judged class over the
    cuts exposed to it, zero-tolerance classes first. A judged class no cut exposed is not
    waited for (the rig knew at the start that it could not be; the report sees none)."""
    settlement = settle.Settlement(dataclasses.replace(judged, sequential=plan))
    seen = frozenset().union(*(ex for _, ex in outcomes if ex is not None)) if outcomes else None
    if seen is not None and all(ex is not None for _, ex in outcomes):
        settlement.cannot_exercise("k", [c for c in settlement.classes if c not in seen])
    for found, exposed in outcomes:
        if (settled := settlement.add("k", "ok", found, exposed)) is not None:
            return Decision(settled.decision, settled.cuts, settled.failing, len(started))
    failing = sum(not found.isdisjoint(settlement.classes) for found, _ in outcomes)
    return Decision(CONTINUING, len(outcomes), failing, len(started))
