"""The central report's binned return times (reports/load/binned.py; docs/decisions.md, "The
central report states figures from the server's aggregates"): its quantiles lie within the
stated RELATIVE_ERROR of the per-cut analysis's nearest-rank values, and the minimum, maximum,
mean and count are exact."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reports.analysis import reliability as analysis
from reports.load import binned


def histogram_of(values: np.ndarray) -> binned.LogHistogram:
    """The bins as the server makes them (rig/interface/fleet/central/aggregates.py): the same
    formula."""
    h = binned.LogHistogram()
    keys = np.floor(np.log(np.maximum(values, binned.FLOOR_MS)) * binned.BINS_PER_E)
    for k in np.unique(keys):
        inside = values[keys == k]
        low, high, total = float(inside.min()), float(inside.max()), float(inside.sum())
        h.add_bin(int(k), len(inside), low, high, total)
    return h


@pytest.mark.parametrize("seed", range(20))
def test_binned_quantiles_are_within_the_stated_error(seed: int) -> None:
    # return times of real drives: log-normal around 100 ms to seconds, a few far out
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    values = rng.lognormal(math.log(200), 1.5, n)
    exact = analysis._quantiles(values)
    found = histogram_of(values).quantiles()
    assert found.keys() == exact.keys()
    assert found["min"] == exact["min"] and found["max"] == exact["max"]
    assert found["mean"] == pytest.approx(exact["mean"], rel=1e-12)
    for k in ("p50", "p90", "p99"):
        assert abs(found[k] / exact[k] - 1) <= binned.RELATIVE_ERROR * (1 + 1e-12)
    median = float(np.median(values))
    assert abs(histogram_of(values).median() / median - 1) <= binned.RELATIVE_ERROR * 1.000001


def test_the_stated_error_is_reached_not_just_bounded() -> None:
    """The error is half a bin: a value at a bin's edge is stated at the bin's middle."""
    edge = math.exp(100 / binned.BINS_PER_E) * (1 + 1e-9)  # just inside bin 100
    h = histogram_of(np.array([edge, 1e6]))  # (the max elsewhere: no clamping to it)
    h.low = 0.0
    assert h.at_rank(0) / edge - 1 == pytest.approx(binned.RELATIVE_ERROR, rel=1e-6)


def test_a_histogram_adds_up_and_lists_its_steps() -> None:
    a, b = histogram_of(np.array([1.0, 2.0, 3.0])), histogram_of(np.array([2.5, 1000.0]))
    a.add(b)
    assert a.n == 5 and a.low == 1.0 and a.high == 1000.0 and a.total == pytest.approx(1008.5)
    values, counts = a.steps()
    assert sum(counts) == 5 and values == sorted(values)
    assert a.as_json()["bins"] == [[v, c] for v, c in zip(values, counts, strict=True)]
    assert binned.LogHistogram().quantiles() == {} and binned.LogHistogram().median() is None
