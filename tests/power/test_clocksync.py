"""The clock mapping's bound holds for any constant-rate clock within tolerance (property test
against a synthetic true clock) and causality is enforced."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rig.power.clocksync import ClockError, ClockGlitch, ClockMap, SyncSample


def _simulate(
    rng: random.Random, ppm: float, offset_ns: int, syncs: int, spacing_us: int
) -> tuple[ClockMap, float]:
    """A true clock h(t) = offset + t * 1000 * (1 + ppm); syncs with random asymmetric delays."""
    rate = 1000.0 * (1 + ppm * 1e-6)
    clock = ClockMap(rate_tolerance=0.005, nonlinear_ppm=0.0)
    t = 1000
    for _ in range(syncs):
        t += rng.randint(spacing_us // 2, spacing_us)
        true_ns = offset_ns + t * rate
        up = rng.randint(20_000, 2_000_000)  # request travel, ns
        down = rng.randint(20_000, 2_000_000)
        clock.add(SyncSample(t, int(true_ns - up), int(true_ns + down)))
    return clock, rate


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    ppm=st.floats(-4000, 4000),
    syncs=st.integers(1, 30),
    spacing_us=st.integers(1_000, 3_000_000),
)
def test_bound_contains_the_true_instant(
    seed: int, ppm: float, syncs: int, spacing_us: int
) -> None:
    rng = random.Random(seed)
    offset = rng.randint(10**9, 10**12)
    clock, rate = _simulate(rng, ppm, offset, syncs, spacing_us)
    first, last = clock.samples[0].mcu_us, clock.samples[-1].mcu_us
    for _ in range(20):
        te = rng.randint(max(0, first - 2_000_000), last + 2_000_000)
        true_ns = offset + te * rate
        m = clock.map(te)
        assert m.lo_ns - 1 <= true_ns <= m.hi_ns + 1, (te, m, true_ns)


def test_interpolation_is_as_tight_as_the_round_trips() -> None:
    clock = ClockMap()
    clock.add(SyncSample(1_000_000, 1_000_000_000, 1_000_100_000))  # 100 µs round trip
    clock.add(SyncSample(2_000_000, 2_000_000_000, 2_000_100_000))
    m = clock.map(1_500_000)
    assert m.method == "interpolated"
    assert m.error_ns <= 50_000 + 1_000 + 2_000  # half round trip + tick + 2 ppm of 1 s


def test_extrapolation_grows_with_distance() -> None:
    clock = ClockMap()
    clock.add(SyncSample(1_000_000, 1_000_000_000, 1_000_100_000))
    near = clock.map(1_001_000).error_ns
    far = clock.map(2_000_000).error_ns
    assert near < far
    assert far >= 0.005 * 1e9  # one second at the 0.5 % tolerance


def test_causal_limits_bound_the_result() -> None:
    clock = ClockMap()
    clock.add(SyncSample(1_000_000, 1_000_000_000, 1_000_100_000))
    m = clock.map(2_000_000, not_after_ns=2_000_010_000)
    assert m.hi_ns <= 2_000_010_000


def test_impossible_sample_is_refused() -> None:
    clock = ClockMap()
    clock.add(SyncSample(1_000_000, 1_000_000_000, 1_000_100_000))
    with pytest.raises(ClockGlitch):  # answered later, yet reads an earlier MCU time
        clock.add(SyncSample(967_232, 1_040_000_000, 1_040_100_000))
    assert len(clock.samples) == 1


def test_no_samples_no_mapping() -> None:
    with pytest.raises(ClockError):
        ClockMap().map(5)


def test_a_deadline_is_placed_by_the_sample_that_pins_it_best() -> None:
    """CUTAT's deadline on the MCU clock: from the narrowest sample (a loaded host answers some
    syncs tens of ms wide, the newest among them), not from the newest; the rate the samples
    prove, not a least-squares fit over a few ms."""
    clock = ClockMap()
    assert clock.to_mcu(10**9) is None
    offset_ns = 5_000_000_000  # host ns at MCU 0; the MCU runs at the nominal rate
    truth = lambda mcu_us: offset_ns + mcu_us * 1000  # noqa: E731
    clock.add(SyncSample(1_000, truth(1_000) - 20_000, truth(1_000) + 20_000))  # +-20 us
    clock.add(SyncSample(9_000, truth(9_000) - 50, truth(9_000) + 28_000_000))  # 28 ms wide
    deadline = truth(9_000) + 5_000_000  # 5 ms after the newest sample
    got = clock.to_mcu(deadline)
    assert got is not None
    assert abs(got - 14_000) <= 30  # the narrow one: within its 20 us (the wide one: 14 ms off)
