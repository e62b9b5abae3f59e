"""The statistics a reliability report needs, from scipy.stats at run time: a certification file
cites a library its reader already trusts. The project's own implementation of the same figures
(tests/verdict/own_stats.py) is kept as the tests' cross-check, beside published values.

- Clopper-Pearson exact binomial bounds (beta quantiles: scipy.special.betaincinv, what
  scipy.stats.beta.ppf computes, without the 50 MB import), the success-run theorem (cuts needed
  with zero failures) and the cuts needed with k failures, the reliability demonstrated;
- Fisher's exact test for 2x2 tables (two-sided, scipy.stats.fisher_exact), Holm's step-down
  adjustment (a few lines: scipy has no Holm);
- Kaplan-Meier (scipy.stats.ecdf on censored data) with its log-log (Kalbfleisch-Prentice)
  confidence band, and Greenwood's variance for the exported tables.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if a <= 0 or b <= 0:
        raise ValueError("betainc needs a > 0 and b > 0")
    if not 0.0 <= x <= 1.0:
        raise ValueError("betainc needs 0 <= x <= 1")
    from scipy import special  # here: `rig status` and the end table import no scipy

    return float(special.betainc(a, b, x))


def beta_ppf(q: float, a: float, b: float) -> float:
    """The beta distribution's quantile: the x with I_x(a, b) = q."""
    if not 0.0 <= q <= 1.0:
        raise ValueError("beta_ppf needs 0 <= q <= 1")
    from scipy import special

    return float(special.betaincinv(a, b, q))  # = scipy.stats.beta.ppf, without its import


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


def trials_to_demonstrate(failures: int, max_rate: float, confidence: float = 0.95) -> int:
    """The fewest trials n with `failures` failures among them whose exact upper bound is below
    `max_rate` (0 failures: the success-run number). More cuts with no further failure would
    bring a model showing `failures` so far to its claim at n."""
    if failures < 0 or not 0.0 < max_rate < 1.0:
        raise ValueError("need failures >= 0 and 0 < max_rate < 1")
    if failures == 0:
        return success_run_trials(1.0 - max_rate, confidence)
    low, high = failures + 1, max(failures + 2, 2 * success_run_trials(1.0 - max_rate, confidence))
    while clopper_pearson_upper(failures, high, confidence) >= max_rate:
        low, high = high, high * 2
    while low < high:  # the bound falls as trials grow: the first n below the rate
        mid = (low + high) // 2
        if clopper_pearson_upper(failures, mid, confidence) < max_rate:
            high = mid
        else:
            low = mid + 1
    return low


def reliability_demonstrated(failures: int, trials: int, confidence: float = 0.95) -> float:
    """The per-trial reliability R shown at `confidence`: 1 - the Clopper-Pearson upper bound.
    With zero failures this is the success-run value (1 - C) ** (1 / n)."""
    return 1.0 - clopper_pearson_upper(failures, trials, confidence)


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test on [[a, b], [c, d]]."""
    if min(a, b, c, d) < 0:
        raise ValueError("a 2x2 table holds counts >= 0")
    if a + b + c + d == 0:
        return 1.0
    from scipy import stats as sp  # here: it costs 50 MB and 0.5 s, and `rig status` needs none

    return float(sp.fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue)


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
    """Kaplan-Meier survival (scipy.stats.ecdf), one step per distinct event time.

    `events[i]` is True when subject i failed at `times[i]` and False when it was censored
    (still alive) there; at a tie, censored subjects count as at risk (the usual convention).
    """
    if len(times) != len(events):
        raise ValueError("times and events differ in length")
    died = [float(t) for t, e in zip(times, events, strict=True) if e]
    if not died:
        return []
    alive = [float(t) for t, e in zip(times, events, strict=True) if not e]
    from scipy import stats as sp

    sf = sp.ecdf(sp.CensoredData(uncensored=died, right=alive)).sf
    with warnings.catch_warnings():  # S = 0 or 1: the band is undefined there (handled below)
        warnings.simplefilter("ignore", RuntimeWarning)
        band = sf.confidence_interval(confidence, method="log-log")
    steps: list[KmStep] = []
    greenwood = 0.0
    for time in sorted(set(died)):
        at_risk = sum(t >= time for t in times)
        deaths = sum(1 for t in died if t == time)
        survival = float(sf.evaluate(time))
        greenwood = (
            greenwood + deaths / (at_risk * (at_risk - deaths)) if at_risk > deaths else math.inf
        )
        if 0.0 < survival < 1.0 and math.isfinite(greenwood):
            lower, upper = float(band.low.evaluate(time)), float(band.high.evaluate(time))
        else:
            lower, upper = (0.0, 1.0) if survival > 0 else (0.0, 0.0)
        variance = survival**2 * greenwood if math.isfinite(greenwood) else math.inf
        steps.append(KmStep(time, at_risk, deaths, survival, lower, upper, variance))
    return steps
