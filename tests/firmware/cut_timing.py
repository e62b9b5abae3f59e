"""Cut timing at the pin: cuts scheduled through the production driver (`RelayBoard.cut`) against
the pin edges the firmware twin logged. Run as a script to regenerate the tables of
docs/firmware-timing.md:

    .venv/bin/python -m tests.firmware.cut_timing --reps 30
    .venv/bin/python -m tests.firmware.cut_timing --short --reps 10 --targets simavr

Two figures per cut:
- on the MCU clock: the pin's `clk_us` (the bridge/host build reading the firmware's own clock at
  the cycle the pin changed) minus `at_us`, the MCU time the driver's CUT was scheduled for;
- on the host clock: the pin's `mono_ns` minus the driver's mapping of `at_us` to the host clock
  (taken once the edge happened, so interpolated between clock-sync samples), next to the
  mapping's own error bound.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

from rig.power.relay import RelayBoard
from tests.power.twins import Pin, Twin

DELAYS_S = [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]
# Documented bounds on (pin clk_us - scheduled at_us), µs, for delays 0.1 ms .. 1 s.
BOUND_US = {"simavr": (0, 20), "host": (0, 5_000)}
CHANNEL = 0


@dataclass(frozen=True)
class CutSample:
    delay_us: int
    pin_minus_at_us: int
    host_error_ns: int  # pin mono_ns - driver's host time of at_us
    bound_ns: int  # the driver's error bound for that mapping


def off_pin(twin: Twin, since_ns: int, timeout_s: float) -> Pin:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pin in twin.pins_since(since_ns):
            if pin.channel == CHANNEL and not pin.on:
                return pin
        time.sleep(0.002)
    raise AssertionError(f"no off edge logged on channel {CHANNEL} pin")


def measure(twin: Twin, board: RelayBoard, delay_s: float, reps: int) -> list[CutSample]:
    samples = []
    for _ in range(reps):
        since = time.monotonic_ns()
        pending = board.cut(CHANNEL, delay_s)
        pending.wait(delay_s + 5.0)
        pin = off_pin(twin, since, 2.0)
        scheduled = board.map_mcu_us(pending.at_us)
        samples.append(
            CutSample(
                round(delay_s * 1e6),
                pin.clk_us - pending.at_us,
                pin.mono_ns - scheduled.host_ns,
                scheduled.error_ns,
            )
        )
        board.on(CHANNEL)
    return samples


def glitch_widths(twin: Twin, board: RelayBoard, width_s: float, reps: int) -> list[int]:
    """Widths at the pin (`clk_us` of the restore minus that of the off edge) of glitches."""
    widths = []
    for _ in range(reps):
        since = time.monotonic_ns()
        cut = board.glitch(CHANNEL, width_s, delay_s=0.001)
        cut.wait(2.0)
        cut.wait_restore(2.0)
        pins = [p for p in twin.wait_pins(2, since) if p.channel == CHANNEL][:2]
        assert [p.on for p in pins] == [False, True], pins
        widths.append(pins[1].clk_us - pins[0].clk_us)
    return widths


def short(twin: Twin, board: RelayBoard, reps: int) -> None:
    """Delays below the timer's wake-up lead, and glitch widths."""
    print("| target | request | n | at the pin: min / median / max µs |")
    print("|---|---|---:|---|")
    for delay in (0.0, 50e-6):
        errors = [s.pin_minus_at_us for s in measure(twin, board, delay, reps)]
        print(
            f"| {twin.kind} | cut, d = {delay * 1e6:g} µs: pin − at | {reps} | {min(errors)} / "
            f"{statistics.median(errors):g} / {max(errors)} |"
        )
    for width in (10e-6, 20e-6, 30e-6, 100e-6, 1e-3):
        got = glitch_widths(twin, board, width, reps)
        print(
            f"| {twin.kind} | glitch {width * 1e6:g} µs: width | {reps} | {min(got)} / "
            f"{statistics.median(got):g} / {max(got)} |"
        )


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--targets", nargs="+", default=["simavr", "host"])
    parser.add_argument("--short", action="store_true", help="short delays and glitch widths")
    args = parser.parse_args()
    if args.short:
        for name in args.targets:
            twin = Twin(name)
            try:
                with RelayBoard(twin.pty, watchdog_ms=600_000) as board:
                    short(twin, board, args.reps)
            finally:
                twin.stop()
        return
    print(
        "| target | delay | n | pin − at: min / median / p99 / max µs "
        "| host: pin − h(at) median / max |abs| µs | driver's bound median µs |"
    )
    print("|---|---:|---:|---|---|---:|")
    for name in args.targets:
        twin = Twin(name)
        try:
            with RelayBoard(twin.pty) as board:
                for delay in DELAYS_S:
                    reps = args.reps if delay < 0.3 else max(3, args.reps // 10)
                    got = measure(twin, board, delay, reps)
                    mcu = [s.pin_minus_at_us for s in got]
                    host = [s.host_error_ns / 1000 for s in got]
                    bound = statistics.median(s.bound_ns for s in got) / 1000
                    print(
                        f"| {name} | {delay * 1000:g} ms | {reps} | {min(mcu)} / "
                        f"{statistics.median(mcu):g} / {percentile(mcu, 0.99)} / {max(mcu)} | "
                        f"{statistics.median(host):.0f} / {max(abs(h) for h in host):.0f} | "
                        f"{bound:.0f} |",
                        flush=True,
                    )
        finally:
            twin.stop()


if __name__ == "__main__":
    main()
