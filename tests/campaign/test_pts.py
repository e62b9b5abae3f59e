"""The PTS steady-state rule and round bookkeeping (rig/campaign/endurance/pts.py)."""

from __future__ import annotations

import pytest

from rig.campaign.endurance import pts


def _round(n: int, iops: float, mb: float | None = None, lat: float | None = None) -> pts.Round:
    return pts.Round(n, iops, iops / 10 if mb is None else mb, 1e6 / iops if lat is None else lat)


def _feed(state: pts.SteadyState, series: list[float]) -> list[str]:
    return [state.add(_round(len(state.rounds) + 1, v)) for v in series]


def test_reached_exactly_when_the_window_fills_and_not_before() -> None:
    state = pts.SteadyState(window=5, max_rounds=25)
    verdicts = _feed(state, [1000, 1001, 999, 1000, 1000])
    assert verdicts == [pts.FILLING] * 4 + [pts.REACHED]
    assert state.reached_at == 5
    assert [r.number for r in state.steady_state_rounds()] == [1, 2, 3, 4, 5]
    assert all(c.ok for c in state.checks) and len(state.checks) == len(pts.TRACKED)


def test_reached_after_the_drive_settles_with_the_window_that_made_it() -> None:
    state = pts.SteadyState(window=5, max_rounds=25)
    verdicts = _feed(state, [5000, 3000, 1000, 1000, 1010, 990, 1000, 1000])
    assert verdicts[:4] == [pts.FILLING] * 4
    assert verdicts[4:6] == [pts.TRACKING] * 2  # windows still holding 5000 or 3000
    assert verdicts[6] == pts.REACHED and state.reached_at == 7
    assert [r.number for r in state.steady_state_rounds()] == [3, 4, 5, 6, 7]


def test_range_violation_is_not_steady() -> None:
    # no trend (the line is flat) but max - min = 30 % of the average
    check = pts.check_steady_state([100, 130, 100, 130, 100, 130, 100][:5])
    assert not check.range_ok
    state = pts.SteadyState(window=5, max_rounds=25)
    assert _feed(state, [100, 130, 100, 130, 100])[-1] == pts.TRACKING


def test_slope_violation_within_the_range_is_not_steady() -> None:
    # range 16 % (< 20 %) but the fitted line moves 16 % (> 10 %) across the window
    series = [108.0, 104.0, 100.0, 96.0, 92.0]
    check = pts.check_steady_state(series)
    assert check.range_ok and not check.slope_ok
    assert check.excursion == pytest.approx(0.16)
    state = pts.SteadyState(window=5, max_rounds=25)
    assert _feed(state, series)[-1] == pts.TRACKING


def test_each_tracking_variable_counts() -> None:
    """Flat IOPS and MB/s but a latency that climbs: not steady."""
    state = pts.SteadyState(window=5, max_rounds=25)
    for n, lat in enumerate([100, 110, 120, 130, 140], start=1):
        verdict = state.add(pts.Round(n, 1000, 100, lat))
    assert verdict == pts.TRACKING
    failing = [c.variable for c in state.checks if not c.ok]
    assert failing == ["mean_latency_us"]


def test_max_rounds_reports_not_reached_and_never_claims_it_later() -> None:
    state = pts.SteadyState(window=5, max_rounds=7)
    verdicts = _feed(state, [100, 200, 100, 200, 100, 200, 100])
    assert verdicts[-1] == pts.NOT_REACHED and not state.steady
    # a flat window after the limit is not a claim
    later = _feed(state, [100, 100, 100, 100, 100])
    assert later == [pts.NOT_REACHED] * 5 and state.reached_at is None


def test_reached_stays_reached_with_its_window() -> None:
    state = pts.SteadyState(window=5, max_rounds=25)
    _feed(state, [100] * 5 + [10, 500])
    assert state.verdict == pts.REACHED and state.reached_at == 5
    assert [r.number for r in state.steady_state_rounds()] == [1, 2, 3, 4, 5]


def test_zero_average_never_passes() -> None:
    check = pts.check_steady_state([0, 0, 0, 0, 0])
    assert not check.ok


def test_bad_bookkeeping_is_refused() -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        pts.SteadyState(window=5, max_rounds=4)
    state = pts.SteadyState()
    with pytest.raises(ValueError, match="out of order"):
        state.add(_round(2, 100))
    with pytest.raises(ValueError):
        pts.check_steady_state([1.0])


def test_window_check_fits_the_line() -> None:
    check = pts.check_steady_state([10, 12, 14, 16, 18])
    assert check.slope == pytest.approx(2.0) and check.intercept == pytest.approx(10.0)
    assert check.average == pytest.approx(14.0)
    assert check.range_share == pytest.approx(8 / 14)
