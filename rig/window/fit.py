"""The window of vulnerability estimated from cuts: a probit model of P(loss) against log delay.

Pure statistics, no I/O. Each cut is (delay in ms after the chosen event, whether it lost data
of the chosen class). The model is

    P(loss | d) = Phi((mu - ln d) / sigma),  sigma > 0

and t_q, the delay beyond which a share q of cuts lose nothing, solves P(loss | t_q) = 1 - q:
ln t_q = mu + z_q sigma (z_q = Phi^-1(q)); t50 = exp(mu), t99 = exp(mu + 2.326 sigma).

Intervals are profile-likelihood intervals (the set of ln t_q whose profile deviance is below
the chi-square(1) quantile): they stay defined under complete separation (a step-shaped
window: every cut below some delay lost, every one above it kept), where Wald intervals and
an unconstrained GLM fit break down. At tens of cuts the deviance is larger than chi-square(1)
says, so the limit is Bartlett-corrected: multiplied by the deviance's mean at the fitted t_q
in BOOTSTRAP parametric-bootstrap replicates of the same delays (never by less than 1).
sigma is bounded to [SIGMA_MIN, SIGMA_MAX] in ln units, so a step is a probit of sigma =
0.01 % of the delay.

The model assumes loss falls with delay; `gof_p` tests that (a deviance test against the model
with one loss probability per bin of delay), and a fit that fails it reports no threshold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize, special, stats

SIGMA_MIN = 1e-4
SIGMA_MAX = 5.0
LEVEL = 0.95
GOF_ALPHA = 0.01  # below this p-value the model does not describe the cuts
GOF_MIN_BIN = 8  # cuts per bin of the goodness-of-fit test
BOOTSTRAP = 100  # replicates of the Bartlett correction (mean deviance: SE about 0.14)
MAX_GAPS = 50  # more turns between loss and no loss than this: no separation to look for
_SIGMA_GRID = np.exp(np.linspace(math.log(SIGMA_MIN), math.log(SIGMA_MAX), 120))
_LN_SIGMA = (math.log(SIGMA_MIN), math.log(SIGMA_MAX))

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Quantile:
    """t_q in ms with its interval; an end the data cannot bound is None (open)."""

    q: float
    estimate_ms: float
    low_ms: float | None
    high_ms: float | None

    def bounded(self) -> bool:
        return self.low_ms is not None and self.high_ms is not None

    def covers(self, value_ms: float) -> bool:
        """A bounded interval that holds `value_ms` (an open one measures nothing)."""
        return self.bounded() and self.low_ms <= value_ms <= self.high_ms  # type: ignore[operator]

    def relative_half_width(self) -> float:
        """(high / low) ** 0.5 - 1: the +- share of the interval around its geometric centre."""
        if not self.bounded():
            return math.inf
        return math.sqrt(self.high_ms / self.low_ms) - 1  # type: ignore[operator]


@dataclass(frozen=True)
class WindowFit:
    """What the cuts say about one drive's (or model's) window, for one class."""

    cuts: int
    losses: int
    min_delay_ms: float
    max_delay_ms: float
    verdict: str  # "window" | "none" (no loss at any delay) | "poor_fit" | "too_few"
    mu: float = math.nan
    sigma: float = math.nan
    gof_p: float = math.nan
    quantiles: tuple[Quantile, ...] = ()

    def quantile(self, q: float) -> Quantile | None:
        return next((x for x in self.quantiles if x.q == q), None)

    def loss_probability(self, delays_ms: Floats) -> Floats:
        x = np.log(np.asarray(delays_ms, dtype=float))
        return np.asarray(stats.norm.cdf((self.mu - x) / self.sigma))

    def summary(self) -> str:
        """One line for a report or a progress line."""
        if self.verdict == "none":
            return f"no window found up to {self.max_delay_ms:g} ms in {self.cuts} cuts"
        if self.verdict == "too_few":
            return f"{self.losses} losses in {self.cuts} cuts: too few to fit"
        if self.verdict == "poor_fit":
            return (
                f"loss does not fall with delay as a window would (goodness of fit p = "
                f"{self.gof_p:.3g}): no threshold reported"
            )
        parts = [f"t{round(x.q * 100)} = {describe(x)}" for x in self.quantiles]
        return ", ".join(parts)


def describe(x: Quantile) -> str:
    low = "<" if x.low_ms is None else f"{x.low_ms:.3g}"
    high = ">" if x.high_ms is None else f"{x.high_ms:.3g}"
    return f"{x.estimate_ms:.3g} ms [{low}, {high}]"


@dataclass(frozen=True)
class CutsByDelay:
    """Cuts grouped by delay: at each distinct ln delay `x`, `lost` of `cuts` lost. Exact (the
    likelihood is a binomial per distinct delay), and the fit's cost grows with the distinct
    delays, not the cuts."""

    x: Floats
    lost: Floats
    cuts: Floats

    @classmethod
    def of(cls, delays_ms: Sequence[float], lost: Sequence[bool]) -> CutsByDelay:
        x, where = np.unique(np.log(np.asarray(delays_ms, dtype=float)), return_inverse=True)
        k = np.bincount(where, weights=np.asarray(lost, dtype=float), minlength=x.size).astype(
            float
        )
        n = np.bincount(where, minlength=x.size).astype(float)
        return cls(x, k, n)


def loglik(mu: Floats | float, sigma: Floats | float, c: CutsByDelay) -> Floats:
    """Log-likelihood of (mu, sigma) (broadcast over leading axes) for the cuts."""
    z = (np.asarray(mu)[..., None] - c.x) / np.asarray(sigma)[..., None]
    terms = c.lost * special.log_ndtr(z) + (c.cuts - c.lost) * special.log_ndtr(-z)
    return np.asarray(terms.sum(axis=-1))


def fit(
    delays_ms: Sequence[float], lost: Sequence[bool], qs: Sequence[float] = (0.5, 0.99)
) -> WindowFit:
    """The window's fit from cuts (delay ms, lost)."""
    return fit_cuts(CutsByDelay.of(delays_ms, lost), qs)


def fit_cuts(c: CutsByDelay, qs: Sequence[float] = (0.5, 0.99)) -> WindowFit:
    """The window's fit from cuts grouped by delay."""
    n, k = int(c.cuts.sum()), int(c.lost.sum())
    low = float(np.exp(c.x[0])) if n else math.nan
    high = float(np.exp(c.x[-1])) if n else math.nan
    if k == 0:
        return WindowFit(n, k, low, high, "none")
    if n < 3:
        return WindowFit(n, k, low, high, "too_few")
    mu, sigma, best = _mle(c)
    gof = goodness_of_fit(c, mu, sigma)
    if gof < GOF_ALPHA:
        return WindowFit(n, k, low, high, "poor_fit", mu, sigma, gof)
    scale = bartlett(c, mu, sigma, qs)
    quantiles = tuple(_quantile(c, q, mu, sigma, best, f) for q, f in zip(qs, scale, strict=True))
    return WindowFit(n, k, low, high, "window", mu, sigma, gof, quantiles)


def _mle(c: CutsByDelay) -> tuple[float, float, float]:
    """Maximum likelihood (mu, sigma) and its log-likelihood. No gradient method: under
    separation the optimum is a step (sigma on its bound) inside a gap between two cuts, which
    a coarse start never sees. So every mu between two neighbouring delays of which one lost
    and the other did not is tried (up to MAX_GAPS of them: more mean the cuts overlap, and a
    coarse grid finds the optimum) with the best sigma of a grid, then the best point is
    refined around it."""
    x, some_lost, some_kept = c.x, c.lost > 0, c.lost < c.cuts
    turn = (some_lost[:-1] & some_kept[1:]) | (some_kept[:-1] & some_lost[1:])
    turns = np.flatnonzero(turn)
    gaps = (x[turns] + x[turns + 1]) / 2 if len(turns) <= MAX_GAPS else np.empty(0)
    mus = np.concatenate([np.linspace(x[0] - 1, x[-1] + 1, 100), gaps])
    sigmas = _SIGMA_GRID[::3]
    grid = _grid(mus, sigmas, c)
    i, j = np.unravel_index(int(np.argmax(grid)), grid.shape)
    mu, ls, best = float(mus[i]), math.log(sigmas[j]), float(grid[i, j])
    dm, dl = 0.1, 0.3
    for _ in range(4):
        fine_mu = np.linspace(mu - dm, mu + dm, 21)
        fine_ls = np.clip(
            np.linspace(ls - dl, ls + dl, 21), math.log(SIGMA_MIN), math.log(SIGMA_MAX)
        )
        fine = _grid(fine_mu, np.exp(fine_ls), c)
        a, b = np.unravel_index(int(np.argmax(fine)), fine.shape)
        if fine[a, b] > best:
            mu, ls, best = float(fine_mu[a]), float(fine_ls[b]), float(fine[a, b])
        dm, dl = dm / 5, dl / 5
    return mu, math.exp(ls), best


def _grid(mus: Floats, sigmas: Floats, c: CutsByDelay) -> Floats:
    """loglik over the grid mus x sigmas, a few mus at a time (bounded memory at any n)."""
    step = max(1, 2_000_000 // max(1, len(sigmas) * len(c.x)))
    parts = [loglik(mus[i : i + step, None], sigmas[None, :], c) for i in range(0, len(mus), step)]
    return np.concatenate(parts, axis=0)


def profile(c: CutsByDelay, xq: Floats, zq: float) -> Floats:
    """Profile log-likelihood of ln t_q = xq: the best sigma (mu = xq - zq sigma) for each."""
    xq = np.atleast_1d(np.asarray(xq, dtype=float))
    mus = xq[:, None] - zq * _SIGMA_GRID[None, :]
    return np.asarray(loglik(mus, np.broadcast_to(_SIGMA_GRID, mus.shape), c).max(axis=1))


def bartlett(
    c: CutsByDelay, mu: float, sigma: float, qs: Sequence[float], replicates: int = BOOTSTRAP
) -> list[float]:
    """Per q, the mean profile deviance at the fitted ln t_q over parametric-bootstrap
    replicates (the same delays and cuts, losses drawn from the fitted curve, each refitted),
    at least 1: the factor of the interval's chi-square limit (a Bartlett correction). Seeded,
    so a report is the same at every run; a step (sigma near its bound) has no spread to
    correct and gets 1."""
    if not qs:
        return []
    p = special.ndtr((mu - c.x) / sigma)
    if np.all((p < 1e-12) | (p > 1 - 1e-12)):
        return [1.0] * len(qs)  # a step: every replicate is the cuts themselves
    draws = np.random.default_rng(0).binomial(c.cuts.astype(np.int64), p, (replicates, c.x.size))
    k = draws.astype(float)
    tops = _bootstrap_mle(c, k)
    factors = []
    for q in qs:
        zq = float(stats.norm.ppf(q))
        mus = mu + zq * sigma - zq * _SIGMA_GRID
        at_truth = _grouped_loglik(c, k, mus, _SIGMA_GRID).max(axis=1)
        deviance = 2 * np.maximum(tops - at_truth, 0.0)
        factors.append(max(1.0, float(deviance.mean())))
    return factors


def _grouped_loglik(c: CutsByDelay, k: Floats, mus: Floats, sigmas: Floats) -> Floats:
    """Log-likelihood of each replicate's losses `k` (replicate, delay) at the points (mus[i],
    sigmas[i]): two matrix products, the curve's terms shared by every replicate."""
    z = (mus[None, :] - c.x[:, None]) / sigmas[None, :]
    return np.asarray(k @ special.log_ndtr(z) + (c.cuts - k) @ special.log_ndtr(-z))


def _bootstrap_mle(c: CutsByDelay, k: Floats) -> Floats:
    """Each replicate's maximum log-likelihood: a grid shared by all, then a local grid around
    each replicate's best point, narrowed a few times (as `_mle`, for all replicates at once)."""
    mesh = np.meshgrid(
        np.linspace(c.x[0] - 1, c.x[-1] + 1, 120), np.log(_SIGMA_GRID[::3]), indexing="ij"
    )
    m, s = mesh[0].ravel(), mesh[1].ravel()
    grid = _grouped_loglik(c, k, m, np.exp(s))
    best = grid.argmax(axis=1)
    mu, ls, top = m[best], s[best], grid[np.arange(len(k)), best]
    step = np.linspace(-1, 1, 11)
    dm, dl = 0.15, 0.4
    for _ in range(6):
        fm = mu[:, None, None] + dm * step[None, :, None]
        fl = np.clip(ls[:, None, None] + dl * step[None, None, :], *_LN_SIGMA)
        fm, fl = (np.broadcast_to(a, (len(k), 11, 11)).reshape(len(k), -1) for a in (fm, fl))
        z = (fm[:, :, None] - c.x) / np.exp(fl)[:, :, None]
        # log of ndtr, floored: 3 times cheaper than log_ndtr, and exact enough near a maximum
        lost, kept = (np.log(np.maximum(special.ndtr(v), 1e-300)) for v in (z, -z))
        ll = (k[:, None, :] * lost + (c.cuts - k)[:, None, :] * kept).sum(axis=2)
        j = ll.argmax(axis=1)
        better = ll[np.arange(len(k)), j] > top
        mu = np.where(better, fm[np.arange(len(k)), j], mu)
        ls = np.where(better, fl[np.arange(len(k)), j], ls)
        top = np.maximum(top, ll[np.arange(len(k)), j])
        dm, dl = dm / 3, dl / 3
    return np.asarray(top)


def _quantile(
    c: CutsByDelay, q: float, mu: float, sigma: float, best: float, scale: float = 1.0
) -> Quantile:
    zq = float(stats.norm.ppf(q))
    centre = mu + zq * sigma
    # allowed drop of the log-likelihood, Bartlett-corrected by `scale`
    limit = scale * float(stats.chi2.ppf(LEVEL, 1)) / 2
    top = max(best, float(profile(c, np.array([centre]), zq)[0]))

    def excess(v: float) -> float:
        return top - float(profile(c, np.array([v]), zq)[0]) - limit

    low = _edge(excess, centre, c.x[0] - 3, -1)
    high = _edge(excess, centre, c.x[-1] + 3, +1)
    return Quantile(
        q,
        math.exp(centre),
        None if low is None else math.exp(low),
        None if high is None else math.exp(high),
    )


def _edge(
    excess: Callable[[float], float], centre: float, stop: float, direction: int
) -> float | None:
    """Where the profile deviance crosses its limit, walking from `centre` towards `stop`
    (None when it never does: the interval is open on that side)."""
    step, here = 0.02, centre
    while (stop - here) * direction > 0:
        there = here + direction * step
        if excess(there) > 0:
            return float(optimize.brentq(excess, min(here, there), max(here, there), xtol=1e-4))
        here, step = there, min(step * 1.5, 0.5)
    return None


def goodness_of_fit(c: CutsByDelay, mu: float, sigma: float) -> float:
    """p-value of the fitted probit against one loss probability per bin of delay (bins of
    about equal counts, at least GOF_MIN_BIN cuts each; the cuts at one delay share a bin):
    deviance on bins - 2 degrees of freedom. 1.0 when there are too few cuts for three bins."""
    total = int(c.cuts.sum())
    bins = min(10, total // GOF_MIN_BIN)
    if bins < 3:
        return 1.0
    # the bin of each delay: that of its last cut in delay order, bins sized as array_split's
    sizes = np.full(bins, total // bins)
    sizes[: total % bins] += 1
    which = np.searchsorted(np.cumsum(sizes), np.cumsum(c.cuts) - 1, side="right")
    n = np.bincount(which, weights=c.cuts, minlength=bins)
    k = np.bincount(which, weights=c.lost, minlength=bins)
    n, k = n[n > 0], k[n > 0]
    share = k / n
    with np.errstate(divide="ignore", invalid="ignore"):
        saturated = np.where(k > 0, k * np.log(share), 0.0) + np.where(
            n > k, (n - k) * np.log1p(-share), 0.0
        )
    deviance = max(0.0, 2 * (float(saturated.sum()) - float(loglik(mu, sigma, c))))
    return float(stats.chi2.sf(deviance, bins - 2))


def band(
    fitted: WindowFit, delays_ms: Sequence[float], lost: Sequence[bool], at_ms: Floats
) -> tuple[Floats, Floats]:
    """Pointwise band of P(loss) at `at_ms`: the range of the curve over every (mu, sigma)
    inside the 95 % joint likelihood region (chi-square(2) of the deviance)."""
    c = CutsByDelay.of(delays_ms, lost)
    mus = np.linspace(c.x[0] - 2, c.x[-1] + 2, 160)
    grid = _grid(mus, _SIGMA_GRID, c)
    best = max(float(grid.max()), float(loglik(fitted.mu, fitted.sigma, c)))
    inside = grid >= best - float(stats.chi2.ppf(LEVEL, 2)) / 2
    m, s = np.meshgrid(mus, _SIGMA_GRID, indexing="ij")
    m, s = m[inside], s[inside]
    curves = stats.norm.cdf((m[:, None] - np.log(np.asarray(at_ms))[None, :]) / s[:, None])
    return curves.min(axis=0), curves.max(axis=0)
