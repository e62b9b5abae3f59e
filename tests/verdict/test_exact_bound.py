"""`rig status`'s Clopper-Pearson upper bound without scipy (rig/verdict/exact_bound.py) against
scipy.stats.beta.ppf, the figure the report prints, on many (k, n, C)."""

from __future__ import annotations

import random

import pytest
from scipy.stats import beta

from rig.verdict import stats
from rig.verdict.exact_bound import upper_bound


def _cases() -> list[tuple[int, int, float]]:
    grid = [
        (k, n, c)
        for n in (1, 2, 3, 5, 10, 37, 100, 1000, 12345, 200000)
        for k in sorted({0, 1, 2, 40, n // 3 if n <= 12345 else 7, n - 1, n})
        if k <= n
        for c in (0.5, 0.9, 0.95, 0.99, 0.999)
    ]
    rng = random.Random(506)
    for _ in range(400):
        n = rng.randint(1, 100_000)
        grid.append((rng.randint(0, min(n, 60)), n, rng.choice((0.8, 0.9, 0.95, 0.99))))
    return grid


def test_the_bound_is_scipys_beta_quantile_to_1e_9() -> None:
    for k, n, c in _cases():
        reference = 1.0 if k >= n else float(beta.ppf(c, k + 1, n - k))
        got = upper_bound(k, n, c)
        assert got == pytest.approx(reference, rel=1e-9, abs=1e-12), (k, n, c)
        assert got == pytest.approx(stats.clopper_pearson_upper(k, n, c), rel=1e-9), (k, n, c)


def test_counts_outside_a_proportion_are_refused() -> None:
    for bad in ((1, 0, 0.95), (-1, 5, 0.95), (6, 5, 0.95), (1, 5, 1.0), (1, 5, 0.0)):
        with pytest.raises(ValueError):
            upper_bound(*bad)
