"""The project's own statistics (tests/verdict/own_stats.py, what rig/verdict/stats.py was before it
called scipy at run time) against scipy and against
published values that do not depend on any library."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special
from scipy import stats as sp

from rig.verdict import stats as runtime
from tests.verdict import own_stats as stats


@pytest.mark.parametrize(
    ("a", "b", "x"),
    [
        (0.5, 0.5, 0.3),
        (1, 2995, 1e-3),
        (2, 5, 0.2),
        (30, 2.5, 0.95),
        (500, 700, 0.41),
        (1, 1, 0.77),
        (1e-3, 4, 0.5),
        (4000, 3, 0.999),
    ],
)
def test_betainc_matches_scipy(a: float, b: float, x: float) -> None:
    assert stats.betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=1e-10, abs=1e-300)


@settings(max_examples=200, deadline=None)
@given(
    q=st.floats(1e-6, 1 - 1e-6),
    a=st.floats(0.05, 5000),
    b=st.floats(0.05, 5000),
)
def test_beta_quantile_matches_scipy(q: float, a: float, b: float) -> None:
    expected = sp.beta.ppf(q, a, b)
    assert stats.beta_ppf(q, a, b) == pytest.approx(expected, rel=1e-8, abs=1e-14)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), trials=st.integers(1, 20000), confidence=st.sampled_from([0.9, 0.95, 0.99]))
def test_clopper_pearson_matches_scipy_binomtest(
    data: st.DataObject, trials: int, confidence: float
) -> None:
    failures = data.draw(st.integers(0, trials))
    # binomtest finds its bounds with a root finder good to ~1e-8 relative (checked: for 1 of
    # 9,299 it is 1e-8 off the closed form 1 - (1 - q)^(1/n)), hence the looser tolerance there;
    # the beta quantiles themselves are compared tightly.
    upper = sp.binomtest(failures, trials).proportion_ci(confidence, "exact")  # two-sided
    low, high = stats.clopper_pearson_interval(failures, trials, confidence)
    assert low == pytest.approx(upper.low, rel=1e-6, abs=1e-14)
    assert high == pytest.approx(upper.high, rel=1e-6, abs=1e-14)
    one_sided = sp.binomtest(failures, trials, alternative="less").proportion_ci(confidence)
    mine = stats.clopper_pearson_upper(failures, trials, confidence)
    assert mine == pytest.approx(one_sided.high, rel=1e-6, abs=1e-14)
    if failures < trials:
        expected = sp.beta.ppf(confidence, failures + 1, trials - failures)
        assert mine == pytest.approx(expected, rel=1e-9)
    if failures == 1:  # closed form of the lower bound: I_x(1, n) = 1 - (1 - x)^n
        tail = (1 - confidence) / 2
        assert low == pytest.approx(-math.expm1(math.log1p(-tail) / trials), rel=1e-9)


def test_clopper_pearson_published_values() -> None:
    # zero failures: the bound is 1 - (1 - C)^(1/n) exactly ("rule of three" ~ 3/n)
    for n in (10, 100, 2995, 100_000):
        assert stats.clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-10)
    # Clopper & Pearson (1934) / common tables: 95% two-sided interval for 0 of 10 is
    # [0, 0.3085], for 5 of 10 [0.1871, 0.8129]
    assert stats.clopper_pearson_interval(0, 10)[1] == pytest.approx(0.30850, abs=5e-5)
    low, high = stats.clopper_pearson_interval(5, 10)
    assert (low, high) == (pytest.approx(0.18709, abs=5e-5), pytest.approx(0.81291, abs=5e-5))
    assert stats.clopper_pearson_upper(10, 10) == 1.0
    assert stats.clopper_pearson_lower(0, 10) == 0.0


def test_success_run_theorem() -> None:
    # the example: 0 failures in 2,995 cuts supports p < 1e-3 at 95%
    assert stats.success_run_trials(0.999, 0.95) == 2995
    assert stats.clopper_pearson_upper(0, 2995) < 1e-3 < stats.clopper_pearson_upper(0, 2994)
    # textbook success-run table values (R, C) -> n
    assert stats.success_run_trials(0.90, 0.90) == 22
    assert stats.success_run_trials(0.95, 0.95) == 59
    assert stats.success_run_trials(0.99, 0.95) == 299
    assert stats.success_run_trials(0.99, 0.90) == 230
    assert stats.reliability_demonstrated(0, 2995) == pytest.approx(0.05 ** (1 / 2995))
    assert stats.reliability_demonstrated(0, 59) >= 0.95


@pytest.mark.parametrize(
    "table",
    [
        (0, 40, 40, 0),
        (0, 40, 29, 11),
        (8, 2, 1, 5),
        (3, 1, 1, 3),  # Fisher's tea-tasting table: p = 0.4857
        (1, 2999, 0, 3000),
        (12, 5, 7, 15),
        (0, 0, 3, 4),
        (5, 0, 5, 0),
        (2, 7, 8, 2),
        (100, 2900, 80, 2920),
    ],
)
def test_fisher_exact_matches_scipy(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    expected = sp.fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue
    assert stats.fisher_exact(a, b, c, d) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_fisher_tea_tasting_published() -> None:
    assert stats.fisher_exact(3, 1, 1, 3) == pytest.approx(0.4857, abs=1e-4)


@settings(max_examples=100, deadline=None)
@given(st.tuples(*(st.integers(0, 60) for _ in range(4))))
def test_fisher_exact_random_tables(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    expected = sp.fisher_exact([[a, b], [c, d]]).pvalue
    assert stats.fisher_exact(a, b, c, d) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_holm_published_example() -> None:
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") == 0.03 0.06 0.06 0.02
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert stats.holm([]) == []


def test_holm_matches_scipy_bonferroni_bound() -> None:
    rng = np.random.default_rng(6)
    p = list(rng.uniform(0, 0.2, 12))
    adjusted = stats.holm(p)
    # Holm is never more conservative than Bonferroni, and never below the raw p
    for raw, adj in zip(p, adjusted, strict=True):
        assert raw <= adj <= min(1.0, raw * len(p)) + 1e-15
    # monotone in the raw p-values
    order = np.argsort(p)
    assert all(np.diff(np.array(adjusted)[order]) >= -1e-15)


def _scipy_km(times: list[float], events: list[bool]) -> sp._survival.ECDFResult:
    died = [t for t, e in zip(times, events, strict=True) if e]
    alive = [t for t, e in zip(times, events, strict=True) if not e]
    return sp.ecdf(sp.CensoredData(uncensored=died, right=alive))


@pytest.mark.parametrize(
    ("times", "events"),
    [
        ([3, 5, 5, 8, 10, 12, 12, 15], [1, 1, 0, 1, 0, 1, 1, 0]),
        ([100, 200, 300, 400], [0, 1, 0, 1]),
        ([7, 7, 7, 9, 11, 30, 30, 30, 30], [1, 0, 1, 1, 0, 1, 0, 0, 0]),
    ],
)
@pytest.mark.filterwarnings("ignore:The confidence interval is undefined")
def test_kaplan_meier_matches_scipy(times: list[float], events: list[int]) -> None:
    flags = [bool(e) for e in events]
    steps = stats.kaplan_meier(times, flags)
    ref = _scipy_km(times, flags).sf
    # scipy evaluates the survival function at every distinct time; compare at event times
    for s in steps:
        assert s.survival == pytest.approx(ref.evaluate(s.time), rel=1e-12)
    band = ref.confidence_interval(0.95, method="log-log")
    for s in steps:
        if 0 < s.survival < 1:
            assert s.lower == pytest.approx(band.low.evaluate(s.time), rel=1e-6)
            assert s.upper == pytest.approx(band.high.evaluate(s.time), rel=1e-6)
    linear = ref.confidence_interval(0.95, method="linear")
    for s in steps:
        # Greenwood's variance: the linear band is S +- z * sqrt(Var)
        half = 1.959963984540054 * math.sqrt(s.variance)
        if s.survival - half > 0 and s.survival + half < 1:
            assert s.survival - half == pytest.approx(linear.low.evaluate(s.time), rel=1e-6)


def test_kaplan_meier_textbook() -> None:
    # Kaplan & Meier style example (Collett, Modelling Survival Data, table 2.1 pattern):
    # 6 subjects, deaths at 1 and 3, censored at 2, 4, 5, 6
    steps = stats.kaplan_meier([1, 2, 3, 4, 5, 6], [True, False, True, False, False, False])
    assert [s.time for s in steps] == [1, 3]
    assert steps[0].survival == pytest.approx(5 / 6)
    assert steps[1].survival == pytest.approx(5 / 6 * 3 / 4)
    assert [s.at_risk for s in steps] == [6, 4]
    assert stats.kaplan_meier([10, 20], [False, False]) == []


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        stats.clopper_pearson_upper(3, 2)
    with pytest.raises(ValueError):
        stats.clopper_pearson_upper(0, 0)
    with pytest.raises(ValueError):
        stats.success_run_trials(1.0)
    with pytest.raises(ValueError):
        stats.fisher_exact(-1, 0, 0, 0)


def test_pillow_and_selenium_stay_test_only() -> None:
    """requirements-dev.lock pins them for the tests; the rig and its reports must not need them."""
    root = Path(__file__).resolve().parents[2]
    for package in ("rig", "reports", "fixtures"):
        for source in (root / package).rglob("*.py"):
            text = source.read_text()
            for name in ("PIL", "selenium"):
                assert f"import {name}" not in text and f"from {name}" not in text, source


# -- the run-time statistics (scipy.stats) against the project's own implementation ------------


@settings(max_examples=150, deadline=None)
@given(
    failures=st.integers(0, 60),
    extra=st.integers(0, 5000),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99, 0.999]),
)
def test_runtime_bounds_agree_with_own(failures: int, extra: int, confidence: float) -> None:
    trials = failures + max(extra, 1)
    assert runtime.clopper_pearson_upper(failures, trials, confidence) == pytest.approx(
        stats.clopper_pearson_upper(failures, trials, confidence), rel=1e-8, abs=1e-14
    )
    assert runtime.clopper_pearson_interval(failures, trials, confidence) == pytest.approx(
        stats.clopper_pearson_interval(failures, trials, confidence), rel=1e-8, abs=1e-14
    )
    assert runtime.reliability_demonstrated(failures, trials, confidence) == pytest.approx(
        stats.reliability_demonstrated(failures, trials, confidence), rel=1e-10
    )


@settings(max_examples=150, deadline=None)
@given(table=st.tuples(*[st.integers(0, 40)] * 4))
def test_runtime_fisher_agrees_with_own(table: tuple[int, int, int, int]) -> None:
    assert runtime.fisher_exact(*table) == pytest.approx(
        stats.fisher_exact(*table), rel=1e-9, abs=1e-300
    )


@pytest.mark.parametrize(
    ("times", "events"),
    [
        ([3, 5, 5, 8, 10, 12, 12, 15], [1, 1, 0, 1, 0, 1, 1, 0]),
        ([100, 200, 300, 400], [0, 1, 0, 1]),
        ([7, 7, 7, 9, 11, 30, 30, 30, 30], [1, 0, 1, 1, 0, 1, 0, 0, 0]),
        ([5, 5], [1, 1]),
        ([10, 20], [0, 0]),
    ],
)
def test_runtime_kaplan_meier_agrees_with_own(times: list[float], events: list[int]) -> None:
    flags = [bool(e) for e in events]
    mine, theirs = stats.kaplan_meier(times, flags), runtime.kaplan_meier(times, flags)
    assert [(s.time, s.at_risk, s.events) for s in mine] == [
        (s.time, s.at_risk, s.events) for s in theirs
    ]
    for a, b in zip(mine, theirs, strict=True):
        assert b.survival == pytest.approx(a.survival, rel=1e-12)
        assert b.lower == pytest.approx(a.lower, rel=1e-6, abs=1e-12)
        assert b.upper == pytest.approx(a.upper, rel=1e-6, abs=1e-12)
        if math.isfinite(a.variance):
            assert b.variance == pytest.approx(a.variance, rel=1e-12)


def test_runtime_published_values() -> None:
    assert runtime.success_run_trials(0.999, 0.95) == 2995
    assert runtime.clopper_pearson_interval(0, 10)[1] == pytest.approx(0.30850, abs=5e-5)
    assert runtime.fisher_exact(3, 1, 1, 3) == pytest.approx(0.4857, abs=1e-4)
    assert runtime.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    with pytest.raises(ValueError):
        runtime.clopper_pearson_upper(3, 2)
    with pytest.raises(ValueError):
        runtime.fisher_exact(-1, 0, 0, 0)


@pytest.mark.parametrize("failures", [0, 1, 2, 5, 20])
@pytest.mark.parametrize(("rate", "confidence"), [(1e-3, 0.95), (1e-2, 0.9), (0.05, 0.99)])
def test_trials_to_demonstrate_is_the_first_n_below_the_rate(
    failures: int, rate: float, confidence: float
) -> None:
    n = runtime.trials_to_demonstrate(failures, rate, confidence)
    assert stats.clopper_pearson_upper(failures, n, confidence) < rate
    assert stats.clopper_pearson_upper(failures, n - 1, confidence) >= rate
    if failures == 0:
        assert n == stats.success_run_trials(1 - rate, confidence)
