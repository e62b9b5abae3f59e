"""One drive's verdict from its counts: the rule the report applies per drive, shared with the
end-of-run table and `rig status` so none of them can claim more than the report does."""

from __future__ import annotations

from reports import stats

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
    if cuts and stats.clopper_pearson_upper(0, cuts, confidence) < max_failure_rate:
        return PASS
    return NOT_YET


def cuts_still_needed(cuts: int, max_failure_rate: float, confidence: float) -> int:
    """Failure-free cuts still needed, after `cuts` of them, to demonstrate the claim."""
    return max(0, stats.trials_to_demonstrate(0, max_failure_rate, confidence) - cuts)
