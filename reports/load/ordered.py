"""Values in sorted order, exactly, without holding them all: a model's return times
for the return-time curve (every value, in order), its nearest-rank quantiles and its drives'
medians, read a piece at a time from the spilled tables. A pass counts the values of a range in
bins of equal width; a range of at most LIMIT values is gathered and sorted, a larger one split
by its bins again (a range of one value is that value, as many times as it was seen). Each pass
reads the pieces again (from files: milliseconds a pass for a drive of 333,000 cuts)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from reports.load.cuts import FloatArray

LIMIT = 65_536  # values gathered and sorted at a time
BINS = 256  # bins a range larger than LIMIT is split into


def sorted_pieces(
    pieces: Callable[[], Iterable[FloatArray]], limit: int | None = None
) -> Iterator[FloatArray]:
    """Every value of `pieces()` (no NaN) in ascending order, as arrays of at most `limit`
    values (default LIMIT) or of one repeated value."""
    limit = limit or LIMIT
    count, low, high = 0, math.inf, -math.inf
    for p in pieces():
        if len(p):
            count += len(p)
            low, high = min(low, float(p.min())), max(high, float(p.max()))
    if count:
        yield from _range(pieces, low, high, count, limit)


def _range(
    pieces: Callable[[], Iterable[FloatArray]], low: float, high: float, count: int, limit: int
) -> Iterator[FloatArray]:
    """The `count` values v with low <= v <= high, sorted."""
    if low == high:
        yield np.full(count, low)
        return
    if count <= limit:
        found = np.concatenate([p[(p >= low) & (p <= high)] for p in pieces()])
        found.sort()
        yield found
        return
    edges = np.linspace(low, high, BINS + 1)
    counts = np.zeros(BINS, np.int64)
    lows = np.full(BINS, math.inf)
    highs = np.full(BINS, -math.inf)
    for p in pieces():
        inside = p[(p >= low) & (p <= high)]
        if not len(inside):
            continue
        # bin i holds edges[i] <= v < edges[i + 1]; the last also v == high
        at = np.minimum(np.searchsorted(edges, inside, side="right") - 1, BINS - 1)
        counts += np.bincount(at, minlength=BINS)
        np.minimum.at(lows, at, inside)
        np.maximum.at(highs, at, inside)
    if counts.max() == count:  # (low and high a few ulps apart: the bins did not split them)
        at_low = sum(int((p == low).sum()) for p in pieces())
        yield np.full(at_low, low)
        above = float(np.nextafter(low, math.inf))
        yield from _range(pieces, above, high, count - at_low, limit)
        return
    for i in np.flatnonzero(counts):
        yield from _range(pieces, float(lows[i]), float(highs[i]), int(counts[i]), limit)


def nearest_rank(p: float, n: int) -> int:
    """The 0-based rank of the nearest-rank p-quantile of n values (an observed value, never
    an interpolated one)."""
    return min(n - 1, max(0, math.ceil(p * n) - 1))


def ranks(ordered: Iterable[FloatArray], wanted: Iterable[int]) -> dict[int, float]:
    """The values at the given 0-based ranks of sorted pieces."""
    left = sorted(set(wanted))
    found: dict[int, float] = {}
    seen = 0
    for piece in ordered:
        if not left:
            break
        while left and left[0] < seen + len(piece):
            found[left[0]] = float(piece[left[0] - seen])
            left.pop(0)
        seen += len(piece)
    return found
