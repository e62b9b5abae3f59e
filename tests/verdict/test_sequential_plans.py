"""Sequential plans (rig/verdict/sequential.py): their error rates, OC and ASN proven by simulated
campaigns (tests/sequential_sim.py states the simulation's error), and plans broken on purpose
caught by the same checks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rig.verdict.sequential import (
    CONTINUE,
    FAIL,
    PASS,
    Plan,
    Settled,
    curves,
    first_decision,
    fixed_sample_size,
)
from tests.sequential_sim import exposed_violations, violations

PLANS = [
    Plan(0.01, 0.1, 0.05, 0.1, 200),  # the demo's
    Plan(0.001, 0.01, 0.05, 0.1, 5000),
    Plan(0.3, 0.5, 0.01, 0.01, 300),
]
SHORT, FULL = 10_000, 100_000


@pytest.mark.parametrize("plan", PLANS, ids=str)
def test_error_rates_oc_and_asn_hold_in_simulation(plan: Plan) -> None:
    assert plan.problem() == ""
    assert violations(plan, SHORT, seed=24) == []


@pytest.mark.slow
@pytest.mark.parametrize("plan", PLANS, ids=str)
def test_error_rates_oc_and_asn_hold_in_100k_simulated_campaigns(plan: Plan) -> None:
    assert violations(plan, FULL, seed=2024) == []


@dataclasses.dataclass(frozen=True)
class SwappedBoundaries(Plan):
    """A plan whose FAIL and PASS boundaries changed places."""

    @property
    def upper(self) -> float:
        return super().lower

    @property
    def lower(self) -> float:
        return super().upper


@dataclasses.dataclass(frozen=True)
class SwappedRisks(Plan):
    """A plan that put beta where alpha belongs and alpha where beta does."""

    @property
    def upper(self) -> float:
        return float(np.log(1 / self.beta))

    @property
    def lower(self) -> float:
        return float(np.log(self.alpha))


@pytest.mark.parametrize("broken", [SwappedBoundaries, SwappedRisks])
def test_the_simulation_catches_a_broken_plan(broken: type[Plan]) -> None:
    plan = broken(0.01, 0.1, 0.05, 0.2, 200)
    assert violations(Plan(0.01, 0.1, 0.05, 0.2, 200), SHORT, seed=24) == []  # unbroken: holds
    found = violations(plan, SHORT, seed=24)
    assert any(v.startswith("false FAIL at p0") for v in found), found


def test_exact_curves_at_the_ends() -> None:
    plan = PLANS[0]
    c = curves(plan, [0.0, 1.0])
    # no failures: PASS after exactly the cuts the boundary needs; all failing: FAIL as soon
    assert list(c.pass_probability) == [1.0, 0.0]
    assert list(c.asn) == [plan.cuts_to_pass(), plan.cuts_to_fail()]
    assert np.allclose(c.pass_probability + c.fail_probability, 1.0)


def test_first_decision_stops_at_the_first_crossing() -> None:
    plan = PLANS[0]
    assert first_decision(plan, [True, True, False]) == first_decision(plan, [True, True])
    assert first_decision(plan, [True, True]).decision == FAIL
    clean = first_decision(plan, [False] * 100)
    assert (clean.decision, clean.cuts) == (PASS, plan.cuts_to_pass())
    assert first_decision(plan, [False, True]).decision == CONTINUE


def test_truncation_decides_by_the_likelihood_ratio_sign() -> None:
    plan = Plan(0.01, 0.1, 0.05, 0.1, 40)
    # paths that stay between the boundaries up to the truncation, ending below 0 and above
    below = [i == 19 for i in range(40)]
    above = [i in (0, 25) for i in range(40)]
    assert plan.llr(40, 1) < 0 < plan.llr(40, 2)
    assert first_decision(plan, below) == Settled(PASS, 40, 1)
    assert first_decision(plan, above) == Settled(FAIL, 40, 2)
    assert first_decision(plan, below[:39]).decision == CONTINUE


def test_fixed_sample_size_meets_both_risks_and_is_the_smallest() -> None:
    from scipy import stats

    n, c = fixed_sample_size(0.01, 0.1, 0.05, 0.1)
    assert stats.binom.sf(c, n, 0.01) <= 0.05 and stats.binom.cdf(c, n, 0.1) <= 0.1
    for m in range(1, n):
        cut = stats.binom.ppf(0.95, m, 0.01)
        assert not (stats.binom.sf(cut, m, 0.01) <= 0.05 and stats.binom.cdf(cut, m, 0.1) <= 0.1)


@pytest.mark.parametrize("exposure", [0.3, 0.7])
def test_the_rigs_plan_keeps_its_risks_over_exposed_cuts(exposure: float) -> None:
    """The campaign's plan (rig/campaign/settle.py) steps only on cuts exposed to the class it
    judges: at exposure below 1 its risks stay those of the plan over the exposed cuts, and it
    takes ASN / exposure cuts (tests/sequential_sim.py: within 3 standard errors of 2,000
    simulated campaigns each). Stepping on every cut, as before, passes a p1 drive far more
    often than beta (its unexposed cuts count as failure-free trials)."""
    plan = Plan(0.01, 0.1, 0.05, 0.1, 200)
    assert exposed_violations(plan, exposure, 2_000, seed=35) == []
