"""Per-cut distributions as the central report keeps them (docs/decisions.md, "The central
report states figures from the server's aggregates"): the return times as counts per logarithmic
bin with their exact minimum, maximum and sum, the delays as cuts and failing cuts per delay
bin. A few hundred numbers per drive for any number of cuts.

A quantile from the bins is the geometric middle of the bin that holds the nearest-rank value
(then kept within the exact minimum and maximum): it lies within RELATIVE_ERROR of the value
the per-cut analysis states (reports/analysis/reliability.py), for values above FLOOR_MS. The
minimum, the maximum, the mean and every count are exact."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from reports.load import ordered
from reports.load.cuts import DelayPoints, FloatArray, StoredReturns

BINS_PER_DOUBLING = 16
BINS_PER_E = BINS_PER_DOUBLING / math.log(2)
FLOOR_MS = 1e-3  # values below it share its bin (a return time is never that short)
# a value and its bin's geometric middle differ by at most half a bin, in ratio
RELATIVE_ERROR = 2 ** (0.5 / BINS_PER_DOUBLING) - 1  # 2.19 %

# The delay bins (ms) a report counts cuts in, since the central report keeps cuts as bins.
DELAY_BINS_MS = (0.0, 1.0, 10.0, 100.0, 1000.0, math.inf)


def bin_middle(k: int) -> float:
    return math.exp((k + 0.5) / BINS_PER_E)


@dataclass
class LogHistogram:
    """Values counted per bin k = floor(ln(max(v, FLOOR_MS)) * BINS_PER_E), with the exact
    count, minimum, maximum and sum. The sum is kept as an exact fraction: the bins arrive in
    whatever order the server's hash aggregation yields them, and a float sum would then differ
    in its last bit between two reads of the same rows."""

    counts: dict[int, int] = field(default_factory=dict)
    low: float = math.inf
    high: float = -math.inf
    exact_total: Fraction = field(default_factory=Fraction)

    @property
    def total(self) -> float:
        return float(self.exact_total)

    @property
    def n(self) -> int:
        return sum(self.counts.values())

    def add_bin(self, k: int, n: int, low: float, high: float, total: float) -> None:
        self.counts[k] = self.counts.get(k, 0) + n
        self.low, self.high = min(self.low, low), max(self.high, high)
        self.exact_total += Fraction(total)

    def add(self, other: LogHistogram) -> None:
        for k, n in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + n
        self.low, self.high = min(self.low, other.low), max(self.high, other.high)
        self.exact_total += other.exact_total

    def at_rank(self, rank: int) -> float:
        """The value of 0-based `rank` among the values in order, to the bin's resolution."""
        below = 0
        for k in sorted(self.counts):
            below += self.counts[k]
            if below > rank:
                return min(self.high, max(self.low, bin_middle(k)))
        raise IndexError(rank)

    def quantiles(self) -> dict[str, float]:
        """As reports.analysis.reliability states them (nearest rank), from the bins: min, max and
        mean exact, p50, p90, p99 within RELATIVE_ERROR."""
        n = self.n
        if not n:
            return {}
        found = {k: self.at_rank(ordered.nearest_rank(p, n)) for k, p in PERCENTILES.items()}
        return {"min": self.low, **found, "max": self.high, "mean": self.total / n}

    def median(self) -> float | None:
        """statistics.median of the values (the mean of the middle two of an even count)."""
        n = self.n
        if not n:
            return None
        if n % 2:
            return self.at_rank(n // 2)
        return (self.at_rank(n // 2 - 1) + self.at_rank(n // 2)) / 2

    def steps(self) -> tuple[list[float], list[int]]:
        """(each bin's value, its count), in order: the CDF a chart draws."""
        keys = sorted(self.counts)
        values = [min(self.high, max(self.low, bin_middle(k))) for k in keys]
        return values, [self.counts[k] for k in keys]

    def as_json(self) -> dict[str, object]:
        values, counts = self.steps()
        return {
            "bins_per_doubling": BINS_PER_DOUBLING,
            "relative_error": RELATIVE_ERROR,
            "bins": [[v, c] for v, c in zip(values, counts, strict=True)],
        }


PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


class BinnedReturns(StoredReturns):
    """A model's return times as their histogram: its length is the count of values, it lists
    none of them (report.json gives the bins instead, `histogram`)."""

    def __init__(self, histogram: LogHistogram) -> None:
        super().__init__(lambda: np.empty(0, np.float64), histogram.n, lambda: [])
        self.histogram = histogram

    def pieces(self) -> Iterable[FloatArray]:
        return []


@dataclass
class DelayCounts:
    """Cuts and failing cuts per delay bin (DELAY_BINS_MS), per column."""

    inside: dict[str, np.ndarray] = field(default_factory=dict)
    failing: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, column: str, index: int, bins: int, n: int, failed: bool) -> None:
        inside = self.inside.setdefault(column, np.zeros(bins, np.int64))
        failing = self.failing.setdefault(column, np.zeros(bins, np.int64))
        inside[index] += n
        if failed:
            failing[index] += n

    @classmethod
    def summed(cls, parts: Iterable[DelayCounts]) -> DelayCounts:
        total = cls()
        for d in parts:
            for column, inside in d.inside.items():
                if column not in total.inside:
                    total.inside[column] = np.zeros_like(inside)
                    total.failing[column] = np.zeros_like(inside)
                total.inside[column] += inside
                total.failing[column] += d.failing[column]
        return total


class BinnedDelays(DelayPoints):
    """A model's delays as counts per bin: no point listed (the delay chart and report.json
    show the bins), `counts` what the analysis's delay bins are made of."""

    def __init__(self, counts: DelayCounts, lists: list[list[str]]) -> None:
        empty = np.empty(0, np.float64)
        super().__init__(empty, empty, empty, np.empty(0, np.int32), lists)
        self.counts = counts

    def chunks(self) -> Iterator[DelayPoints]:
        return iter(())
