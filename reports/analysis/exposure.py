"""Per failure class, the cuts exposed to it, the failing cuts among them and the fixed-sample
bound over them (docs/checker.md, "Exposure"; docs/reports.md): the report's verdict counts only
the cuts that could have failed a class. A cut of unknown exposure (a store that cannot say)
counts as exposed, as before exposure was kept, and is counted apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reports.analysis.record import ClassExposure, Proportion, ReportCriteria, Verdict
from reports.load.dataset import CampaignData
from reports.load.run_parts import RunCuts
from rig.check import failures
from rig.config.criteria import Criteria as Stated
from rig.verdict import rule as verdicts
from rig.verdict import stats

NOT_EXERCISED = "NOT EXERCISED"


def zero_tolerance_of(campaigns: Iterable[CampaignData]) -> tuple[str, ...]:
    """The zero-tolerance classes the campaigns state (their union), else the rig's default."""
    found: set[str] = set()
    stated = False
    for c in campaigns:
        table = c.criteria or c.config.get("criteria") or {}
        listed = table.get("zero_tolerance") if isinstance(table, dict) else None
        if isinstance(listed, list):
            stated = True
            found.update(str(x) for x in listed)
    return tuple(failures.ordered(found)) if stated else Stated().zero_tolerance


def per_class(
    cuts: RunCuts,
    criteria: ReportCriteria,
    zero: Sequence[str],
    proportion: object,
) -> list[ClassExposure]:
    """Every judged class (the criteria's, or every failure class) in table order."""
    make = proportion  # reports.analysis.reliability.proportion (failed, trials, confidence)
    assert callable(make)
    judged = criteria.classes or failures.failure_names()
    out = []
    for cls in failures.ordered(judged):
        exposed, failing, unknown = cuts.exposure(cls)
        p: Proportion = make(failing, exposed, criteria.confidence)
        out.append(ClassExposure(cls, p, unknown, cls in zero, _verdict(p, cls in zero, criteria)))
    return out


def _verdict(p: Proportion, zero: bool, criteria: ReportCriteria) -> str:
    if p.trials == 0:
        return NOT_EXERCISED
    if p.failed and zero:
        return verdicts.FAIL
    if p.upper is not None and p.upper < criteria.max_failure_rate:
        return verdicts.PASS
    lower = stats.clopper_pearson_lower(p.failed, p.trials, criteria.confidence)
    return verdicts.FAIL if lower > criteria.max_failure_rate else verdicts.NOT_YET


def rule(classes: Sequence[ClassExposure]) -> tuple[str, str] | None:
    """The verdict the per-class rule gives and the line naming it; None where it leaves the
    model to the other rules (every exercised class passed, or one is not yet demonstrated)."""
    zero = [c for c in classes if c.zero_tolerance and c.cuts.failed]
    if zero:
        named = ", ".join(f"{c.cls} in {c.cuts.failed} cut(s)" for c in zero)
        return verdicts.FAIL, f"zero tolerance: {named}"
    failed = [c for c in classes if c.verdict == verdicts.FAIL]
    if failed:
        named = ", ".join(
            f"{c.cls} {c.cuts.failed} of {c.cuts.trials} exposed cuts" for c in failed
        )
        return verdicts.FAIL, f"fixed-sample bound per class: {named}, above the claim"
    return None


def not_exercised(classes: Sequence[ClassExposure]) -> list[str]:
    return [c.cls for c in classes if c.verdict == NOT_EXERCISED]


def decide(
    base: Verdict,
    classes: Sequence[ClassExposure],
    criteria: ReportCriteria,
    short: bool,
    plan: tuple[str, int] | None,
) -> Verdict:
    """The model's one verdict and the rule that decided it (`Verdict.rule`): a zero-tolerance
    class or a class's bound above the claim FAILs; then a dead drive (`base`, the pooled rule
    of reports.analysis.reliability.model_verdict); then a sequential plan's decision (`plan`:
    decision and cuts); then the fixed-sample bound per class on its exposed cuts: PASS only when
    every exercised judged class passed (those no cut exposed are named, never passed)."""
    never = not_exercised(classes)
    tail = f" (not exercised: {', '.join(never)})" if never else ""
    found = rule(classes)
    if found is not None:
        return _with(base, False, found[0], found[1], 0)
    if base.label == verdicts.FAIL:
        return _with(base, False, verdicts.FAIL, base.reasons[-1], 0)
    if plan is not None:
        decision, cuts = plan
        line = f"sequential plan: {decision} after {cuts} cuts on each class's exposed cuts{tail}"
        return _with(base, decision == verdicts.PASS, decision, line, 0)
    exercised = [c for c in classes if c.verdict != NOT_EXERCISED]
    if exercised and all(c.verdict == verdicts.PASS for c in exercised) and not short:
        line = f"fixed-sample bound per class: every judged class passed on its exposed cuts{tail}"
        return _with(base, True, verdicts.PASS, line, 0)
    needed = max(
        [stats.trials_to_demonstrate(c.cuts.failed, criteria.max_failure_rate, criteria.confidence)
         - c.cuts.trials for c in exercised] or [base.cuts_needed],
    )  # fmt: skip
    waiting = [c.cls for c in exercised if c.verdict != verdicts.PASS] or never
    line = f"fixed-sample bound per class: not demonstrated for {', '.join(waiting)}{tail}"
    return _with(base, False, verdicts.NOT_YET, line, max(needed, base.cuts_needed, 1))


def _with(base: Verdict, passed: bool, label: str, line: str, needed: int) -> Verdict:
    return Verdict(passed, label, [line, *(r for r in base.reasons if r != line)], needed, line)
