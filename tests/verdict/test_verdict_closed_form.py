"""A failure-free drive's verdict is decided without scipy (docs/decisions.md, "A failure-free
bound in closed form where scipy is not loaded") and is always the one the report's own bound
gives: `stats.clopper_pearson_upper(0, n, C) < claim`."""

from __future__ import annotations

import math
import random

import pytest

from rig.verdict import rule as verdict
from rig.verdict import stats


def _claims_at_the_bound(rng: random.Random, count: int) -> list[tuple[int, float, float]]:
    """(cuts, claim, confidence) with the claim on scipy's bound or a few ulp either side:
    the ties where the closed form and scipy may round apart."""
    cases = []
    for _ in range(count):
        cuts = rng.choice([1, 2, 3, 59, 2995, rng.randint(1, 10**7)])
        confidence = rng.choice([0.9, 0.95, 0.99, 0.999, rng.uniform(0.5, 0.9999)])
        bound = stats.clopper_pearson_upper(0, cuts, confidence)
        claim = bound
        for _ in range(rng.randint(-3, 3)):
            claim = math.nextafter(claim, math.inf if rng.random() < 0.5 else 0.0)
        cases.append((cuts, claim, confidence))
    return cases


def _scipy_decides(cuts: int, claim: float, confidence: float) -> bool:
    return stats.clopper_pearson_upper(0, cuts, confidence) < claim


def test_the_closed_form_decides_as_scipy_at_and_around_every_bound() -> None:
    rng = random.Random(430)
    cases = _claims_at_the_bound(rng, 4000)
    # and claims far from the bound: the success-run counts either side of the threshold
    for rate in (1e-2, 1e-3, 1e-4, 0.05, 3.7e-5):
        for confidence in (0.9, 0.95, 0.99):
            n = stats.trials_to_demonstrate(0, rate, confidence)
            cases += [(k, rate, confidence) for k in range(max(1, n - 3), n + 4)]
    wrong = [c for c in cases if verdict.failure_free_bound_below(*c) != _scipy_decides(*c)]
    assert wrong == []


def test_the_margin_is_what_keeps_the_ties(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the margin, the closed form alone rounds some ties the other way: the test above
    has cases sharp enough to see it."""
    monkeypatch.setattr(verdict, "CLOSED_FORM_MARGIN", 0.0)
    cases = _claims_at_the_bound(random.Random(430), 4000)
    wrong = [c for c in cases if verdict.failure_free_bound_below(*c) != _scipy_decides(*c)]
    assert len(wrong) > 10


def test_the_closed_form_stays_within_the_margin_of_scipy() -> None:
    rng = random.Random(431)
    worst = 0.0
    for _ in range(20000):
        cuts = rng.randint(1, 10**8)
        confidence = rng.uniform(0.5, 0.999999)
        closed = -math.expm1(math.log1p(-confidence) / cuts)
        scipy_bound = stats.clopper_pearson_upper(0, cuts, confidence)
        worst = max(worst, abs(closed - scipy_bound) / scipy_bound)
    assert worst < verdict.CLOSED_FORM_MARGIN / 100


def test_verdicts_of_bad_input_still_raise() -> None:
    with pytest.raises(ValueError):
        verdict.drive_verdict(False, 0, 10, 1e-3, 1.5)
