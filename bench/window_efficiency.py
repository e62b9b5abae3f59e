"""Cuts needed for a t99 interval of +-10 % (relative): the window strategy's design against
uniform placement, per twin profile with a known window (fixtures/profiles.toml), by simulation
of the profile's true loss curve (Bernoulli draws; the real design and estimator code). Each
campaign is fitted at 20 cuts and then every --step more (25 % by default), and stops at the
first fit whose bounded t99 interval is within +-10 % ((high / low) ** 0.5 - 1 <= 0.10); one
that has not got there by --cap cuts is reported as "> cap". The median over --seeds campaigns
is printed, and the ratios uniform / window and log-uniform / window.

"window" is `WindowDesign` cut by cut (it adapts to every response). The baselines do not
adapt, so they are drawn in numpy blocks, and their delays are rounded to a log lattice of
LATTICE points over the range (0.33 % apart, far finer than the +-10 % asked): the fit then
sees at most LATTICE distinct delays however many cuts it has (`fit.CutsByDelay`, an exact binomial
likelihood per delay), which lets a baseline run to millions of cuts.

    PYTHONPATH=. .venv/bin/python bench/window_efficiency.py [--seeds 5] [--cap 20000000]
        [--placement window --placement uniform ...] [--profile NAME ...]

The baselines do not depend on the design: `--placement window` reruns only the window column
(a column not run prints "."; their seeds give the same draws at every run).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from collections.abc import Callable

import numpy as np

from fixtures.faultcore import Profile
from fixtures.profiles import load_profiles
from rig.window import fit
from rig.window.design import WindowDesign

RANGE = (0.1, 60_000.0)
TARGET = 0.10
LATTICE = 4096
Draw = Callable[[np.random.Generator, int], np.ndarray]  # n delays in ms


def met(c: fit.CutsByDelay) -> bool:
    t99 = fit.fit_cuts(c, qs=(0.99,)).quantile(0.99)
    return t99 is not None and t99.relative_half_width() <= TARGET


def window_needed(drive: Profile, cap: int, seed: int, step: float) -> float:
    """Cuts the window strategy's design needs (cut by cut: it adapts to each response)."""
    rng, design, check = random.Random(seed), WindowDesign(*RANGE), 20
    while len(design.lost) < cap:
        delay = design.next_delay_ms(rng)
        design.observe(delay, rng.random() < drive.true_loss_probability(delay))
        if len(design.lost) >= check:
            check = max(check + 1, int(check * step))
            if met(fit.CutsByDelay.of(design.delays_ms, design.lost)):
                return len(design.lost)
    return math.inf


def placement_needed(drive: Profile, draw: Draw, cap: int, seed: int, step: float) -> float:
    """Cuts a placement that does not adapt needs, its delays on the log lattice."""
    x = np.linspace(math.log(RANGE[0]), math.log(RANGE[1]), LATTICE)
    truth = np.array([drive.true_loss_probability(d) for d in np.exp(x)])
    rng = np.random.default_rng(seed)
    lost, cuts = np.zeros(LATTICE), np.zeros(LATTICE)
    n, check = 0, 20
    while n < cap:
        take = min(check, cap) - n
        at = np.rint((np.log(draw(rng, take)) - x[0]) / (x[1] - x[0])).astype(int)
        lost += np.bincount(at, weights=rng.random(take) < truth[at], minlength=LATTICE)
        cuts += np.bincount(at, minlength=LATTICE)
        n, check = n + take, max(check + 1, int(check * step))
        seen = cuts > 0
        if met(fit.CutsByDelay(x[seen], lost[seen], cuts[seen])):
            return n
    return math.inf


def uniform(rng: np.random.Generator, n: int) -> np.ndarray:
    """The rig's uniform strategy: linear in delay over the range."""
    return rng.uniform(RANGE[0], RANGE[1], n)


def log_uniform(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.exp(rng.uniform(math.log(RANGE[0]), math.log(RANGE[1]), n))


PLACEMENTS = ("window", "uniform", "log-uniform")


def needed_by(placement: str, drive: Profile, cap: int, seed: int, step: float) -> float:
    if placement == "window":
        return window_needed(drive, cap, seed, step)
    draw = uniform if placement == "uniform" else log_uniform
    return placement_needed(drive, draw, cap, seed, step)


def _show(v: float, cap: int) -> str:
    if math.isnan(v):
        return "."
    return f"> {cap}" if math.isinf(v) else f"{v:.0f}"


def _ratio(v: float, win: float, cap: int) -> str:
    if math.isinf(win) or math.isnan(win) or math.isnan(v):
        return "-"
    return f"> {cap / win:.0f}x" if math.isinf(v) else f"{v / win:.1f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cap", type=int, default=20_000_000)
    parser.add_argument("--step", type=float, default=1.25, help="refit after this factor more")
    parser.add_argument("--profile", action="append", help="only these profiles")
    parser.add_argument(
        "--placement",
        action="append",
        choices=PLACEMENTS,
        help="only these placements (default: all three)",
    )
    args = parser.parse_args()
    profiles = {n: p for n, p in load_profiles().items() if p.destage_window_ms > 0}
    names = args.profile or sorted(profiles, key=lambda n: (profiles[n].destage_window_ms, n))
    print(
        f"range {RANGE[0]:g}..{RANGE[1]:g} ms, target +-{TARGET:.0%}, median of {args.seeds} "
        f"seeds, cap {args.cap} cuts, refit every x{args.step:g}\n"
    )
    columns = ("true t99 ms", "window", "uniform", "log-unif", "unif/win", "log/win", "s")
    chosen = set(args.placement or PLACEMENTS)
    print(f"{'profile':24} " + " ".join(f"{c:>11}" for c in columns) + "  window per seed")
    for name in names:
        drive, started = profiles[name], time.monotonic()
        needed = {
            k: [needed_by(k, drive, args.cap, s, args.step) for s in range(args.seeds)]
            for k in PLACEMENTS
            if k in chosen
        }
        medians = {k: statistics.median(needed[k]) if k in needed else math.nan for k in PLACEMENTS}
        win = medians["window"]
        cells = [f"{drive.true_quantile_ms(0.99):.4g}"]
        cells += [_show(v, args.cap) for v in medians.values()]
        cells += [_ratio(medians[k], win, args.cap) for k in ("uniform", "log-uniform")]
        cells.append(f"{time.monotonic() - started:.0f}")
        each = ", ".join(_show(v, args.cap) for v in needed.get("window", []))
        print(f"{name:24} " + " ".join(f"{c:>11}" for c in cells) + f"  {each}", flush=True)


if __name__ == "__main__":
    main()
