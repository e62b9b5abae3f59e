"""The window of vulnerability by simulation: the design (rig/window/design.py) places every cut,
a draw from the twin profile's true loss curve answers it (fixtures/window_sim.py), the estimator
(rig/window/fit.py) gives t99 with its interval. Coverage is counted over 50 seeded campaigns:
its simulation error at a true coverage of 95 % is sqrt(0.95 x 0.05 / 50) = 3.1 points, so a
design whose intervals cover 90 % or more passes and one far below fails.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from fixtures import window_sim
from fixtures.profiles import load_profiles, profile
from rig.window import fit
from rig.window.design import LogUniformDesign, WindowDesign

RANGE = (0.1, 60_000.0)
CUTS = 80
SEEDS = 50
WINDOW_PROFILES = sorted(n for n, p in load_profiles().items() if p.destage_window_ms > 0)
Factory = Callable[[], WindowDesign]


def coverage(name: str, design: Factory, seeds: int = SEEDS, cuts: int = CUTS) -> float:
    """Share of seeded campaigns whose bounded t99 interval holds the profile's true t99."""
    drive = profile(name)
    truth = drive.true_quantile_ms(0.99)
    covered = 0
    for seed in range(seeds):
        result = window_sim.campaign(drive.true_loss_probability, design(), cuts, seed)
        t99 = result.quantile(0.99)
        covered += t99 is not None and t99.covers(truth)
    return covered / seeds


def designed() -> WindowDesign:
    return WindowDesign(*RANGE)


class AtTheTopOnly(WindowDesign):
    """A broken design: every cut at the top of the range (it never sees a loss)."""

    def next_delay_ms(self, rng: random.Random) -> float:
        return self.max_ms


class BackwardsDesign(WindowDesign):
    """A broken design: it places each cut where it teaches least."""

    def next_delay_ms(self, rng: random.Random) -> float:
        worst = int(self.expected_variance().argmax())
        return math.exp(float(self._candidates[worst]))


def test_profiles_state_the_true_curve_they_play() -> None:
    step, jitter = profile("window-20ms"), profile("window-20ms-jitter")
    assert step.true_loss_probability(19.9) == 1.0 and step.true_loss_probability(20.1) == 0.0
    assert step.true_quantile_ms(0.99) == 20.0
    assert jitter.true_loss_probability(20.0) == pytest.approx(0.5)
    t99 = jitter.true_quantile_ms(0.99)
    assert t99 == pytest.approx(20 * math.exp(0.5 * 2.3263), rel=1e-3)
    assert jitter.true_loss_probability(t99) == pytest.approx(0.01, rel=1e-3)
    assert len(WINDOW_PROFILES) >= 8


@pytest.mark.parametrize(
    "name", ["window-20ms-jitter", pytest.param("window-200ms", marks=pytest.mark.slow)]
)
def test_interval_covers_true_t99_in_90_percent_of_50_campaigns(name: str) -> None:
    assert coverage(name, designed) >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("name", WINDOW_PROFILES)
def test_interval_covers_true_t99_on_every_profile(name: str) -> None:
    """Measured 2026-11-28 (seeds 0-49, 80 cuts, the 220 x 60 grid; figures under -s): window-2ms
    0.98, -2ms-jitter 0.96, -20ms 1.0, -20ms-jitter 0.98, -200ms 1.0, -200ms-jitter 0.98, -2s
    0.96, -2s-jitter 0.96 (0.88 on the former 140 x 25 grid), ack-window-20ms-jitter 0.98,
    ack-window-200ms-jitter 0.98; SE sqrt(c (1 - c) / 50): 2.0 points at 0.98, 2.8 at 0.96.
    Seeds 50-199: window-2s-jitter 0.953, -200ms-jitter 0.973 (SE 1.7 / 1.3 points)."""
    covered = coverage(name, designed)
    print(f"\n{name}: t99 covered in {covered:.2f} of {SEEDS} campaigns")
    assert covered >= 0.9


@pytest.mark.slow
@pytest.mark.parametrize("broken", [AtTheTopOnly, BackwardsDesign])
@pytest.mark.parametrize("name", WINDOW_PROFILES)
def test_a_broken_design_fails_the_coverage_check_on_every_profile(
    name: str, broken: type[WindowDesign]
) -> None:
    assert coverage(name, lambda: broken(*RANGE), seeds=20) < 0.9


@pytest.mark.parametrize("broken", [AtTheTopOnly, BackwardsDesign])
def test_a_broken_design_fails_the_coverage_check(broken: type[WindowDesign]) -> None:
    assert coverage("window-20ms-jitter", lambda: broken(*RANGE), seeds=20) < 0.9


def test_a_drive_that_never_loses_is_no_window_never_a_window_of_zero() -> None:
    result = window_sim.campaign(lambda d: 0.0, designed(), 60, seed=1)
    assert result.verdict == "none" and not result.quantiles
    assert result.summary() == f"no window found up to {result.max_delay_ms:g} ms in 60 cuts"
    assert result.max_delay_ms > RANGE[1] / 10  # the design looked across the range


def test_two_windows_fail_the_fit_and_the_design_spreads_its_cuts() -> None:
    curve = window_sim.two_windows(5.0, (500.0, 5000.0), 0.6)
    spread, poor = 0, 0
    for seed in range(10):
        design = designed()
        result = window_sim.campaign(curve, design, 120, seed)
        poor += result.verdict == "poor_fit"
        spread += design.spread
    assert poor >= 8 and spread >= 8
    assert "no threshold reported" in result.summary()


def test_the_estimate_converges_on_probit_data() -> None:
    rng = random.Random(3)
    delays = [math.exp(rng.uniform(0, 8)) for _ in range(3000)]
    truth = profile("window-200ms-jitter")
    lost = [rng.random() < truth.true_loss_probability(d) for d in delays]
    result = fit.fit(delays, lost)
    assert result.verdict == "window"
    t50, t99 = result.quantile(0.5), result.quantile(0.99)
    assert t50 is not None and t99 is not None
    assert t50.covers(200.0) and t99.covers(truth.true_quantile_ms(0.99))
    assert t99.relative_half_width() < 0.2


def test_an_interval_the_cuts_cannot_bound_stays_open() -> None:
    # every cut lost: nothing says where the window ends
    result = fit.fit([1.0, 2.0, 5.0, 10.0, 20.0], [True] * 5)
    t99 = result.quantile(0.99)
    assert t99 is not None and t99.high_ms is None and not t99.covers(30.0)


def test_the_window_design_beats_log_uniform_placement_at_equal_cuts() -> None:
    drive = profile("window-20ms-jitter")
    truth = drive.true_quantile_ms(0.99)

    def width(factory: Factory) -> float:
        widths = []
        for seed in range(8):
            q = window_sim.campaign(drive.true_loss_probability, factory(), CUTS, seed)
            t99 = q.quantile(0.99)
            widths.append(t99.relative_half_width() if t99 else math.inf)
        return sorted(widths)[len(widths) // 2]

    assert truth > 0
    assert width(designed) < width(lambda: LogUniformDesign(*RANGE))


def test_the_limit_is_bartlett_corrected_where_the_deviance_runs_above_chi_square() -> None:
    """At 80 cuts the profile deviance is larger than chi-square(1) (docs/decisions.md,
    "Intervals are Bartlett-corrected by a parametric bootstrap"): the jittered window's
    interval limit is scaled up by the bootstrap's mean deviance; a step's is not."""

    def factor(name: str) -> float:
        design = designed()
        result = window_sim.campaign(profile(name).true_loss_probability, design, CUTS, seed=0)
        cuts = fit.CutsByDelay.of(design.delays_ms, design.lost)
        return fit.bartlett(cuts, result.mu, result.sigma, (0.99,))[0]

    assert factor("window-2s-jitter") > 1.1
    assert factor("window-20ms") == 1.0


def test_the_designs_posterior_is_as_sure_of_t99_as_its_cuts_allow() -> None:
    """The design aims its cuts by its posterior of ln t99; a posterior surer than the cuts allow
    bunches them (docs/decisions.md, "The design is Bayesian on a probit of log delay, aimed at
    t99"). Over 60 seeded campaigns of 40 cuts on window-2s-jitter, the
    standardised error z = (posterior mean - true ln t99) / posterior SD has an SD of 1.07 with
    the 220 x 60 grid (calibrated: 1; the SD's own simulation error is about 0.1) and 1.59 with
    the former 140 x 25 grid, whose steps in ln t99 were as wide as the posterior."""
    drive = profile("window-2s-jitter")
    truth = math.log(drive.true_quantile_ms(0.99))
    errors = []
    for seed in range(60):
        rng, design = random.Random(seed), designed()
        for _ in range(40):
            delay = design.next_delay_ms(rng)
            design.observe(delay, rng.random() < drive.true_loss_probability(delay))
        mean, sd = design.posterior_ln_quantile()
        errors.append((mean - truth) / sd)
    spread = math.sqrt(sum(z * z for z in errors) / len(errors))
    assert 0.8 < spread < 1.3
