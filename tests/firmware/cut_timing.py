"""Measures cut-delay error: the off edge's MCU timestamp minus the `at=` the MCU promised when it
accepted the CUT (accept time + delay). Run as a script to regenerate docs/firmware-timing.md:

    .venv/bin/python -m tests.firmware.cut_timing --reps 30
"""

from __future__ import annotations

import argparse
import statistics

from tests.firmware.board_client import Client, start

DELAYS_US = [100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000]
# Documented bounds on (edge t - at), in µs, for delays 0.1 ms .. 1 s.
BOUND_US = {"simavr": (0, 20), "host": (0, 5_000)}


def measure(board: Client, delay_us: int, reps: int) -> list[int]:
    errors = []
    for _ in range(reps):
        accepted = board.ok(f"CUT 0 {delay_us} 0")
        edge = board.wait_event("EDGE", timeout=delay_us / 1e6 + 2.0)
        assert edge["ch"] == "0" and edge["on"] == "0", edge
        errors.append(int(edge["t"]) - int(accepted["at"]))
        board.ok("SET 0 1")
        board.drain(quiet=0.02)
    return errors


def summary(errors: list[int]) -> tuple[int, float, int, int]:
    ordered = sorted(errors)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return ordered[0], statistics.median(ordered), p99, ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--targets", nargs="+", default=["simavr", "host"])
    args = parser.parse_args()
    print("| target | delay | n | min µs | median µs | p99 µs | max µs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.targets:
        target = start(name)
        try:
            board = Client(target.pty)
            board.drain(quiet=0.3)
            for delay in DELAYS_US:
                reps = args.reps if delay < 300_000 else max(3, args.reps // 10)
                lo, med, p99, hi = summary(measure(board, delay, reps))
                label = f"{delay / 1000:g} ms"
                print(f"| {name} | {label} | {reps} | {lo} | {med:g} | {p99} | {hi} |", flush=True)
            board.close()
        finally:
            target.stop()


if __name__ == "__main__":
    main()
