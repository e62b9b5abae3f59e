"""The run-on window of a cut (rig/campaign/cutcycle/runon.py): [cut] hold_up_ms, lengthened
where the switch measured the rail still up for longer; never shortened by the rail."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rig.campaign.cutcycle import runon
from rig.power.base import RailResult

FELL = RailResult(
    channel=0, edge_us=1000, host_ns=5, error_ns=10, v0=819, hi_us=1200, lo_us=14_000,
    minimum=3, end="fell", hi_threshold=600, lo_threshold=4, window_ms=40,
)  # fmt: skip


def test_without_a_measurement_the_window_is_hold_up_ms() -> None:
    assert runon.run_on(10, None).ns == 10_000_000
    assert "hold_up_ms = 10" in runon.run_on(10, None).basis
    # another channel's capture was running: nothing measured
    assert runon.run_on(10, replace(FELL, end="busy", hi_us=None, lo_us=None)).ns == 10_000_000


def test_a_rail_that_fell_later_than_hold_up_ms_lengthens_the_window() -> None:
    run_on = runon.run_on(10, FELL)  # below lo (4 counts) 14 ms after the edge
    assert run_on.ns == 14_000_000 and "rail fell 14 ms after the edge" in run_on.basis


def test_the_end_threshold_is_hi_where_lo_is_not_used() -> None:
    assert runon.run_on(0, replace(FELL, lo_threshold=0, lo_us=None)).ns == 1_200_000


def test_a_rail_that_fell_sooner_never_shortens_it() -> None:
    # sensed at the connector: the drive may run on capacitance of its own behind it
    assert runon.run_on(10, replace(FELL, lo_us=3000)).ns == 10_000_000


@pytest.mark.parametrize("end", ["timeout", "on"])
def test_a_rail_still_up_when_the_capture_ended_gives_its_whole_window(end: str) -> None:
    run_on = runon.run_on(10, replace(FELL, end=end, lo_us=None))
    assert run_on.ns == 40_000_000 and f"still up 40 ms after the edge ({end})" in run_on.basis
