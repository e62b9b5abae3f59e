"""The "Window of vulnerability" section: per model (its drives pooled, over every store given
and the central database alike: it reads the loaded `Dataset`), for each class timed from the
campaign's event, every cut's delay and outcome, the probit fit with its band, and t50 / t99
with their profile-likelihood intervals (rig/window/fit.py). Only campaigns run with
`[cut] strategy = "window"` have one; a report without them is unchanged."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from reports.load.dataset import Dataset, DriveData
from rig.config.tables import Table
from rig.errors import UserError
from rig.window import fit
from rig.window import spec as window_spec
from rig.window.spec import CONTEXT_KEY, TIME_AXES, WindowSpec

BAND_POINTS = 60


@dataclass
class ModelWindow:
    model: str
    cls: str
    after: str
    delays_ms: list[float]
    lost: list[bool]
    result: fit.WindowFit
    band_at_ms: list[float]
    band_low: list[float]
    band_high: list[float]

    def to_json(self) -> dict[str, Any]:
        r = self.result
        quantiles = {
            f"t{round(q.q * 100)}": {"ms": q.estimate_ms, "low_ms": q.low_ms, "high_ms": q.high_ms}
            for q in r.quantiles
        }
        return {
            "model": self.model,
            "class": self.cls,
            "after": self.after,
            "cuts": r.cuts,
            "losses": r.losses,
            "verdict": r.verdict,
            "summary": r.summary(),
            "mu_ln_ms": None if math.isnan(r.mu) else r.mu,
            "sigma_ln": None if math.isnan(r.sigma) else r.sigma,
            "gof_p": None if math.isnan(r.gof_p) else r.gof_p,
            "quantiles": quantiles,
            "cut_delays_ms": self.delays_ms,
            "cut_lost": self.lost,
        }


def window_spec_of(run: DriveData) -> WindowSpec | None:
    """The campaign's [cut.window], None for a campaign of another strategy."""
    cut = run.campaign.config.get("cut", {})
    if not isinstance(cut, dict) or cut.get("strategy") != "window":
        return None
    try:
        return window_spec.parse(Table("[cut.window]", dict(cut.get("window", {}))))
    except UserError:
        return None


def analyse(data: Dataset) -> list[ModelWindow]:
    """Every model's windows, per class timed from its campaigns' event."""
    cuts: dict[tuple[str, str, str], tuple[list[float], list[bool]]] = {}
    for run in data.runs:
        spec = window_spec_of(run)
        if spec is None:
            continue
        for cls, axis in TIME_AXES.items():
            if axis != spec.after:
                continue
            delays, lost = cuts.setdefault((run.model, cls, axis), ([], []))
            classed = WindowSpec(spec.after, spec.min_ms, spec.max_ms, cls, spec.quantile)
            for cut in run.cuts:
                if not cut.is_cut:
                    continue
                since = cut.flush_to_cut_ms if axis == "flush" else cut.ack_to_cut_ms
                context = None if since is None else {CONTEXT_KEY[axis]: since * 1e6}
                delay = window_spec.delay_ms(classed, context)
                if delay is None:
                    continue
                delays.append(delay)
                lost.append(window_spec.lost(classed, [(c, {}) for c in cut.failure_classes]))
    return [_model_window(k, *v) for k, v in sorted(cuts.items()) if v[0]]


def _model_window(key: tuple[str, str, str], delays: list[float], lost: list[bool]) -> ModelWindow:
    model, cls, after = key
    result = fit.fit(delays, lost)
    at = np.exp(np.linspace(math.log(min(delays)), math.log(max(delays)), BAND_POINTS))
    low = high = np.full(len(at), math.nan)
    if result.verdict == "window":
        low, high = fit.band(result, delays, lost, at)
    return ModelWindow(
        model, cls, after, delays, lost, result, at.tolist(), low.tolist(), high.tolist()
    )


def to_json(windows: list[ModelWindow]) -> list[dict[str, Any]]:
    return [w.to_json() for w in windows]
