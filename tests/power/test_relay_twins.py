"""The production driver against both firmware twins: the host build behind a pty and the real
AVR image in simavr (parametrised by the `twin` fixture).

Ground truth is the twin's pin log: `mono_ns` is CLOCK_MONOTONIC when the pin was written, the
clock of `time.monotonic_ns()`. The driver's `Edge.host_ns` must lie within `error_ns` of it, plus
a documented slack for how the twins log:
- host build: the pin line's `mono_ns` is taken as the pin is written; the core reads its clock
  for the edge a few µs later (after the log line is printed);
- simavr: simulated time may run up to 200 µs ahead of the wall clock (the bridge's throttle), so
  `mono_ns` of a pin write can be up to that much early against the MCU's own view; and on a
  loaded host the simulator stalls, so simulated MCU time stops tracking host time (no clock
  mapping can follow a clock that stops): the bridge reports its lag behind the wall clock, and
  its spread around the edge (`Twin.stall_us`) is added to the slack.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rig.errors import PowerError
from rig.power.base import Edge, PowerSwitch, RailResult
from rig.power.relay import BoardEdge, BoardResetError, RelayBoard, ResetInfo
from tests.power.raw_session import raw_session
from tests.power.twins import Pin, Twin

SLACK_NS = {"host": 50_000, "simavr": 300_000}
LAG_REPORT_US = 1000
# Long enough that the heartbeats (a quarter of it apart) survive the shared test machine's load.
WATCHDOG_MS = 1000
# The host build is a Linux process: on a loaded machine it wakes late (never early).
LATE_NS = {
    "host": 500_000_000,
    "simavr": 0,
}  # the bridge reports its lag when it changed by this much
# Sanity: the bound stays useful (plus what the sync round trips themselves allow, see below).
MAX_ERROR_NS = {"host": 1_000_000, "simavr": 20_000_000}


@pytest.fixture
def edges() -> list[Edge]:
    return []


@pytest.fixture
def board(twin: Twin, edges: list[Edge]) -> Iterator[RelayBoard]:
    driver = RelayBoard(twin.pty, on_edge=edges.append)
    try:
        yield driver
        # None of these tests resets the board or goes silent: a trip, a reset or a clock
        # step back here is a firmware or clock fault, not the test's: the board's clock never
        # steps back (docs/decisions.md, "The firmware core is split as Klipper's, with an
        # explicit command table").
        stats = driver.stats
        assert (stats.watchdog_trips, stats.resets, stats.clock_glitches) == (0, 0, 0), stats
    finally:
        driver.close()


def _slack_ns(twin: Twin, around_ns: int) -> int:
    """How the twin logs, plus (simavr) how much the simulator stalled around that time: the
    sync samples the mapping rests on are at most a sync interval (2 s) away."""
    return _slack_over(twin, around_ns - 2_500_000_000, around_ns + 500_000_000)


def _slack_over(twin: Twin, from_ns: int, to_ns: int) -> int:
    """`_slack_ns` for a mapping whose samples lie anywhere in [from_ns, to_ns]."""
    if twin.kind != "simavr":
        return SLACK_NS[twin.kind]
    return SLACK_NS[twin.kind] + 1000 * (twin.stall_us(from_ns, to_ns) + LAG_REPORT_US)


def _useful_ns(twin: Twin, board: RelayBoard, around_ns: int) -> float:
    """The widest bound a mapping near `around_ns` may have and still be useful: the twin's
    figure, plus what its sync samples prove no mapping can beat on this machine right now (a
    loaded host or a stalled simulator makes every round trip, hence every bound, longer)."""
    report = board.clock_report()
    worst_half_rtt = report["worst_half_rtt_ns"] or 0.0
    residual = report["residual_ns"] or 0.0
    return MAX_ERROR_NS[twin.kind] + 2 * _slack_ns(twin, around_ns) + worst_half_rtt + residual


def _check_edge(twin: Twin, board: RelayBoard, edge: Edge, pin: Pin) -> None:
    assert (edge.channel, edge.powered) == (pin.channel, pin.on)
    slack = _slack_ns(twin, pin.mono_ns)
    assert abs(edge.host_ns - pin.mono_ns) <= edge.error_ns + slack, (edge, pin, slack)
    assert edge.error_ns < _useful_ns(twin, board, pin.mono_ns), (edge, board.clock_report())


def test_identify(twin: Twin, board: RelayBoard) -> None:
    ident = board.identity
    assert ident.proto == 3
    assert ident.firmware == "0.3.0"
    assert ident.channels == board.channels == 4
    assert ident.board == ("host" if twin.kind == "host" else "nano328p")
    assert ident.clock_hz == (1_000_000_000 if twin.kind == "host" else 16_000_000)
    assert ident.watchdog_trips == 0
    switch: PowerSwitch = board  # the campaign's interface
    assert switch.state(0) is True
    states = board.states()
    assert states.on == states.safe == (True,) * 4 and states.pending == (0,) * 4


@pytest.mark.parametrize("delay_s", [0.0001, 0.001, 0.01, 0.1, 1.0])
def test_cut_edge_at_delay_maps_to_host_clock(
    twin: Twin, board: RelayBoard, edges: list[Edge], delay_s: float
) -> None:
    since = time.monotonic_ns()
    before = time.monotonic_ns()
    pending = board.cut(0, delay_s)
    after = time.monotonic_ns()
    edge = pending.wait(delay_s + 5)
    assert isinstance(edge, BoardEdge) and edge.why == "cut" and not edge.powered
    # Predicted from when the command went out: the board accepted it inside [before, after]
    # and fires delay_s later on its clock (rate within the resonator's 0.5 %).
    slack = _slack_ns(twin, after + int(delay_s * 1e9))
    lo = before + delay_s * 1e9 * 0.995 - slack
    hi = after + delay_s * 1e9 * 1.005 + slack + LATE_NS[twin.kind]
    assert edge.host_ns + edge.error_ns >= lo and edge.host_ns - edge.error_ns <= hi, (
        edge,
        before,
        after,
    )
    pins = twin.wait_pins(1, since)
    _check_edge(twin, board, edge, pins[0])
    board.on(0)
    assert edge in edges


def test_every_edge_reaches_on_edge(twin: Twin, board: RelayBoard, edges: list[Edge]) -> None:
    since = time.monotonic_ns()
    board.off(1)
    board.on(1)
    board.on(1)  # no edge: already on
    cut = board.cut(0, 0.002, 0.003)
    cut.wait(2)
    cut.wait_restore(2)
    board.glitch(3, 0.0002).wait_restore(2)
    board.cut(2, 0.001).wait(2)
    board.on(2)
    pins = twin.wait_pins(8, since)
    time.sleep(0.1)  # let any stray edge arrive
    pins = twin.pins_since(since)
    assert len(pins) == 8
    got = [e for e in edges if e.host_ns >= since - 10**7]
    for channel in range(4):
        ch_pins = [p for p in pins if p.channel == channel]
        ch_edges = [e for e in got if e.channel == channel]
        assert len(ch_pins) == len(ch_edges), (channel, ch_pins, ch_edges)
        for edge, pin in zip(ch_edges, ch_pins, strict=True):
            _check_edge(twin, board, edge, pin)
    whys = sorted(e.why for e in got if isinstance(e, BoardEdge))
    assert whys == sorted(["set", "set", "cut", "restore", "cut", "restore", "cut", "set"])


def test_mcu_reset_mid_run_resynchronises_without_switching(twin: Twin) -> None:
    edges: list[Edge] = []
    resets: list[ResetInfo] = []
    board = RelayBoard(twin.pty, on_edge=edges.append, on_reset=resets.append)
    try:
        board.off(2)  # asked: channel 2 off (its safe state is on)
        lost = board.cut(0, 5.0)  # scheduled, then lost with the reset
        asked_ns = twin.reset()
        deadline = time.monotonic() + 5
        while not resets and time.monotonic() < deadline:
            time.sleep(0.01)
        assert resets, "driver did not notice the reset"
        with pytest.raises(BoardResetError):
            lost.wait(2)
        info = resets[0]
        assert info.cuts_lost == (0,)
        assert info.states.on == (True,) * 4 and info.states.pending == (0,) * 4
        # The reset (not the driver) put channel 2 back to its safe state; reported as an edge.
        assert [(e.channel, e.powered, e.why) for e in info.boot_edges] == [(2, True, "boot")]
        boot_edge = info.boot_edges[0]
        assert boot_edge in edges
        slack = _slack_ns(twin, asked_ns)
        assert boot_edge.host_ns - boot_edge.error_ns <= twin.resets[0] + slack
        assert boot_edge.host_ns + boot_edge.error_ns >= asked_ns - slack
        # After the resync nothing switches unless asked.
        settled = time.monotonic_ns()
        time.sleep(0.5)
        assert twin.pins_since(settled) == []
        # The pins the reset itself moved all ended in the safe state.
        final = {p.channel: p.on for p in twin.pins_since(asked_ns)}
        assert all(final.values())
        # The driver works in the new clock epoch.
        edge = board.cut(1, 0.01, 0.001).wait(2)
        assert isinstance(edge, BoardEdge) and edge.epoch == boot_edge.epoch
        assert edge.error_ns < _useful_ns(twin, board, time.monotonic_ns()), board.clock_report()
        assert board.stats.resets == 1
    finally:
        board.close()


def test_edges_after_a_reset_match_the_pins(twin: Twin) -> None:
    resets: list[ResetInfo] = []
    board = RelayBoard(twin.pty, on_reset=resets.append)
    try:
        twin.reset()
        deadline = time.monotonic() + 5
        while not resets and time.monotonic() < deadline:
            time.sleep(0.01)
        assert resets
        since = time.monotonic_ns()
        edge = board.cut(1, 0.01, 0.001).wait(2)
        pins = twin.wait_pins(1, since, timeout_s=1)
        assert pins, "no pin edge logged"
        _check_edge(twin, board, edge, pins[0])
    finally:
        board.close()


def test_watchdog_takes_over_when_the_driver_stops(twin: Twin) -> None:
    board = RelayBoard(twin.pty, watchdog_ms=WATCHDOG_MS)
    try:
        board.off(1)
        idle_from = time.monotonic_ns()
        time.sleep(3 * WATCHDOG_MS / 1000)  # three watchdog periods: the heartbeat keeps it fed
        assert twin.pins_since(idle_from) == []
        assert board.stats.watchdog_trips == 0
        closing = time.monotonic_ns()
    finally:
        board.close()  # no safe(): the host "dies"
    # The latest heartbeat answered, on the MCU clock (its t was read after it arrived), and
    # the last request written, on the host clock (its reply may have been lost to close()).
    answered_us = board.clock_report()["latest_mcu_us"]
    assert answered_us is not None
    pins = twin.wait_pins(1, idle_from, timeout_s=6)
    assert [(p.channel, p.on) for p in pins] == [(1, True)]
    # Not before the watchdog time of silence, on the firmware's own clock ...
    assert pins[0].clk_us - answered_us >= WATCHDOG_MS * 1000 - 1000, (pins[0], answered_us)
    # ... and soon after it, on the host clock (the host build may notice late on a loaded
    # machine; a stalled simulator sees the silence late).
    silent_ns = pins[0].mono_ns - board.last_request_ns
    assert (
        silent_ns <= WATCHDOG_MS * 10**6 + 5_000_000 + _slack_ns(twin, closing) + LATE_NS[twin.kind]
    )
    again = RelayBoard(twin.pty)
    try:
        assert again.identity.watchdog_trips >= 1
        assert again.states().on == (True,) * 4
    finally:
        again.close()


def test_safe_cancels_cuts_and_restores(twin: Twin, board: RelayBoard) -> None:
    board.off(0)
    pending = board.cut(1, 3.0)
    board.safe()
    states = board.states()
    assert states.on == (True,) * 4 and states.pending == (0,) * 4
    with pytest.raises(PowerError, match="cancelled by SET 1 1 before"):
        pending.wait(1)


def test_rail_sense_reports_the_fall(twin: Twin, edges: list[Edge]) -> None:
    rails: list[RailResult] = []
    board = RelayBoard(twin.pty, on_edge=edges.append, on_rail=rails.append)
    try:
        board.configure_rail(2, 600, 100, 50, 8)
        assert 700 <= board.adc(2) <= 1023
        cut = board.cut(2, 0.001)
        result = cut.wait_rail(3)
        assert result.end == "fell"
        assert result.hi_us is not None and result.lo_us is not None
        assert 0 <= result.hi_us < result.lo_us
        assert len(result.samples) == 8 and result.dt_us is not None
        assert result.edge_us == cut.wait(0).source_us
        assert rails == [result]
        board.on(2)
    finally:
        board.close()


def test_a_reset_while_standing_aside_is_resynchronised_once(twin: Twin) -> None:
    """The board resets while the driver stands aside (a raw session) for longer than a
    heartbeat period, so a heartbeat is queued for the line: the driver books the BOOT before
    that heartbeat may go out, resynchronises once, and bounds the reset's edge correctly."""
    edges: list[Edge] = []
    # Heartbeats every 100 ms; the reset at once gives the fresh board its default 5 s watchdog.
    board = RelayBoard(twin.pty, on_edge=edges.append, watchdog_ms=400)
    try:
        board.off(2)
        with raw_session(board) as raw:
            asked_ns = twin.reset()
            boot = raw.read_line(3.0)
            assert " BOOT " in boot, boot
            time.sleep(0.3)  # a heartbeat waits for the line
        done_ns = time.monotonic_ns()
        assert [r.reason for r in board.resets] == ["boot event"]
        assert board.stats.resets == 1
        boot_edges = board.resets[0].boot_edges
        assert [(e.channel, e.powered, e.why) for e in boot_edges] == [(2, True, "boot")]
        # The new epoch's clock is sampled only after the session: a simulator that stalled
        # and caught up meanwhile bends the mapping of BOOT's t by that much.
        slack = _slack_over(twin, asked_ns - 2_500_000_000, done_ns + 500_000_000)
        assert boot_edges[0].host_ns - boot_edges[0].error_ns <= twin.resets[0] + slack
        assert boot_edges[0].host_ns + boot_edges[0].error_ns >= asked_ns - slack
        assert board.states().on == (True,) * 4
    finally:
        board.close()


@pytest.mark.parametrize("delay_s", [0.0005, 0.005])
def test_a_prepared_cut_falls_its_delay_after_the_event_it_is_fired_with(
    twin: Twin, board: RelayBoard, delay_s: float
) -> None:
    """The SYNC goes at `prepare_cut`; the wire stays free until the event (other requests
    go on); `fire` maps the event's instant plus the delay to the board's clock."""
    since = time.monotonic_ns()
    prepared = board.prepare_cut(0, delay_s)
    assert prepared is not None
    assert board.states().on[0]  # the wire is not held while the event is awaited
    time.sleep(0.05)
    event_ns = time.monotonic_ns()
    prepared.fire(event_ns)
    edge = prepared.settle().wait(delay_s + 5)
    pins = twin.wait_pins(1, since)
    _check_edge(twin, board, edge, pins[0])
    planned = event_ns + delay_s * 1e9
    slack = _slack_ns(twin, pins[0].mono_ns)
    assert planned - slack <= pins[0].mono_ns <= planned + slack + LATE_NS[twin.kind], (
        pins[0],
        planned,
    )
    board.on(0)


def test_a_prepared_cut_never_fired_cuts_nothing(twin: Twin, board: RelayBoard) -> None:
    since = time.monotonic_ns()
    prepared = board.prepare_cut(1, 0.001)
    assert prepared is not None
    prepared.cancel()
    time.sleep(0.05)
    assert board.states().on[1] and board.states().pending[1] == 0
    assert twin.pins_since(since) == []
    edge = board.cut(1, 0.001).wait(5)  # the channel and the wire are as before
    assert not edge.powered
    board.on(1)
