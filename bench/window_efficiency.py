"""Cuts needed for a t99 interval of +-10 % (relative): the window strategy's design against
uniform placement, per twin profile with a known window (fixtures/profiles.toml), by simulation
of the profile's true loss curve (fixtures/window_sim.py: Bernoulli draws, the real design and
estimator code). Each campaign is fitted at 20 cuts and then every 25 % more, and stops at the
first fit whose bounded t99 interval is within +-10 % ((high / low) ** 0.5 - 1 <= 0.10);
a placement that has not got there by --cap cuts is reported as "> cap". The median over
--seeds campaigns is printed, and the ratio uniform / window (log-uniform / window too: the
fairer baseline, since linear uniform placement over a wide range almost never cuts early).

    PYTHONPATH=. .venv/bin/python bench/window_efficiency.py [--seeds 5] [--cap 2000]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from fixtures.profiles import load_profiles
from rig.window import fit
from rig.window.design import LogUniformDesign, WindowDesign

RANGE = (0.1, 60_000.0)
TARGET = 0.10


class UniformDesign(WindowDesign):
    """Uniform placement on linear delay over the range (the rig's uniform strategy)."""

    def next_delay_ms(self, rng: random.Random) -> float:
        return rng.uniform(self.min_ms, self.max_ms)


def cuts_needed(curve: object, design: WindowDesign, cap: int, seed: int) -> float:
    rng = random.Random(seed)
    check = 20
    while len(design.lost) < cap:
        delay = design.next_delay_ms(rng)
        design.observe(delay, rng.random() < curve(delay))  # type: ignore[operator]
        n = len(design.lost)
        if n >= check:
            check = max(check + 1, int(check * 1.25))
            t99 = fit.fit(design.delays_ms, design.lost, qs=(0.99,)).quantile(0.99)
            if t99 is not None and t99.relative_half_width() <= TARGET:
                return n
    return math.inf


def _show(v: float, cap: int) -> str:
    return f"> {cap}" if math.isinf(v) else f"{v:.0f}"


def _ratio(v: float, win: float, cap: int) -> str:
    if math.isinf(win):
        return "-"
    return f"> {cap / win:.0f}x" if math.isinf(v) else f"{v / win:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cap", type=int, default=2000)
    parser.add_argument("--profile", action="append", help="only these profiles")
    args = parser.parse_args()
    profiles = {n: p for n, p in load_profiles().items() if p.destage_window_ms > 0}
    names = args.profile or sorted(profiles, key=lambda n: (profiles[n].destage_window_ms, n))
    kinds = (
        ("window", WindowDesign),
        ("uniform", UniformDesign),
        ("log-uniform", LogUniformDesign),
    )
    print(
        f"range {RANGE[0]:g}..{RANGE[1]:g} ms, target +-{TARGET:.0%}, median of {args.seeds} seeds,"
    )
    print(f"cap {args.cap} cuts\n")
    columns = ("true t99 ms", "window", "uniform", "log-unif", "unif/win", "log/win")
    print(f"{'profile':24} " + " ".join(f"{c:>11}" for c in columns))
    started = time.monotonic()
    for name in names:
        drive = profiles[name]
        medians = {}
        for kind, design in kinds:
            needed = [
                cuts_needed(drive.true_loss_probability, design(*RANGE), args.cap, seed)
                for seed in range(args.seeds)
            ]
            medians[kind] = statistics.median(needed)
        win = medians["window"]
        cells = [f"{drive.true_quantile_ms(0.99):.4g}"]
        cells += [_show(medians[k], args.cap) for k, _ in kinds]
        cells += [_ratio(medians[k], win, args.cap) for k in ("uniform", "log-uniform")]
        print(f"{name:24} " + " ".join(f"{c:>11}" for c in cells), flush=True)
    print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
