"""Map a microcontroller's microsecond clock to the host's monotonic clock, with an error bound.

Every reply that carries an MCU timestamp `t` is a sync sample: the MCU read `t` after the request
left the host (host time `lo_ns`, taken just before the write) and before the reply arrived
(`hi_ns`, taken after the read returned), so the host instant of `t` lies in `[lo_ns, hi_ns]`.
No symmetry assumption is needed for that to hold.

An MCU instant `te` is mapped with interval arithmetic:

- **interpolation** between a sample A before `te` and a sample B after it: if the clock rate is
  constant between them, `h(te)` lies between the interpolations of their lower and of their upper
  bounds, so the bound is the weighted mean of their half round trips;
- **extrapolation** from one sample with the rate bounds `[b_min, b_max]` (ns per MCU µs) that the
  sample window itself proves (oldest tight sample vs newest tight sample), never wider than the
  nominal rate ± the oscillator tolerance;
- every candidate is widened by an allowance for a non-constant rate (`nonlinear_ppm` of the span
  bridged, plus the largest inconsistency seen between a new sample and the prediction from the
  earlier ones) and by one MCU tick of quantisation;
- the result is intersected with what causality alone proves: an instant after sample A happened
  after A's request was sent, one before sample B happened before B's reply arrived, and callers
  may add their own causal limits (an event happened before its line was received).

The narrowest candidate wins. `map()` returns the interval's midpoint and half width.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass

NEAREST = 6  # samples on each side of an instant considered as interpolation anchors


class ClockError(ValueError):
    """No mapping is possible yet (no samples), or the inputs contradict each other."""


class ClockGlitch(ClockError):
    """A sample contradicts causality against the samples already held: its MCU time is
    earlier than a sample answered before it was even requested (or the reverse). A healthy
    clock cannot do that; the sample is refused."""


@dataclass(frozen=True)
class SyncSample:
    """MCU time `mcu_us` was read at a host instant inside `[lo_ns, hi_ns]`."""

    mcu_us: int
    lo_ns: int
    hi_ns: int

    @property
    def half_ns(self) -> float:
        return (self.hi_ns - self.lo_ns) / 2


@dataclass(frozen=True)
class Mapping:
    """An MCU instant on the host clock: the true instant lies in `[lo_ns, hi_ns]`."""

    lo_ns: int
    hi_ns: int
    method: str  # "exact", "interpolated", "extrapolated", "causal"

    @property
    def host_ns(self) -> int:
        return (self.lo_ns + self.hi_ns) // 2

    @property
    def error_ns(self) -> int:
        return math.ceil((self.hi_ns - self.lo_ns) / 2)


class ClockMap:
    """One MCU clock epoch (from one reset to the next). Not thread-safe: the owner locks."""

    def __init__(
        self,
        ns_per_us: float = 1000.0,
        rate_tolerance: float = 0.005,
        nonlinear_ppm: float = 2.0,
        window_us: int = 300_000_000,
        tick_ns: int = 1000,
    ) -> None:
        self.nominal = ns_per_us
        self.tolerance = rate_tolerance
        self.nonlinear_ppm = nonlinear_ppm
        self.window_us = window_us
        self.tick_ns = tick_ns
        self._samples: list[SyncSample] = []
        self._keys: list[int] = []
        self._residuals: list[tuple[int, float]] = []  # (mcu_us, violation ns)
        self._rate: tuple[float, float] | None = None

    # ---- samples ----

    def add(self, sample: SyncSample) -> float:
        """Add a sample; return how far (ns) it lay outside the prediction from earlier samples
        (0 when consistent). A sample earlier than the newest is accepted (kept sorted)."""
        if sample.hi_ns < sample.lo_ns:
            raise ClockError("sample upper bound before its lower bound")
        self._check_causal(sample)
        violation = 0.0
        if len(self._samples) >= 2:
            try:
                predicted = self._candidate_interval(sample.mcu_us, with_residual=False)
            except ClockError:
                predicted = None
            if predicted is not None:
                lo, hi = predicted
                if sample.hi_ns < lo:
                    violation = lo - sample.hi_ns
                elif sample.lo_ns > hi:
                    violation = sample.lo_ns - hi
        if violation > 0:
            self._residuals.append((sample.mcu_us, violation))
        i = bisect.bisect_right(self._keys, sample.mcu_us)
        self._samples.insert(i, sample)
        self._keys.insert(i, sample.mcu_us)
        self._prune()
        self._rate = None
        return violation

    def _check_causal(self, sample: SyncSample) -> None:
        for other in self._samples[-NEAREST * 4 :]:
            if (other.hi_ns < sample.lo_ns and other.mcu_us > sample.mcu_us) or (
                other.lo_ns > sample.hi_ns and other.mcu_us < sample.mcu_us
            ):
                raise ClockGlitch(
                    f"MCU t={sample.mcu_us} read in [{sample.lo_ns}, {sample.hi_ns}] contradicts "
                    f"t={other.mcu_us} read in [{other.lo_ns}, {other.hi_ns}]"
                )

    def _prune(self) -> None:
        horizon = self._keys[-1] - self.window_us
        cut = bisect.bisect_left(self._keys, horizon)
        if cut > 0 and len(self._samples) - cut >= 2:
            del self._samples[:cut]
            del self._keys[:cut]
        self._residuals = [(t, v) for t, v in self._residuals if t >= horizon]

    @property
    def samples(self) -> tuple[SyncSample, ...]:
        return tuple(self._samples)

    @property
    def latest(self) -> SyncSample | None:
        return self._samples[-1] if self._samples else None

    @property
    def residual_ns(self) -> float:
        """Largest inconsistency seen in the window: how far the clock strayed from a line."""
        return max((v for _, v in self._residuals), default=0.0)

    # ---- rate ----

    def rate_bounds(self) -> tuple[float, float]:
        """Bounds on the rate (host ns per MCU µs) proven by the window, within the tolerance."""
        if self._rate is None:
            self._rate = self._compute_rate()
        return self._rate

    def _compute_rate(self) -> tuple[float, float]:
        low, high = self.nominal * (1 - self.tolerance), self.nominal * (1 + self.tolerance)
        if len(self._samples) < 2:
            return low, high
        first, last = self._keys[0], self._keys[-1]
        span = last - first
        if span <= 0:
            return low, high
        quarter = span / 4
        old = min(
            (s for s in self._samples if s.mcu_us <= first + quarter), key=lambda s: s.half_ns
        )
        new = min((s for s in self._samples if s.mcu_us >= last - quarter), key=lambda s: s.half_ns)
        dt = new.mcu_us - old.mcu_us
        if dt <= 0:
            return low, high
        slack = 2 * self.tick_ns
        proven_low = (new.lo_ns - old.hi_ns - slack) / dt
        proven_high = (new.hi_ns - old.lo_ns + slack) / dt
        lo_b, hi_b = max(low, proven_low), min(high, proven_high)
        if lo_b > hi_b:  # the samples contradict the tolerance: trust the samples
            return proven_low, proven_high
        return lo_b, hi_b

    def rate_estimate(self) -> float | None:
        """Least-squares rate (ns per µs) over the window's sample midpoints; None if < 2."""
        if len(self._samples) < 2 or self._keys[-1] == self._keys[0]:
            return None
        t0, h0 = self._samples[0].mcu_us, self._samples[0].lo_ns
        xs = [s.mcu_us - t0 for s in self._samples]
        ys = [(s.lo_ns + s.hi_ns) / 2 - h0 for s in self._samples]
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        if sxx == 0:
            return None
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx

    def drift_ppm(self) -> float | None:
        """Estimated MCU clock error against the host, in ppm (positive: MCU runs slow)."""
        rate = self.rate_estimate()
        return None if rate is None else (rate / self.nominal - 1) * 1e6

    # ---- mapping ----

    def to_mcu(self, host_ns: int) -> int | None:
        """The MCU instant expected at host instant `host_ns` (a deadline the board is to keep:
        CUTAT); None without samples. From the sample that pins it best: the smallest
        half-width plus the rate's uncertainty over the distance (a loaded host answers some
        syncs tens of ms wide, and the newest may be one of them), at the middle of the rate
        the samples prove (the nominal rate until they prove a narrower range than the
        tolerance: a least-squares rate over samples a few ms apart is off by percents). The
        edge's own mapping back says where it really fell."""
        if not self._samples:
            return None
        low, high = self.rate_bounds()
        rate, spread = (low + high) / 2, (high - low) / 2

        def middle(s: SyncSample) -> float:
            return (s.lo_ns + s.hi_ns) / 2

        best = min(
            self._samples, key=lambda s: s.half_ns + abs(host_ns - middle(s)) / rate * spread
        )
        return best.mcu_us + round((host_ns - middle(best)) / rate)

    def _allowance(self, span_us: float, with_residual: bool = True) -> float:
        extra = abs(span_us) * self.nominal * self.nonlinear_ppm * 1e-6 + self.tick_ns
        return extra + (self.residual_ns if with_residual else 0.0)

    def _candidates(
        self, te: int, with_residual: bool = True
    ) -> Iterable[tuple[float, float, str]]:
        idx_lo = bisect.bisect_right(self._keys, te)  # samples[:idx_lo] have t <= te
        idx_hi = bisect.bisect_left(self._keys, te)  # samples[idx_hi:] have t >= te
        before = self._samples[max(0, idx_lo - NEAREST) : idx_lo]
        after = self._samples[idx_hi : idx_hi + NEAREST]
        b_min, b_max = self.rate_bounds()
        for a in before:
            for b in after:
                if a.mcu_us == b.mcu_us:
                    pad = self.tick_ns + (self.residual_ns if with_residual else 0.0)
                    yield a.lo_ns - pad, a.hi_ns + pad, "exact"
                    continue
                w = (te - a.mcu_us) / (b.mcu_us - a.mcu_us)
                lo = (1 - w) * a.lo_ns + w * b.lo_ns
                hi = (1 - w) * a.hi_ns + w * b.hi_ns
                pad = self._allowance(b.mcu_us - a.mcu_us, with_residual)
                yield lo - pad, hi + pad, "interpolated"
        for a in before:
            dt = te - a.mcu_us
            pad = self._allowance(dt, with_residual)
            yield a.lo_ns + b_min * dt - pad, a.hi_ns + b_max * dt + pad, "extrapolated"
        for b in after:
            dt = b.mcu_us - te
            pad = self._allowance(dt, with_residual)
            yield b.lo_ns - b_max * dt - pad, b.hi_ns - b_min * dt + pad, "extrapolated"

    def _candidate_interval(self, te: int, with_residual: bool) -> tuple[float, float]:
        best = min(self._candidates(te, with_residual), key=lambda c: c[1] - c[0], default=None)
        if best is None:
            raise ClockError("no sync samples")
        return best[0], best[1]

    def map(
        self, mcu_us: int, not_before_ns: int | None = None, not_after_ns: int | None = None
    ) -> Mapping:
        """Map an MCU instant to the host clock. `not_before_ns`/`not_after_ns` are causal limits
        the caller knows (e.g. the host time an event line was received)."""
        if not self._samples:
            raise ClockError("no sync samples")
        best = min(self._candidates(mcu_us), key=lambda c: c[1] - c[0])
        lo, hi, method = best
        # Causality: after the last sample at or before te was requested, before the first
        # sample at or after te was answered, and the caller's own limits.
        idx_lo = bisect.bisect_right(self._keys, mcu_us)
        idx_hi = bisect.bisect_left(self._keys, mcu_us)
        n = len(self._samples)
        c_lo = self._samples[idx_lo - 1].lo_ns - self.tick_ns if idx_lo > 0 else -math.inf
        c_hi = self._samples[idx_hi].hi_ns + self.tick_ns if idx_hi < n else math.inf
        if not_before_ns is not None:
            c_lo = max(c_lo, not_before_ns)
        if not_after_ns is not None:
            c_hi = min(c_hi, not_after_ns)
        if c_lo > c_hi:
            near = self._samples[max(0, idx_lo - 2) : idx_hi + 2]
            raise ClockError(
                f"causal limits contradict each other at MCU t={mcu_us}: not before {c_lo}, "
                f"not after {c_hi} (caller: {not_before_ns}..{not_after_ns}); samples {near}"
            )
        new_lo, new_hi = max(lo, c_lo), min(hi, c_hi)
        if new_lo > new_hi:
            # The linear model disagrees with causality: the rate was not constant. Causality
            # alone still holds; record the disagreement so later bounds widen.
            gap = new_lo - new_hi
            self._residuals.append((mcu_us, gap))
            if math.isinf(c_lo) or math.isinf(c_hi):
                new_lo, new_hi = lo - gap, hi + gap
            else:
                new_lo, new_hi = c_lo, c_hi
            method = "causal"
        return Mapping(math.floor(new_lo), math.ceil(new_hi), method)
