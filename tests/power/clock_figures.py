"""Measure the driver's edge mapping against a firmware twin's ground truth (its pin log).

    .venv/bin/python -m tests.power.clock_figures [host|simavr] [cuts]

For each cut at a random delay (0.1 ms .. 1 s on a log scale) it prints nothing; at the end it
prints the distribution of the reported bound `error_ns` and of the true error
`Edge.host_ns - pin mono_ns`, and how many true errors fell outside the bound.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from rig.power.relay import RelayBoard
from tests.power.twins import Twin


def measure(kind: str, cuts: int, max_delay_s: float = 1.0) -> dict[str, float]:
    twin = Twin(kind)
    try:
        board = RelayBoard(twin.pty)
        try:
            bounds, errors, outside = [], [], 0
            rng = random.Random(1)
            for _ in range(cuts):
                delay = 10 ** rng.uniform(-4, 0) * max_delay_s
                since = time.monotonic_ns()
                edge = board.cut(0, delay, 0.0005).wait(delay + 5)
                pins = [p for p in twin.wait_pins(2, since) if p.channel == 0 and not p.on]
                true_error = edge.host_ns - pins[0].mono_ns
                bounds.append(edge.error_ns)
                errors.append(abs(true_error))
                outside += abs(true_error) > edge.error_ns
                time.sleep(0.002)
            return {
                "cuts": cuts,
                "bound_median_us": statistics.median(bounds) / 1e3,
                "bound_p95_us": sorted(bounds)[int(0.95 * (cuts - 1))] / 1e3,
                "bound_max_us": max(bounds) / 1e3,
                "true_median_us": statistics.median(errors) / 1e3,
                "true_max_us": max(errors) / 1e3,
                "outside_bound": outside,
            }
        finally:
            board.close()
    finally:
        twin.stop()


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "host"
    cuts = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    for key, value in measure(kind, cuts).items():
        print(f"{kind:7s} {key:16s} {value:10.1f}")


if __name__ == "__main__":
    main()
