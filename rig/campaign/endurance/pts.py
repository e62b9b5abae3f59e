"""Steady state after the SNIA Solid State Storage Performance Test Specification (PTS).

Pure bookkeeping, no I/O: the endurance loop (campaign/endurance/endurance.py) feeds one `Round` per
measured write interval after preconditioning; `SteadyState` says whether the drive has reached
steady state, is still being tracked, or has not reached it within `max_rounds`.

The rule, per tracking variable (IOPS, MB/s and mean latency), over the measurement window (the
last `window` rounds, PTS: 5):
- range: max - min within 20% of the window's average;
- slope: the least-squares line's excursion across the window, |slope| x (window - 1), within
  10% of the window's average.
Steady state is reached at the first round that completes a window in which every tracking
variable meets both; never before the window is full, never after `max_rounds` (then "not
reached" is final: a later flat window is not a claim the PTS allows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

RANGE_LIMIT = 0.20  # max - min within 20% of the window's average
SLOPE_LIMIT = 0.10  # least-squares excursion across the window within 10% of it
WINDOW = 5  # PTS measurement window, in rounds
MAX_ROUNDS = 25  # PTS: rounds after which steady state is "not reached"
TRACKED = ("iops", "mb_per_s", "mean_latency_us")

# a round's verdict
FILLING = "filling"  # fewer rounds than the window
TRACKING = "tracking"  # window full, rule not met yet, rounds left
REACHED = "reached"
NOT_REACHED = "not reached"


@dataclass(frozen=True)
class Round:
    """One measured round: the tracking variables of one write interval."""

    number: int  # 1-based, counted from the first round after preconditioning
    iops: float
    mb_per_s: float
    mean_latency_us: float

    def value(self, variable: str) -> float:
        return float(getattr(self, variable))


@dataclass(frozen=True)
class SteadyStateCheck:
    """One tracking variable over one measurement window."""

    variable: str
    average: float
    low: float
    high: float
    slope: float  # per round, least squares
    intercept: float  # the fitted line's value at the window's first round
    range_ok: bool
    slope_ok: bool
    span: int  # rounds the line moves across: window - 1

    @property
    def ok(self) -> bool:
        return self.range_ok and self.slope_ok

    @property
    def excursion(self) -> float:
        """How far the fitted line moves across the window, as a share of the average."""
        return 0.0 if self.average <= 0 else abs(self.slope) * self.span / self.average

    @property
    def range_share(self) -> float:
        return 0.0 if self.average <= 0 else (self.high - self.low) / self.average


def check_steady_state(values: list[float], variable: str = "value") -> SteadyStateCheck:
    """The PTS range and slope rule over `values` (the whole measurement window, >= 2 rounds).
    A window whose average is not positive never passes (nothing was measured)."""
    if len(values) < 2:
        raise ValueError("a measurement window needs at least 2 rounds")
    y = np.asarray(values, dtype=float)
    average = float(y.mean())
    x = np.arange(len(y), dtype=float)
    slope, intercept = (float(v) for v in np.polyfit(x, y, 1))
    span = len(y) - 1
    positive = average > 0
    return SteadyStateCheck(
        variable,
        average,
        float(y.min()),
        float(y.max()),
        slope,
        intercept,
        range_ok=positive and float(y.max() - y.min()) <= RANGE_LIMIT * average,
        slope_ok=positive and abs(slope) * span <= SLOPE_LIMIT * average,
        span=span,
    )


@dataclass
class SteadyState:
    """Round bookkeeping for one drive: feed rounds in order, read the verdict."""

    window: int = WINDOW
    max_rounds: int = MAX_ROUNDS  # 0: no limit
    rounds: list[Round] = field(default_factory=list)
    reached_at: int | None = None  # the round that completed the steady window
    checks: tuple[SteadyStateCheck, ...] = ()  # the window's checks at reached_at (or the last one)

    def __post_init__(self) -> None:
        if self.window < 2:
            raise ValueError("the measurement window needs at least 2 rounds")
        if self.max_rounds and self.max_rounds < self.window:
            raise ValueError("max_rounds must be at least the measurement window")

    @property
    def verdict(self) -> str:
        if self.reached_at is not None:
            return REACHED
        n = len(self.rounds)
        if self.max_rounds and n >= self.max_rounds:
            return NOT_REACHED
        return FILLING if n < self.window else TRACKING

    @property
    def steady(self) -> bool:
        return self.reached_at is not None

    def steady_state_rounds(self) -> list[Round]:
        """The measurement window: the steady one once reached, else the latest."""
        end = self.reached_at if self.reached_at is not None else len(self.rounds)
        return self.rounds[max(0, end - self.window) : end]

    def add(self, round_: Round) -> str:
        """Record the next round; returns the verdict after it."""
        if round_.number != len(self.rounds) + 1:
            raise ValueError(
                f"round {round_.number} out of order (expected {len(self.rounds) + 1})"
            )
        if self.verdict in (REACHED, NOT_REACHED):
            self.rounds.append(round_)  # kept for the record; the verdict is final
            return self.verdict
        self.rounds.append(round_)
        if len(self.rounds) >= self.window:
            window = self.rounds[-self.window :]
            self.checks = tuple(
                check_steady_state([r.value(v) for r in window], v) for v in TRACKED
            )
            if all(c.ok for c in self.checks):
                self.reached_at = round_.number
        return self.verdict
