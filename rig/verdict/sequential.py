"""Sequential verdicts: Wald's sequential probability ratio test (SPRT) for a binomial per-cut
failure probability, truncated at a maximum number of cuts (docs/campaign.md, "Sequential
plans"; docs/decisions.md, "Sequential verdicts are our own code in a leaf module").

H0: p = p0 (acceptable, PASS) against H1: p = p1 (rejectable, FAIL), p0 < p1. After n cuts with
k failing ones the log-likelihood ratio is

    LLR(n, k) = k * log(p1 / p0) + (n - k) * log((1 - p1) / (1 - p0))

FAIL once LLR >= A = log(1 / alpha), PASS once LLR <= B = log(beta), else continue: Wald's
conservative boundaries, which bound the untruncated test's risks by alpha and beta themselves
(his usual log((1 - beta) / alpha) and log(beta / (1 - alpha)) only by alpha / (1 - beta) and
beta / (1 - alpha)). At `max_cuts` without either, the sign of LLR decides (Wald's
truncation rule: FAIL if LLR > 0, i.e. H1 is the likelier, else PASS); `Plan.problem` refuses a
truncation whose exact risks exceed alpha or beta. The test stops at its first decision.

The operating characteristic (probability of PASS) and the average sample number are exact:
a dynamic programme over the truncated binomial walk (the probability of each number of failing
cuts at each n among the paths not yet stopped), vectorized over p with numpy.

A leaf module (numpy and scipy only): the campaign runner, the config check and the report use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rig.config.tables import Table
from rig.errors import UserError

PASS, FAIL, CONTINUE = "PASS", "FAIL", "CONTINUE"
CODES = (CONTINUE, PASS, FAIL)  # the codes `Plan.status` returns: 0, 1, 2
CONTINUE_CODE, PASS_CODE, FAIL_CODE = 0, 1, 2
FloatArray = npt.NDArray[np.float64]
_CHUNK = 4096  # cuts whose state codes the recursion computes at once


@dataclass(frozen=True)
class Plan:
    p0: float  # acceptable per-cut failure probability (producer's risk alpha of FAIL at it)
    p1: float  # rejectable per-cut failure probability (consumer's risk beta of PASS at it)
    alpha: float
    beta: float
    max_cuts: int  # truncation

    @property
    def upper(self) -> float:
        """A: FAIL at or above it (Wald's conservative boundary)."""
        return math.log(1 / self.alpha)

    @property
    def lower(self) -> float:
        """B: PASS at or below it (Wald's conservative boundary)."""
        return math.log(self.beta)

    @property
    def fail_step(self) -> float:
        return math.log(self.p1 / self.p0)

    @property
    def pass_step(self) -> float:
        return math.log((1 - self.p1) / (1 - self.p0))  # < 0

    def problem(self) -> str:
        """Why the plan cannot be run ("" when it can): the campaign file's one-line refusal."""
        if not (0 < self.p0 < 1 and 0 < self.p1 < 1):
            return "p0 and p1 must lie strictly between 0 and 1"
        if self.p0 >= self.p1:
            return f"p0 = {self.p0:g} must be below p1 = {self.p1:g}"
        if not (0 < self.alpha < 0.5 and 0 < self.beta < 0.5):
            return "alpha and beta must lie strictly between 0 and 0.5"
        need = max(self.cuts_to_pass(), self.cuts_to_fail())
        if self.max_cuts < need:
            return (
                f"max_cuts = {self.max_cuts} cannot reach a decision: PASS needs at least"
                f" {self.cuts_to_pass()} cuts, FAIL {self.cuts_to_fail()}"
            )
        risks = curves(self, [self.p0, self.p1])
        fail_at_p0, pass_at_p1 = float(risks.fail_probability[0]), float(risks.pass_probability[1])
        if fail_at_p0 > self.alpha + 1e-12 or pass_at_p1 > self.beta + 1e-12:
            return (
                f"max_cuts = {self.max_cuts} truncates the plan too early: its exact risks are"
                f" {fail_at_p0:.4g} at p0 (alpha {self.alpha:g}) and {pass_at_p1:.4g} at p1"
                f" (beta {self.beta:g})"
            )
        return ""

    def cuts_to_pass(self) -> int:
        """The fewest cuts that can PASS by the boundary (all failure-free)."""
        return _first_cut(lambda n: self.llr(n, 0) <= self.lower)

    def cuts_to_fail(self) -> int:
        """The fewest cuts that can FAIL by the boundary (all failing)."""
        return _first_cut(lambda n: self.llr(n, n) >= self.upper)

    def llr(self, cuts: npt.ArrayLike, failing: npt.ArrayLike) -> npt.NDArray[np.float64]:
        n, k = np.asarray(cuts, np.float64), np.asarray(failing, np.float64)
        return k * self.fail_step + (n - k) * self.pass_step

    def status(self, cuts: npt.ArrayLike, failing: npt.ArrayLike) -> npt.NDArray[np.int8]:
        """The state (n, k) as a code of CODES, elementwise; truncation at n >= max_cuts."""
        n = np.asarray(cuts)
        value = self.llr(cuts, failing)
        code = np.where(value >= self.upper, FAIL_CODE, np.where(value <= self.lower, 1, 0))
        truncated = (n >= self.max_cuts) & (code == CONTINUE_CODE)
        code = np.where(truncated, np.where(value > 0, FAIL_CODE, PASS_CODE), code)
        return code.astype(np.int8)

    def decide(self, cuts: int, failing: int) -> str:
        """PASS, FAIL or CONTINUE at (cuts, failing cuts), for a path that has not stopped."""
        return CODES[int(self.status(cuts, failing))]

    def as_json(self) -> dict[str, object]:
        return {
            "p0": self.p0,
            "p1": self.p1,
            "alpha": self.alpha,
            "beta": self.beta,
            "max_cuts": self.max_cuts,
        }


def _first_cut(decided: object) -> int:
    """The smallest n >= 1 with decided(n) (monotone in n), by doubling and bisection."""
    assert callable(decided)
    high = 1
    while not decided(high):
        high *= 2
        if high > 1 << 40:
            return high
    low = high // 2  # decided(low) is False, or low == 0
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decided(mid) else (mid, high)
    return high


@dataclass(frozen=True)
class Settled:
    decision: str  # PASS, FAIL or CONTINUE (no decision within the cuts seen)
    cuts: int  # cuts the plan used (all of them when CONTINUE)
    failing: int  # failing cuts among them


def first_decision(plan: Plan, failing: npt.ArrayLike) -> Settled:
    """The plan run over cuts in order (`failing`: one bool per cut): where it first decided."""
    fails = np.asarray(failing, bool)
    k = np.cumsum(fails)
    n = np.arange(1, len(fails) + 1)
    codes = plan.status(n, k)
    hit = np.flatnonzero(codes)
    if not len(hit):
        return Settled(CONTINUE, len(fails), int(k[-1]) if len(k) else 0)
    i = int(hit[0])
    return Settled(CODES[int(codes[i])], i + 1, int(k[i]))


@dataclass(frozen=True)
class Curves:
    """The plan's exact operating characteristic over `p`."""

    p: FloatArray
    pass_probability: FloatArray  # OC: P(PASS | p)
    fail_probability: FloatArray
    asn: FloatArray  # expected cuts to a decision
    sd: FloatArray  # standard deviation of the cuts to a decision


def curves(plan: Plan, p: npt.ArrayLike) -> Curves:
    """OC and ASN by dynamic programming: `mass[j, k]` is the probability, at p[j], of k failing
    cuts after n cuts on a path that has not stopped; each step moves it by one Bernoulli cut,
    then takes away (and counts) the mass of states where the plan decides."""
    ps = np.atleast_1d(np.asarray(p, np.float64))
    width = _states(plan)
    ks = np.arange(width)
    mass = np.zeros((len(ps), width))
    mass[:, 0] = 1.0
    q = (1.0 - ps)[:, None]
    pc = ps[:, None]
    passed = np.zeros(len(ps))
    failed = np.zeros(len(ps))
    moment1 = np.zeros(len(ps))
    moment2 = np.zeros(len(ps))
    for first in range(1, plan.max_cuts + 1, _CHUNK):
        ns = np.arange(first, min(first + _CHUNK, plan.max_cuts + 1))
        codes = plan.status(ns[:, None], ks[None, :])
        for n, row in zip(ns.tolist(), codes, strict=True):
            moved = mass * q
            moved[:, 1:] += mass[:, :-1] * pc
            stop_pass = moved @ (row == PASS_CODE)
            stop_fail = moved @ (row == FAIL_CODE)
            mass = moved * (row == CONTINUE_CODE)
            passed += stop_pass
            failed += stop_fail
            moment1 += n * (stop_pass + stop_fail)
            moment2 += n * n * (stop_pass + stop_fail)
    variance = np.maximum(moment2 - moment1**2, 0.0)
    return Curves(ps, passed, failed, moment1, np.sqrt(variance))


def _states(plan: Plan) -> int:
    """Failing-cut counts a path can hold before it stops: every continuing state's k is below
    the FAIL line at n = max_cuts - 1, plus the one step past it."""
    n = plan.max_cuts - 1
    top = (plan.upper - n * plan.pass_step) / (plan.fail_step - plan.pass_step)
    return int(min(plan.max_cuts, max(0, math.floor(top))) + 2)


def fixed_sample_size(p0: float, p1: float, alpha: float, beta: float) -> tuple[int, int]:
    """The smallest fixed-sample plan with the same risks: n cuts, FAIL when more than c fail,
    with P(FAIL | p0) <= alpha and P(PASS | p1) <= beta (scipy.stats.binom)."""
    from scipy import stats as sp  # here: every CLI command imports this module, few need scipy

    start = 1
    while True:
        n = np.arange(start, 2 * start + 1)
        c = sp.binom.ppf(1 - alpha, n, p0)  # smallest c with P(X <= c | p0) >= 1 - alpha
        ok = (sp.binom.sf(c, n, p0) <= alpha) & (sp.binom.cdf(c, n, p1) <= beta)
        if ok.any():
            i = int(np.argmax(ok))
            return int(n[i]), int(c[i])
        start *= 2
        if start > 1 << 32:
            raise ValueError("no fixed-sample plan found")


SCOPES = ("model", "drive")  # a plan over a model's drives pooled, or each drive
MAX_PLAN_CUTS = 1_000_000  # the config check runs the exact recursion (~20 us a cut)


def from_table(table: Table) -> tuple[Plan, str]:
    """[criteria.sequential]: a truncated SPRT and its scope (docs/campaign.md, "Sequential
    plans"); a plan that cannot keep its risks is refused with one line."""
    plan = Plan(
        float(table.number("p0", None, 0, 1)),
        float(table.number("p1", None, 0, 1)),
        float(table.number("alpha", 0.05, 0, 1)),
        float(table.number("beta", 0.1, 0, 1)),
        table.whole("max_cuts", None, 1, MAX_PLAN_CUTS),
    )
    scope: str = table.get("scope", str, SCOPES[0])
    if scope not in SCOPES:
        raise UserError(f"campaign: {table.where}.scope must be one of {', '.join(SCOPES)}")
    table.done()
    if problem := plan.problem():
        raise UserError(f"campaign: {table.where}: {problem}")
    return plan, scope
