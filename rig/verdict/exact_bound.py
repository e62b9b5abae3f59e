"""The one-sided Clopper-Pearson upper bound without scipy, for `rig status`, which imports
neither numpy nor scipy (docs/decisions.md, "A failure-free bound in closed form where scipy is
not loaded"). The report computes the same bound through scipy (rig/verdict/stats.py:
clopper_pearson_upper); tests/verdict/test_exact_bound.py holds this one to it within 1e-9.

With k failures in n trials the bound is the x at which a binomial(n, x) count is at most k with
probability 1 - C (the beta(k + 1, n - k) quantile C, by the identity I_x(k+1, n-k) =
P[Bin(n, x) > k]). That tail is a sum of k + 1 terms, each from the one before by a ratio, in
logarithms (no underflow at many trials; the other tail's where it is shorter); it falls as x
grows, so bisection finds x to the last bits. No failure: the closed form 1 - (1 - C)^(1/n),
as rig/verdict/rule.py uses it.
"""

from __future__ import annotations

import math


def _log_at_most(k: int, n: int, x: float) -> float:
    """log P[Bin(n, x) <= k], for 0 < x < 1 and 0 <= k < n: the shorter of the two sums (beyond
    n / 2, one less the other tail, the count of successes at most n - k - 1)."""
    if 2 * k > n:
        return math.log(-math.expm1(_log_sum(n - k - 1, n, 1.0 - x)))
    return _log_sum(k, n, x)


def _log_sum(k: int, n: int, x: float) -> float:
    log_term = n * math.log1p(-x)  # j = 0: (1 - x)^n
    odds = math.log(x) - math.log1p(-x)
    terms = [log_term]
    for j in range(1, k + 1):
        log_term += math.log((n - j + 1) / j) + odds
        terms.append(log_term)
    top = max(terms)
    return top + math.log(math.fsum(math.exp(t - top) for t in terms))


def upper_bound(failures: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided exact (Clopper-Pearson) upper bound on the per-trial failure probability: what
    `rig.verdict.stats.clopper_pearson_upper` gives, in pure Python."""
    if trials <= 0 or failures < 0 or failures > trials or not 0.0 < confidence < 1.0:
        raise ValueError("upper_bound needs 0 <= failures <= trials, trials > 0, 0 < C < 1")
    if failures >= trials:
        return 1.0
    if failures == 0:
        return -math.expm1(math.log1p(-confidence) / trials)
    target = math.log1p(-confidence)
    lo, hi = 0.0, 1.0
    for _ in range(2000):  # a midpoint halves the interval: ~1100 at most to adjacent doubles
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _log_at_most(failures, trials, mid) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
