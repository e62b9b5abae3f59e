"""Where the next cut goes: a Bayesian sequential design on a probit model of log delay.

Pure, no I/O (docs/decisions.md, "The design is Bayesian on a probit of log delay, aimed at
t99"). The model is that of rig/window/fit.py,
P(loss | d) = Phi((mu - ln d) / sigma). A grid posterior over (mu, ln sigma), flat over the
campaign's range, is updated after every cut; the next delay is the candidate (log-spaced over
[min_ms, max_ms]) that minimises the expected posterior variance of ln t_q (q = 0.99 by
default): a Bayesian c-optimal design for the quantile the report estimates. It needs no
separate phase for "no loss yet" or for complete separation (3pod's phases 1 and 2): the
posterior is defined from the first cut on.

Two guards against a wrong model. Every EXPLORE_EVERY-th cut is drawn log-uniform over the
whole range, so a window the model does not expect (a second window at long delays) can show
and the goodness-of-fit test has cuts everywhere. Once the cuts fail that test
(`fit.goodness_of_fit` below GOF_ALPHA) every remaining cut is log-uniform: the design stops
aiming at a threshold the cuts say is not there.
"""

from __future__ import annotations

import math
import random

import numpy as np
from scipy import special, stats

from rig.window import fit

EXPLORE_EVERY = 5  # every 5th cut log-uniform over the whole range
GOF_FROM = 30  # the goodness of fit is tested from this many cuts on ...
GOF_EVERY = 10  # ... every this many cuts, or 10 % more where that is more (a refit costs n)
CANDIDATES = 80
# The posterior grid must resolve ln t99 = mu + 2.33 sigma finer than 80 cuts do (posterior SD
# about 0.25 at sigma = 0.5): steps of 0.07 in mu and 8.5 % in sigma give steps of 0.1 in ln t99.
# A coarser grid (140 x 25: 23 % in sigma, 0.24 in ln t99) made the posterior overconfident and
# the design bunch its cuts.
MU_POINTS = 220
SIGMA_POINTS = 60
SIGMA_RANGE = (0.02, 3.0)


class WindowDesign:
    """The sequential design of one drive or one model (the caller serialises access)."""

    checks_fit = True  # test the goodness of fit as cuts come in (spread them if it fails)

    def __init__(self, min_ms: float, max_ms: float, q: float = 0.99) -> None:
        if not 0 < min_ms < max_ms:
            raise ValueError(f"window range must be 0 < min < max (got {min_ms}, {max_ms})")
        self.min_ms, self.max_ms, self.q = min_ms, max_ms, q
        lo, hi = math.log(min_ms), math.log(max_ms)
        mu = np.linspace(lo - 1, hi + 1, MU_POINTS)
        sigma = np.exp(
            np.linspace(math.log(SIGMA_RANGE[0]), math.log(SIGMA_RANGE[1]), SIGMA_POINTS)
        )
        self._mu, self._sigma = (a.ravel() for a in np.meshgrid(mu, sigma, indexing="ij"))
        self._target = self._mu + stats.norm.ppf(q) * self._sigma  # ln t_q at each grid point
        self._log_post = np.zeros(self._mu.size)
        self._candidates = np.linspace(lo, hi, CANDIDATES)
        z = (self._mu[None, :] - self._candidates[:, None]) / self._sigma[None, :]
        self._p_loss = special.ndtr(z)  # (candidate, grid point)
        self.delays_ms: list[float] = []
        self.lost: list[bool] = []
        self.spread = False  # the cuts failed the goodness of fit: log-uniform from now on
        self._next_check = GOF_FROM

    def observe(self, delay_ms: float, lost: bool) -> None:
        """One cut's response at the delay it really had (measured, not planned)."""
        x = math.log(min(max(delay_ms, self.min_ms / 10), self.max_ms * 10))
        z = (self._mu - x) / self._sigma
        self._log_post += special.log_ndtr(z if lost else -z)
        self.delays_ms.append(delay_ms)
        self.lost.append(lost)
        n = len(self.lost)
        if self.checks_fit and not self.spread and n >= self._next_check and any(self.lost):
            self._next_check = max(n + GOF_EVERY, int(n * 1.1))
            current = fit.fit(self.delays_ms, self.lost, qs=())
            self.spread = current.verdict == "poor_fit"

    def next_delay_ms(self, rng: random.Random) -> float:
        """The delay of the next cut."""
        if self.spread or len(self.lost) % EXPLORE_EVERY == 0:
            return self._log_uniform(rng)
        best = int(np.argmin(self.expected_variance()))
        half = (self._candidates[1] - self._candidates[0]) / 2
        x = self._candidates[best] + rng.uniform(-half, half)
        return float(min(max(math.exp(x), self.min_ms), self.max_ms))

    def posterior_ln_quantile(self) -> tuple[float, float]:
        """Posterior mean and standard deviation of ln t_q (the design's own belief)."""
        w = np.exp(self._log_post - self._log_post.max())
        w /= w.sum()
        mean = float((w * self._target).sum())
        return mean, math.sqrt(float((w * (self._target - mean) ** 2).sum()))

    def expected_variance(self) -> np.ndarray:
        """Expected posterior variance of ln t_q after one more cut at each candidate."""
        w = np.exp(self._log_post - self._log_post.max())
        w /= w.sum()
        t, t2 = self._target, self._target**2
        total = 0.0
        for weights in (self._p_loss * w, (1 - self._p_loss) * w):
            mass = np.maximum(weights.sum(axis=1), 1e-300)
            # sums, not matrix products: BLAS threads only spin on a shared machine
            total = total + (weights * t2).sum(axis=1) - (weights * t).sum(axis=1) ** 2 / mass
        return np.asarray(total)

    def _log_uniform(self, rng: random.Random) -> float:
        return math.exp(rng.uniform(math.log(self.min_ms), math.log(self.max_ms)))


class LogUniformDesign(WindowDesign):
    """Uniform placement on log delay (the baseline the bench compares with)."""

    checks_fit = False  # it spreads its cuts anyway

    def next_delay_ms(self, rng: random.Random) -> float:
        return self._log_uniform(rng)
