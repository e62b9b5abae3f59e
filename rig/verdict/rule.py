"""One drive's verdict from its counts: the rule the report applies per drive, shared with the
end-of-run table and `rig status` so none of them can claim more than the report does."""

from __future__ import annotations

import math

from rig.verdict import stats

PASS, FAIL, DEAD, NOT_YET = "PASS", "FAIL", "DEAD", "NOT YET DEMONSTRATED"


def drive_verdict(
    dead: bool, failing_cuts: int, cuts: int, max_failure_rate: float, confidence: float
) -> str:
    """DEAD; FAIL if any cut has a failure finding (of any class: the criteria's classes decide
    the model's verdict, not a drive's); PASS only where `cuts` failure-free cuts put the
    exact upper bound of the failure rate below the claim; else NOT YET DEMONSTRATED."""
    if dead:
        return DEAD
    if failing_cuts:
        return FAIL
    if cuts and failure_free_bound_below(cuts, max_failure_rate, confidence):
        return PASS
    return NOT_YET


# How far apart the closed form and scipy's beta quantile may be, relative: they differ by at
# most a few ulp (4e-16 on 200,000 random cases; tests/verdict/test_verdict_closed_form.py)
CLOSED_FORM_MARGIN = 1e-12


def failure_free_bound_below(cuts: int, max_failure_rate: float, confidence: float) -> bool:
    """Whether `cuts` failure-free cuts put the exact (Clopper-Pearson) one-sided upper bound
    below `max_failure_rate`: the report's `stats.clopper_pearson_upper(0, cuts, confidence)`,
    decided without scipy. With no failure that bound is the beta(1, n) quantile, in closed form
    1 - (1 - C)^(1/n); where it lies within `CLOSED_FORM_MARGIN` of the claim (a tie to the last
    bits, which the two computations may round apart), scipy's figure decides, so every verdict
    is the one the report's own bound gives (docs/decisions.md, "A failure-free bound in closed
    form where scipy is not loaded")."""
    if cuts > 0 and 0.0 < confidence < 1.0 and max_failure_rate > 0.0:
        closed = -math.expm1(math.log1p(-confidence) / cuts)
        if abs(closed - max_failure_rate) > CLOSED_FORM_MARGIN * max_failure_rate:
            return closed < max_failure_rate
    return stats.clopper_pearson_upper(0, cuts, confidence) < max_failure_rate


def cuts_still_needed(cuts: int, max_failure_rate: float, confidence: float) -> int:
    """Failure-free cuts still needed, after `cuts` of them, to demonstrate the claim."""
    return max(0, stats.trials_to_demonstrate(0, max_failure_rate, confidence) - cuts)
