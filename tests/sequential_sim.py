"""Simulated campaigns for sequential plans (no drives: each cut a Bernoulli outcome), and the
checks a plan's claims must pass against them, with the simulation's own error stated.

Error of a simulated rate from R campaigns: its binomial standard error sqrt(P (1 - P) / R); of a
simulated mean sample number: sd / sqrt(R), sd the exact standard deviation from the recursion.
A claim holds "within the simulation's error" when the simulated figure lies within Z = 3 of
those standard errors (one-sided for the risks, two-sided for agreement with the recursion)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rig.verdict.sequential import FAIL_CODE, PASS_CODE, Plan, curves, fixed_sample_size

Z = 3.0
ROWS = 20_000  # campaigns simulated at once (memory: ROWS x BLOCK draws)
BLOCK = 256  # cuts drawn at once per campaign


@dataclass(frozen=True)
class Simulated:
    p: float
    runs: int
    passed: int
    failed: int
    mean_cuts: float


def simulate(plan: Plan, p: float, runs: int, rng: np.random.Generator) -> Simulated:
    """`runs` campaigns of Bernoulli(p) cuts, each run until `plan` decides."""
    passed = failed = 0
    total_cuts = 0
    for start in range(0, runs, ROWS):
        codes, lengths = _batch(plan, p, min(ROWS, runs - start), rng)
        passed += int((codes == PASS_CODE).sum())
        failed += int((codes == FAIL_CODE).sum())
        total_cuts += int(lengths.sum())
    return Simulated(p, runs, passed, failed, total_cuts / runs)


def _batch(
    plan: Plan, p: float, runs: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    decision = np.zeros(runs, np.int8)
    length = np.zeros(runs, np.int64)
    failing = np.zeros(runs, np.int64)
    active = np.arange(runs)
    done_cuts = 0
    while len(active):
        width = min(BLOCK, plan.max_cuts - done_cuts)
        draws = rng.random((len(active), width)) < p
        k = failing[active][:, None] + np.cumsum(draws, axis=1)
        n = done_cuts + np.arange(1, width + 1)
        codes = plan.status(n[None, :], k)
        stopped = codes.any(axis=1)
        first = np.argmax(codes != 0, axis=1)
        ended = active[stopped]
        decision[ended] = codes[stopped, first[stopped]]
        length[ended] = n[first[stopped]]
        failing[active] = k[:, -1]
        active = active[~stopped]
        done_cuts += width
    return decision, length


def points(plan: Plan) -> list[float]:
    """Where a plan is checked: no failures, its two levels, and well beyond p1."""
    return [0.0, plan.p0, plan.p1, min(1.0, 10 * plan.p1)]


def violations(plan: Plan, runs: int, seed: int) -> list[str]:
    """Every claim of the plan that the simulation contradicts beyond Z standard errors."""
    rng = np.random.default_rng(seed)
    ps = points(plan)
    exact = curves(plan, ps)
    fixed_n, _ = fixed_sample_size(plan.p0, plan.p1, plan.alpha, plan.beta)
    found = []
    for i, p in enumerate(ps):
        sim = simulate(plan, p, runs, rng)
        oc = float(exact.pass_probability[i])
        se = math.sqrt(oc * (1 - oc) / runs) + 1e-12
        if abs(sim.passed / runs - oc) > Z * se:
            found.append(f"p={p:g}: simulated OC {sim.passed / runs:.4f} vs exact {oc:.4f}")
        asn, sd = float(exact.asn[i]), float(exact.sd[i])
        if abs(sim.mean_cuts - asn) > Z * sd / math.sqrt(runs) + 1e-9:
            found.append(f"p={p:g}: simulated ASN {sim.mean_cuts:.2f} vs exact {asn:.2f}")
        if p == plan.p0 and sim.failed / runs > _bound(plan.alpha, runs):
            found.append(f"false FAIL at p0: {sim.failed / runs:.4f} > alpha {plan.alpha}")
        if p == plan.p1 and sim.passed / runs > _bound(plan.beta, runs):
            found.append(f"false PASS at p1: {sim.passed / runs:.4f} > beta {plan.beta}")
        if p in (plan.p0, plan.p1) and not (asn < fixed_n and sim.mean_cuts < fixed_n):
            found.append(f"p={p:g}: ASN {asn:.1f} (simulated {sim.mean_cuts:.1f}) >= {fixed_n}")
    return found


def _bound(risk: float, runs: int) -> float:
    """The one-sided Z-sigma bound a simulated rate of true value `risk` stays under."""
    return risk + Z * math.sqrt(risk * (1 - risk) / runs)


@dataclass(frozen=True)
class ExposedRun:
    """Campaigns run through the rig's own plans (rig/campaign/settle.py) where each cut is
    exposed to the judged class with probability `exposure` and, when exposed, fails it with
    probability `p`: the plan must keep its risks over the exposed cuts, and take ASN / exposure
    cuts on average (each exposed cut is reached after a geometric number of cuts)."""

    p: float
    exposure: float
    runs: int
    passed: int
    failed: int
    mean_cuts: float


def simulate_exposed(
    plan: Plan, p: float, exposure: float, runs: int, rng: np.random.Generator
) -> ExposedRun:
    from rig.campaign.settle import Settlement
    from rig.config.criteria import Criteria

    judged = "lost_durable_write"
    criteria = Criteria(classes=(judged,), sequential=plan, scope="drive", zero_tolerance=())
    passed = failed = total = 0
    for _ in range(runs):
        settlement = Settlement(criteria)
        settled = None
        while settled is None:
            exposed = rng.random() < exposure
            failing = exposed and rng.random() < p
            seen = frozenset({judged} if exposed else ())
            settled = settlement.add("ch0", "ok", {judged} if failing else set(), seen)
        passed += settled.decision == "PASS"
        failed += settled.decision == "FAIL"
        total += settled.cuts
    return ExposedRun(p, exposure, runs, passed, failed, total / runs)


def exposed_violations(plan: Plan, exposure: float, runs: int, seed: int) -> list[str]:
    """The plan's risks at p0 and p1 over exposed cuts, and its mean cuts against the exact
    ASN / exposure, each within Z standard errors of the simulation (as `violations`)."""
    rng = np.random.default_rng(seed)
    found = []
    exact = curves(plan, np.array([plan.p0, plan.p1]))
    for i, (p, risk, limit) in enumerate(
        ((plan.p0, "FAIL", plan.alpha), (plan.p1, "PASS", plan.beta))
    ):
        run = simulate_exposed(plan, p, exposure, runs, rng)
        rate = (run.failed if risk == "FAIL" else run.passed) / runs
        if rate > limit + Z * math.sqrt(limit * (1 - limit) / runs):
            found.append(
                f"P({risk} | p = {p:g}) = {rate:.4f} above {limit:g} at exposure {exposure:g}"
            )
        # cuts to a decision: N exposed cuts (ASN, sd from the recursion), each after a
        # geometric number G of cuts: E[T] = E[N] / e, Var[T] = E[N] Var[G] + Var[N] E[G]^2
        asn, sd = float(exact.asn[i]), float(exact.sd[i])
        mean = asn / exposure
        var = asn * (1 - exposure) / exposure**2 + sd**2 / exposure**2
        if abs(run.mean_cuts - mean) > Z * math.sqrt(var / runs):
            found.append(f"mean cuts at p = {p:g}: {run.mean_cuts:.2f}, exact {mean:.2f}")
    return found
