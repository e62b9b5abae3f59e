"""reports/load/ordered.py gives every value in sorted order, exactly, holding a bounded number at a
time: the same as np.sort for values with many repeats, wide and narrow ranges, adjacent floats
and empty pieces; and the nearest ranks as the report's quantiles take them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reports.load import ordered


def _pieces(values: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    cuts = np.cumsum(sizes)[:-1]
    return list(np.split(values, cuts))


CASES = {
    "repeats": np.repeat(np.array([80.0, 3.5, 80.0, 1e6, 0.0]), 300),
    "spread": np.random.default_rng(1).lognormal(3, 2, 5000),
    "narrow": 1.0 + np.random.default_rng(2).integers(0, 40, 3000) * np.finfo(float).eps,
    "adjacent": np.array([1.0, np.nextafter(1.0, 2.0)] * 700),
    "one": np.array([42.0]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("limit", [1, 7, 1000])
def test_sorted_pieces_are_np_sort_in_bounded_arrays(case: str, limit: int) -> None:
    values = np.random.default_rng(3).permutation(CASES[case])
    sizes = [0, 5, len(values) // 3, 0, len(values)]
    pieces = _pieces(values, sizes)
    out = list(ordered.sorted_pieces(lambda: pieces, limit))
    got = np.concatenate(out)
    assert np.array_equal(got, np.sort(values))
    # bounded: each array at most `limit` values, or one value repeated
    assert all(len(a) <= limit or a.min() == a.max() for a in out)


def test_ranks_are_the_nearest_ranks_of_the_sorted_values() -> None:
    values = CASES["spread"]
    ordered_values = np.sort(values)
    n = len(values)
    wanted = [0, ordered.nearest_rank(0.5, n), ordered.nearest_rank(0.99, n), n - 1]
    found = ordered.ranks(ordered.sorted_pieces(lambda: [values[:10], values[10:]], 64), wanted)
    assert found == {r: float(ordered_values[r]) for r in wanted}
    assert ordered.nearest_rank(0.5, 4) == 1 == math.ceil(0.5 * 4) - 1
    assert list(ordered.sorted_pieces(lambda: [np.empty(0)])) == []
