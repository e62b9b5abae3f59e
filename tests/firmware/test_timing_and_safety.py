"""Cut timing, host-silence watchdog, and that noise or an MCU reset never switches a channel
nobody asked to switch. Times come from the MCU's own timestamps (simulated time in simavr)."""

from __future__ import annotations

import random
import time

from tests.firmware.board_client import Client, Target, fields, frame, wait_for
from tests.firmware.cut_timing import BOUND_US, DELAYS_US, measure

WATCHDOG_SLACK_US = {"simavr": 5_000, "host": 20_000}
CHANNELS_AT_BOOT = 4  # the first pin lines report the boot levels


def test_cut_edge_lands_at_the_scheduled_time(target: Target, client: Client) -> None:
    low, high = BOUND_US[target.name]
    for delay in DELAYS_US:
        reps = 5 if delay < 300_000 else 2
        errors = measure(client, delay, reps)
        assert all(low <= e <= high for e in errors), (delay, errors)
    # The pin itself moved once per cut and once per restore, on channel 0 only.
    assert {edge.channel for edge in target.pins[CHANNELS_AT_BOOT:]} == {0}


def test_glitch_width(target: Target, client: Client) -> None:
    high = BOUND_US[target.name][1]
    client.ok("CUT 1 1000 100")
    off = client.wait_event("EDGE")
    on = client.wait_event("EDGE")
    width = int(on["t"]) - int(off["t"])
    assert 100 - high <= width <= 100 + high, (off, on)


def test_watchdog_restores_safe_state_in_time(target: Target, client: Client) -> None:
    client.ok("SAFE 2 0")
    client.ok("SET 1 0")
    client.ok("WDOG 300")
    last = int(client.ok("SYNC")["t"])  # the last request before going silent
    trip = client.wait_event("WDOG", timeout=2.0)
    edges = [client.wait_event("EDGE", timeout=1.0) for _ in range(2)]
    assert {(e["ch"], e["on"], e["why"]) for e in edges} == {("1", "1", "wdog"), ("2", "0", "wdog")}
    for event in [trip, *edges]:
        silent_us = int(event["t"]) - last
        assert 299_000 <= silent_us <= 300_000 + WATCHDOG_SLACK_US[target.name], event
    assert wait_for(lambda: target.pins[-1].on is False and target.pins[-1].channel == 2, 1.0)
    assert fields(client.request("ID")[0])["trips"] == "1"
    client.ok("SAFE 2 1")


def test_garbage_never_switches_a_channel(target: Target, client: Client) -> None:
    rng = random.Random(1234)
    valid_lines = [b"SET 1 0", b"CUT 2 0 0", b"SET 3 0", b"SAFE 1 0", b"WDOG 50"]
    for _ in range(300):
        kind = rng.randrange(4)
        if kind == 0:
            noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 120)))
        elif kind == 1:  # a real command with a wrong checksum
            good = frame(f"{rng.randrange(65536)} SET 1 0")
            noise = good[:-5] + b"%04X\n" % ((int(good[-5:-1], 16) + 1) % 65536)
        elif kind == 2:  # a real command with one byte flipped, checksum of the original
            good = bytearray(frame(f"{rng.randrange(65536)} " + rng.choice(valid_lines).decode()))
            at = rng.randrange(len(good) - 6)
            good[at] ^= 1 << rng.randrange(7)
            noise = bytes(good)
        else:  # a real command cut short
            good = frame(f"{rng.randrange(65536)} " + rng.choice(valid_lines).decode())
            noise = good[: rng.randrange(1, len(good) - 1)]
        client.send_raw(noise)
        if rng.random() < 0.2:
            client.send_raw(b"\n")
    client.send_raw(b"\n")
    time.sleep(0.3)
    client.drain(quiet=0.2)
    client.ok("SYNC")
    state = fields(client.request("STATE")[0])
    assert state["on"] == "1,1,1,1" and state["safe"] == "1,1,1,1", state
    assert len(target.pins) == CHANNELS_AT_BOOT, target.pins


def test_mcu_reset_mid_campaign_switches_only_the_cut_channel(
    target: Target, client: Client
) -> None:
    for cycle in range(6):
        client.ok("CUT 0 2000 3000")
        if cycle == 3:
            time.sleep(0.003)  # mid-cut: channel 0 is off when the MCU resets
            target.reset()
            boot = client.wait_event("BOOT", timeout=3.0)
            assert boot["on"] == "1,1,1,1"
            client.drain(quiet=0.2)
            client.seq = 100  # a new session after the reset
            continue
        client.wait_event("EDGE")
        client.wait_event("EDGE")
    client.drain(quiet=0.2)
    assert wait_for(lambda: target.resets == 1, 2.0)
    switched = {edge.channel for edge in target.pins[CHANNELS_AT_BOOT:]}
    assert switched == {0}, target.pins
    assert target.pins[-1].channel == 0 and target.pins[-1].on
