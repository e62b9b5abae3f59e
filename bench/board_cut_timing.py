"""When a relay board's cut falls against the instant the rig asked for: the production serial
path (rig/power/relay, a pty) to the firmware's host build (firmware/build/powerboard-host: the
real core, real time, no simulator), idle and beside a CPU hog of 4 busy processes per core.

Each cut is `RelayBoard.cut(ch, delay)`, called at the priority the campaign's cut thread has
(rig/power/realtime.py: SCHED_FIFO where allowed), with a delay drawn uniformly from
`--delay-ms`; the host build runs SCHED_FIFO where allowed, as an MCU is not loaded by the host
(firmware/host/board_host.c `MCU_PRIORITY`). Its
lateness is the pin's own instant (the host build logs each pin change with its
CLOCK_MONOTONIC time, the clock the rig stamps with) minus (the call's instant + the delay).
The pin is the truth; the rig's own mapping of the edge is printed beside it (its median bound).
Four channels in turn, each powered again after its cut.

Run: .venv/bin/python bench/board_cut_timing.py [--cuts 60] [--delay-ms 0.3,40] [--loads idle,hog]
From another checkout (`cd OTHER && python /path/bench/board_cut_timing.py`) it measures that
checkout's driver and firmware: it imports the rig of the working directory and runs its host
build.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, os.getcwd())

from fixtures.board_station import HostBoard, PinEdge
from rig.power.realtime import realtime
from rig.power.relay import RelayBoard

HOST_BUILD = Path(os.getcwd()) / "firmware" / "build" / "powerboard-host"


@contextlib.contextmanager
def hog(per_core: int) -> Iterator[None]:
    """Busy processes (4 per core for the goal's load), ended by their PIDs."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range((os.cpu_count() or 1) * per_core)
    ]
    try:
        time.sleep(1.0)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _off_pins(host: HostBoard, channel: int, since: int) -> list[PinEdge]:
    return [p for p in host.pins_of(channel)[since:] if not p.on]


def measure(cuts: int, delay_ms: tuple[float, float], seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    host = HostBoard("bench", HOST_BUILD)
    late_ms: list[float] = []
    bounds_ms: list[float] = []
    delays_ms: list[float] = []
    try:
        with RelayBoard(host.pty, watchdog_ms=600_000) as board:
            for n in range(cuts):
                ch = n % 4
                delay_s = rng.uniform(*delay_ms) / 1000
                delays_ms.append(delay_s * 1000)
                before = len(host.pins_of(ch))
                with realtime():
                    asked_ns = time.monotonic_ns()
                    pending = board.cut(ch, delay_s)
                edge = pending.wait(10)
                # the off pin: an on edge logged late (the board's power-on) is not the cut's
                deadline = time.monotonic() + 5
                while not _off_pins(host, ch, before) and time.monotonic() < deadline:
                    time.sleep(0.001)
                pin = _off_pins(host, ch, before)[0]
                late_ms.append((pin.mono_ns - asked_ns - round(delay_s * 1e9)) / 1e6)
                bounds_ms.append(edge.error_ns / 1e6)
                board.on(ch)
    finally:
        host.close()
    late = np.array(late_ms)
    return {
        "cuts": cuts,
        "late_p50_ms": round(float(np.percentile(late, 50)), 3),
        "late_p99_ms": round(float(np.percentile(late, 99)), 3),
        "late_max_ms": round(float(late.max()), 3),
        "early_min_ms": round(float(late.min()), 3),
        "within_0.5ms+5%": sum(
            abs(x) <= 0.5 + 0.05 * d for x, d in zip(late_ms, delays_ms, strict=True)
        ),
        "edge_bound_p50_ms": round(float(np.median(bounds_ms)), 3),
        "load1": round(os.getloadavg()[0], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cuts", type=int, default=60)
    parser.add_argument("--delay-ms", default="0.3,40")
    parser.add_argument("--loads", default="idle,hog")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    low, high = (float(x) for x in args.delay_ms.split(","))
    for load in args.loads.split(","):
        with hog(4) if load == "hog" else contextlib.nullcontext():
            row = measure(args.cuts, (low, high), args.seed)
        print(json.dumps({"load": load, "code": os.getcwd(), **row}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
