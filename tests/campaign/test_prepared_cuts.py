"""A cut made ready before its event (rig/campaign/cutcycle/cuts.py `EventCut` with a relay
board's prepared CUTAT) on the firmware's host build through the production driver: fired by
the event, it falls its delay after it; never fired, it is given up and the board's wire is
free for the cut that replaces it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from rig.campaign.cutcycle.cuts import CutDraw, EventCut, prepare
from rig.power.relay import RelayBoard
from rig.power.shapes import OFF, ShapedCuts
from tests.power.twins import HOST_BINARY, Twin

pytestmark = pytest.mark.skipif(not HOST_BINARY.exists(), reason="firmware host build missing")
SLACK_NS = 1_000_000  # the host build's pin stamp and the mapping's bound, on a loaded host


@pytest.fixture
def board() -> Iterator[tuple[Twin, RelayBoard]]:
    twin = Twin("host")
    try:
        driver = RelayBoard(twin.pty)
        try:
            yield twin, driver
        finally:
            driver.close()
    finally:
        twin.stop()


def test_a_prepared_uniform_cut_falls_its_delay_after_the_first_write(
    board: tuple[Twin, RelayBoard],
) -> None:
    twin, driver = board
    power = ShapedCuts(driver, OFF)
    cut = CutDraw(0.0, 0.002)
    prepared = prepare(power, 0, cut.delay_s)
    assert prepared is not None
    event = EventCut(power, 0, cut, prepared)
    since = time.monotonic_ns()
    time.sleep(0.02)  # the writer starts a while after the cut was made ready
    issue_ns = time.monotonic_ns()
    event(issue_ns)  # the first write, stamped
    pending, detail = event.result(threading.Event(), 5.0, power, 0, {})
    assert detail["armed_in"] == "prepared" and detail["trigger_ns"] == issue_ns
    pending.wait(5.0)
    pin = twin.wait_pins(1, since)[0]
    assert not pin.on
    assert abs(pin.mono_ns - (issue_ns + 2_000_000)) <= SLACK_NS, (pin, issue_ns)


def test_a_prepared_cut_whose_first_write_never_came_frees_the_wire(
    board: tuple[Twin, RelayBoard],
) -> None:
    twin, driver = board
    power = ShapedCuts(driver, OFF)
    cut = CutDraw(0.0, 0.001)
    event = EventCut(power, 1, cut, prepare(power, 1, cut.delay_s))
    stop = threading.Event()
    stop.set()  # the cycle stopped before the writer wrote anything
    since = time.monotonic_ns()
    pending, detail = event.result(stop, 5.0, power, 1, {})
    assert detail["trigger"] == "stopped" and "armed_in" not in detail
    edge = pending.wait(5.0)  # the fallback cut got the wire
    assert not edge.powered and len(twin.wait_pins(1, since)) == 1
    event(time.monotonic_ns())  # a first write after that sends nothing more
    time.sleep(0.05)
    assert len(twin.pins_since(since)) == 1
    assert driver.states().on[1] is False
