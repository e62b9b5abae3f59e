"""Cut timing, host-silence watchdog, and that noise or an MCU reset never switches a channel
nobody asked to switch: the real firmware (AVR image in simavr, and the host build) through the
production driver, with the twin's own pin log as ground truth. Times on the MCU clock come from
the pin log's `clk_us`: the firmware's clock read by the simulator at the cycle the pin changed,
independent of what the firmware reports."""

from __future__ import annotations

import random
import time

import pytest

from rig.power.relay import RelayBoard, frame
from tests.firmware.cut_timing import BOUND_US, DELAYS_S, measure
from tests.power.raw_session import RawSession, raw_session
from tests.power.twins import Pin, Twin

# The host build is a Linux process on a shared, loaded machine: it is checked for order (never
# early) and gross lateness only. simavr is cycle-exact, so its bounds are the firmware's own.
HOST_BUILD_LATE_US = 500_000
WATCHDOG_SLACK_US = {"simavr": 5_000, "host": HOST_BUILD_LATE_US}


def _bound(twin: Twin) -> tuple[int, int]:
    low, high = BOUND_US[twin.kind]
    return low, high if twin.kind == "simavr" else HOST_BUILD_LATE_US


def _request(raw: RawSession, seq: int, body: str) -> dict[str, str]:
    """One request in a raw session; events before the reply are skipped. The OK fields."""
    raw.send(f"{seq} {body}")
    while True:
        line = raw.read_line(3.0)
        if not line.startswith("! "):
            break
    assert line.startswith(f"{seq} OK"), (body, line)
    return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)


def _next_event(raw: RawSession, kind: str, timeout_s: float = 3.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        line = raw.read_line(max(0.01, deadline - time.monotonic()))
        if line.startswith("! ") and line.split()[2] == kind:
            return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)


def _replies_until_marker(raw: RawSession, timeout_s: float = 30.0) -> list[bytes]:
    """Every line the board writes until it answers a marker request sent now: the board
    reads its input in order, so these are its answers to everything sent before (a quiet
    spell is no proof: a simulator on a loaded host stalls for longer than any spell)."""
    raw.send("65000 SYNC")
    deadline = time.monotonic() + timeout_s
    lines = []
    while True:
        line = raw.read_raw(max(0.01, deadline - time.monotonic()))
        if line.startswith(b"65000 OK "):
            return lines
        lines.append(line)


def _pins_after_boot(twin: Twin) -> list[Pin]:
    """Every pin change after the first boot, the twin stopped first so that its log is whole
    (`Twin.final_pins`): the twin logs the boot levels of all 4 channels first."""
    pins = twin.final_pins()
    assert sorted((p.channel, p.on) for p in pins[:4]) == [(ch, True) for ch in range(4)], pins
    return pins[4:]


def test_cut_pin_edge_lands_at_the_scheduled_time(twin: Twin) -> None:
    low, high = _bound(twin)
    # The longest watchdog: this test is about cut timing, and a machine as loaded as the
    # shared test host can starve a heartbeat for seconds.
    with RelayBoard(twin.pty, watchdog_ms=600_000) as board:
        for delay in DELAYS_S:
            samples = measure(twin, board, delay, reps=3 if delay < 0.3 else 1)
            errors = [s.pin_minus_at_us for s in samples]
            assert all(low <= e <= high for e in errors), (delay, errors)
    # Only channel 0 moved: once per cut and once per power-on.
    pins = _pins_after_boot(twin)
    assert {p.channel for p in pins} == {0}
    assert [p.on for p in pins] == [False, True] * (3 * 7 + 2), pins


@pytest.mark.parametrize("width_us", [30, 100, 1000])
def test_glitch_width_at_the_pin(twin: Twin, board: RelayBoard, width_us: int) -> None:
    # AVR in simavr: the width at the pin within ±2 µs (docs/firmware-timing.md)
    high = 2 if twin.kind == "simavr" else _bound(twin)[1]
    since = time.monotonic_ns()
    cut = board.glitch(1, width_us / 1e6, delay_s=0.001)
    off = cut.wait(2)
    on = cut.wait_restore(2)
    assert on.source_us is not None and off.source_us is not None
    pins = twin.wait_pins(2, since)
    assert [(p.channel, p.on) for p in pins] == [(1, False), (1, True)]
    width = pins[1].clk_us - pins[0].clk_us
    assert width_us - high <= width <= width_us + high, pins
    assert pins[0].clk_us - cut.at_us >= 0


def test_watchdog_restores_safe_state_in_time_after_the_host_goes_silent(
    twin: Twin, board: RelayBoard
) -> None:
    board.set_safe_state(2, False)
    board.off(1)
    with raw_session(board) as raw:  # the driver stops talking: the host is silent
        _request(raw, 1, "WDOG 1000")
        last = int(_request(raw, 2, "SYNC")["t"])  # the last request before the silence
        trip = _next_event(raw, "WDOG")
        edges = [_next_event(raw, "EDGE", 1.0) for _ in range(2)]
        assert {(e["ch"], e["on"], e["why"]) for e in edges} == {
            ("1", "1", "wdog"),
            ("2", "0", "wdog"),
        }
        assert trip["silent_ms"] == "1000"
        expected = {(1, True), (2, False)}
        deadline = time.monotonic() + 2
        while True:  # the twin's pin log is read by a thread of ours: give it a moment
            pins = [p for p in twin.pins if p.channel in (1, 2)][-2:]
            if {(p.channel, p.on) for p in pins} == expected or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert {(p.channel, p.on) for p in pins} == expected, pins
        for pin in pins:  # the pin itself, on the firmware's clock
            silent_us = pin.clk_us - last
            assert 999_000 <= silent_us <= 1_000_000 + WATCHDOG_SLACK_US[twin.kind], pin
        # a slow test host may let it trip again before this: it stays armed
        assert int(_request(raw, 3, "ID")["trips"]) >= 1
        _request(raw, 4, "WDOG 5000")
    assert board.identity.watchdog_trips >= 1
    assert board.states().on == (True, True, False, True)


def test_garbage_never_switches_a_channel(twin: Twin, board: RelayBoard) -> None:
    rng = random.Random(1234)
    valid_lines = ["SET 1 0", "CUT 2 0 0", "SET 3 0", "SAFE 1 0", "WDOG 50"]
    with raw_session(board) as raw:
        for _ in range(300):
            kind = rng.randrange(4)
            if kind == 0:
                noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 120)))
            elif kind == 1:  # a real command with a wrong checksum
                good = frame(f"{rng.randrange(65536)} SET 1 0")
                noise = good[:-5] + b"%04X\n" % ((int(good[-5:-1], 16) + 1) % 65536)
            elif kind == 2:  # a real command with one bit flipped, checksum of the original
                good = bytearray(frame(f"{rng.randrange(65536)} {rng.choice(valid_lines)}"))
                at = rng.randrange(len(good) - 6)
                good[at] ^= 1 << rng.randrange(7)
                noise = bytes(good)
            else:  # a real command cut short
                good = frame(f"{rng.randrange(65536)} {rng.choice(valid_lines)}")
                noise = good[: rng.randrange(1, len(good) - 1)]
            raw.send_bytes(noise)
            if rng.random() < 0.2:
                raw.send_bytes(b"\n")
        raw.send_bytes(b"\n")
        replies = _replies_until_marker(raw)
    assert replies and all(b" ERR " in r for r in replies), replies[:5]
    states = board.states()
    assert states.on == states.safe == (True,) * 4 and states.pending == (0,) * 4
    assert board.identity.watchdog_ms == 5000
    assert _pins_after_boot(twin) == []  # (the twin stopped: its log is whole)


def test_mcu_reset_mid_cuts_switches_only_the_cut_channel(twin: Twin, board: RelayBoard) -> None:
    resets_seen = 0
    for cycle in range(6):
        cut = board.cut(0, 0.002, 0.003)
        if cycle == 3:
            time.sleep(0.004)  # mid-cut: channel 0 is off when the MCU resets
            twin.reset()
            deadline = time.monotonic() + 5
            while not board.resets and time.monotonic() < deadline:
                time.sleep(0.01)
            resets_seen = len(board.resets)
            continue
        cut.wait(2)
        cut.wait_restore(2)
    time.sleep(0.2)
    assert resets_seen == 1 and len(twin.resets) == 1
    assert board.last_boot is not None and board.last_boot.reset_cause == "external"
    assert board.states().on == (True,) * 4
    pins = _pins_after_boot(twin)
    assert {p.channel for p in pins} == {0}, pins
    assert pins[-1].on
