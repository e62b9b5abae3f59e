"""The per-drive verdict rule shared by the report, the end-of-run table and `rig status`."""

from __future__ import annotations

from rig.verdict import stats
from rig.verdict.rule import DEAD, FAIL, NOT_YET, PASS, cuts_still_needed, drive_verdict


def test_failure_free_cuts_pass_only_once_they_demonstrate_the_claim() -> None:
    needed = stats.trials_to_demonstrate(0, 1e-3, 0.95)
    assert needed == 2995  # the success-run number: ln(0.05) / ln(1 - 1e-3) = 2994.2, rounded up
    assert drive_verdict(False, 0, needed - 1, 1e-3, 0.95) == NOT_YET
    assert drive_verdict(False, 0, needed, 1e-3, 0.95) == PASS
    assert drive_verdict(False, 0, 0, 1e-3, 0.95) == NOT_YET  # nothing recorded proves nothing
    assert cuts_still_needed(50, 1e-3, 0.95) == needed - 50
    assert cuts_still_needed(needed + 7, 1e-3, 0.95) == 0


def test_dead_comes_before_failures_and_a_failure_before_any_count() -> None:
    assert drive_verdict(True, 3, 10_000, 1e-3, 0.95) == DEAD
    assert drive_verdict(False, 1, 1_000_000, 1e-3, 0.95) == FAIL
    # a looser claim is shown sooner: 59 failure-free cuts give p < 0.05 at 95 %
    assert drive_verdict(False, 0, 59, 0.05, 0.95) == PASS
    assert drive_verdict(False, 0, 58, 0.05, 0.95) == NOT_YET
