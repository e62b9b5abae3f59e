"""The project's own implementation of the report's statistics, kept as a cross-check of
rig/verdict/stats.py (which calls scipy.stats at run time): two independent
implementations that agree are the test; neither is imported by the rig.

- regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz), and the beta
  quantile by bisection on it: slow but it cannot diverge, and a report computes a few hundred;
- Clopper-Pearson exact binomial bounds, the success-run theorem (cuts needed with zero failures),
  the reliability demonstrated;
- Fisher's exact test for 2x2 tables (two-sided, as scipy and R: tables no more likely than the
  observed one), Holm's step-down adjustment;
- Kaplan-Meier with Greenwood's variance and a log-log (Kalbfleisch-Prentice) confidence band.

Compared with rig/verdict/stats.py and published values in tests/verdict/test_stats.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

_EPS = 1e-16
_TINY = 1e-300


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _beta_cf(x: float, a: float, b: float) -> float:
    """Continued fraction of the incomplete beta (Numerical Recipes 6.4, modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (x={x}, a={a}, b={b})")


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if a <= 0 or b <= 0:
        raise ValueError("betainc needs a > 0 and b > 0")
    if not 0.0 <= x <= 1.0:
        raise ValueError("betainc needs 0 <= x <= 1")
    if x in (0.0, 1.0):
        return x
    log_front = a * math.log(x) + b * math.log1p(-x) - _log_beta(a, b)
    # the continued fraction converges fast for x < (a+1)/(a+b+2); use the symmetry otherwise
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_cf(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_cf(1.0 - x, b, a) / b


def beta_ppf(q: float, a: float, b: float) -> float:
    """The beta distribution's quantile: the x with I_x(a, b) = q, by bisection.

    I_x is monotone in x, so bisection always converges; it stops at a relative width of 1e-14
    (or after 2000 halvings), which also resolves quantiles as small as 1e-300.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError("beta_ppf needs 0 <= q <= 1")
    if q in (0.0, 1.0):
        return q
    lo, hi = 0.0, 1.0
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return 0.5 * (lo + hi)


def clopper_pearson_upper(failures: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided exact upper bound on the per-trial failure probability."""
    _check_counts(failures, trials, confidence)
    if failures >= trials:
        return 1.0
    return beta_ppf(confidence, failures + 1, trials - failures)


def clopper_pearson_lower(failures: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided exact lower bound on the per-trial failure probability."""
    _check_counts(failures, trials, confidence)
    if failures == 0:
        return 0.0
    return beta_ppf(1.0 - confidence, failures, trials - failures + 1)


def clopper_pearson_interval(
    failures: int, trials: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Two-sided exact interval (each tail (1 - confidence) / 2)."""
    tail = (1.0 + confidence) / 2.0
    return clopper_pearson_lower(failures, trials, tail), clopper_pearson_upper(
        failures, trials, tail
    )


def _check_counts(failures: int, trials: int, confidence: float) -> None:
    if trials <= 0 or not 0 <= failures <= trials:
        raise ValueError(f"need 0 <= failures <= trials and trials > 0 (got {failures}/{trials})")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")


def success_run_trials(reliability: float, confidence: float = 0.95) -> int:
    """Trials without a failure needed to demonstrate `reliability` at `confidence`:
    n = ln(1 - C) / ln(R), rounded up (0 failures in 2,995 cuts: p < 1e-3 at 95%)."""
    if not 0.0 < reliability < 1.0 or not 0.0 < confidence < 1.0:
        raise ValueError("reliability and confidence must lie strictly between 0 and 1")
    n = math.log1p(-confidence) / math.log(reliability)
    # guard against 2994.9999999 from rounding: the exact bound decides
    candidate = max(1, math.floor(n))
    while (1.0 - confidence) < reliability**candidate:
        candidate += 1
    return candidate


def reliability_demonstrated(failures: int, trials: int, confidence: float = 0.95) -> float:
    """The per-trial reliability R shown at `confidence`: 1 - the Clopper-Pearson upper bound.
    With zero failures this is the success-run value (1 - C) ** (1 / n)."""
    return 1.0 - clopper_pearson_upper(failures, trials, confidence)


def _log_hypergeom(k: int, row1: int, col1: int, total: int) -> float:
    def log_comb(n: int, r: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)

    return log_comb(col1, k) + log_comb(total - col1, row1 - k) - log_comb(total, row1)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test on [[a, b], [c, d]]: the total probability,
    with the margins fixed, of every table no more likely than the observed one (with the
    same 1e-7 relative tolerance scipy and R use for ties)."""
    if min(a, b, c, d) < 0:
        raise ValueError("a 2x2 table holds counts >= 0")
    row1, col1, total = a + b, a + c, a + b + c + d
    if total == 0 or row1 in (0, total) or col1 in (0, total):
        return 1.0
    lo, hi = max(0, row1 + col1 - total), min(row1, col1)
    logs = [_log_hypergeom(k, row1, col1, total) for k in range(lo, hi + 1)]
    observed = logs[a - lo]
    biggest = max(logs)
    cutoff = observed + math.log1p(1e-7)
    p = sum(math.exp(x - biggest) for x in logs if x <= cutoff)
    return min(1.0, p * math.exp(biggest))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input's order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class KmStep:
    time: float  # an event time
    at_risk: int
    events: int
    survival: float  # S(t) just after `time`
    lower: float  # pointwise confidence band (log-log), 0..1
    upper: float
    variance: float  # Greenwood's estimate of Var S(t)


def kaplan_meier(
    times: Sequence[float], events: Sequence[bool], confidence: float = 0.95
) -> list[KmStep]:
    """Kaplan-Meier survival with Greenwood's variance, one step per distinct event time.

    `events[i]` is True when subject i failed at `times[i]` and False when it was censored
    (still alive) there; at a tie, censored subjects count as at risk (the usual convention).
    """
    if len(times) != len(events):
        raise ValueError("times and events differ in length")
    z = _normal_ppf((1.0 + confidence) / 2.0)
    pairs = sorted(zip(times, events, strict=True))
    at_risk = len(pairs)
    survival, greenwood = 1.0, 0.0
    steps: list[KmStep] = []
    i = 0
    while i < len(pairs):
        t = pairs[i][0]
        deaths = removed = 0
        while i < len(pairs) and pairs[i][0] == t:
            deaths += pairs[i][1]
            removed += 1
            i += 1
        if deaths:
            survival *= 1.0 - deaths / at_risk
            if at_risk > deaths:
                greenwood += deaths / (at_risk * (at_risk - deaths))
            else:
                greenwood = math.inf
            lower, upper = _log_log_band(survival, greenwood, z)
            steps.append(
                KmStep(t, at_risk, deaths, survival, lower, upper, survival**2 * greenwood)
            )
        at_risk -= removed
    return steps


def _log_log_band(survival: float, greenwood: float, z: float) -> tuple[float, float]:
    if survival <= 0.0 or survival >= 1.0 or not math.isfinite(greenwood):
        return (0.0, 1.0) if survival > 0 else (0.0, 0.0)
    log_s = math.log(survival)
    half = z * math.sqrt(greenwood) / abs(log_s)
    return survival ** math.exp(half), survival ** math.exp(-half)


def _normal_ppf(p: float) -> float:
    """Standard normal quantile by bisection on the error function."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * math.erfc(-mid / math.sqrt(2.0)) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
