"""HTML of the "Window of vulnerability" section (reports/window.py): per model and class, the
loss probability against delay on a log axis with the fitted probit curve, its 95 % band and
every cut as a tick at 0 (kept) or 1 (lost), and t50 / t99 with their intervals."""

from __future__ import annotations

import math
from html import escape

import numpy as np
from markupsafe import Markup

from reports.templating import ENV
from reports.window import ModelWindow
from rig.window.fit import describe

W, H, LEFT, RIGHT, TOP, BOTTOM = 560, 240, 48, 12, 12, 36


def window_section(windows: list[ModelWindow]) -> str:
    """The section, or "" when no campaign used the window strategy (the page is unchanged)."""
    charts = Markup("".join(_chart(w) for w in windows if w.result.cuts))
    template = ENV.get_template("window.html.j2")
    return template.render(windows=windows, quantile=_quantile, charts=charts)


def _quantile(w: ModelWindow, q: float) -> str:
    found = w.result.quantile(q)
    return "—" if found is None else describe(found)


def _chart(w: ModelWindow) -> str:
    lo = math.log10(min(w.delays_ms))
    hi = max(math.log10(max(w.delays_ms)), lo + 1)
    lo, hi = math.floor(lo), math.ceil(hi)

    def x(ms: float) -> float:
        return LEFT + (math.log10(ms) - lo) / (hi - lo) * (W - LEFT - RIGHT)

    def y(p: float) -> float:
        return TOP + (1 - p) * (H - TOP - BOTTOM)

    parts = [f'<line x1="{LEFT}" y1="{y(0)}" x2="{W - RIGHT}" y2="{y(0)}" stroke="#888"/>']
    for decade in range(lo, hi + 1):
        px = x(10.0**decade)
        parts.append(f'<line x1="{px:.1f}" y1="{y(0)}" x2="{px:.1f}" y2="{y(1)}" stroke="#eee"/>')
        parts.append(f'<text x="{px:.1f}" y="{H - 18}" font-size="10" text-anchor="middle">')
        parts.append(f"{10.0**decade:g}</text>")
    for p in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{LEFT - 6}" y="{y(p) + 3:.1f}" font-size="10" text-anchor="end">')
        parts.append(f"{p:g}</text>")
    if w.result.verdict == "window":
        band = [(x(a), y(h)) for a, h in zip(w.band_at_ms, w.band_high, strict=True)]
        band += [
            (x(a), y(v)) for a, v in reversed(list(zip(w.band_at_ms, w.band_low, strict=True)))
        ]
        points = " ".join(f"{a:.1f},{b:.1f}" for a, b in band)
        parts.append(f'<polygon points="{points}" fill="#c6dbef" stroke="none"/>')
        at = np.asarray(w.band_at_ms)
        curve = w.result.loss_probability(at)
        line = " ".join(f"{x(a):.1f},{y(p):.1f}" for a, p in zip(at, curve, strict=True))
        parts.append(f'<polyline points="{line}" fill="none" stroke="#08519c"/>')
    for delay, lost in zip(w.delays_ms, w.lost, strict=True):
        py = y(1.0 if lost else 0.0)
        colour = "#cb181d" if lost else "#238b45"
        parts.append(
            f'<line x1="{x(delay):.1f}" y1="{py - 4:.1f}" x2="{x(delay):.1f}" '
            f'y2="{py + 4:.1f}" stroke="{colour}" stroke-opacity="0.5"/>'
        )
    title = f"{w.model}: {w.cls}, delay after the {w.after} (ms, log)"
    return (
        f'<figure><svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}">'
        f"{''.join(parts)}</svg><figcaption>{escape(title)}</figcaption></figure>"
    )
