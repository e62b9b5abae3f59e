"""HTML of the "Window of vulnerability" section (reports/analysis/window.py): per model and class,
the loss probability against delay on a log axis with the fitted probit curve, its 95 % band and
every cut as a tick at 0 (kept) or 1 (lost), and t50 / t99 with their intervals."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

import numpy as np
from markupsafe import Markup

from reports.analysis.window import ModelWindow
from reports.render import svg
from reports.render.templating import ENV
from rig.verdict import rule as verdicts
from rig.window.fit import describe

# room for the y-axis label at the left, a last decade's label ("10000") at the right, and the
# x-axis label and the legend below
W, H, LEFT, RIGHT, TOP, BOTTOM = 600, 290, 64, 34, 12, 76
KEPT, LOST = svg.verdict_fill(verdicts.PASS), svg.verdict_fill(verdicts.FAIL)
CURVE, BAND = "#08519c", "#c6dbef"


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
        parts.append(
            f'<text class="tick-label" x="{px:.1f}" y="{y(0) + 16:.1f}" font-size="10"'
            f' text-anchor="middle">{10.0**decade:g}</text>'
        )
    for p in (0.0, 0.5, 1.0):
        parts.append(
            f'<text class="tick-label" x="{LEFT - 6}" y="{y(p) + 3:.1f}" font-size="10"'
            f' text-anchor="end">{p:g}</text>'
        )
    middle = (y(0) + y(1)) / 2
    parts.append(
        f'<text class="axis-label" x="16" y="{middle:.1f}" font-size="11" text-anchor="middle"'
        f' transform="rotate(-90 16 {middle:.1f})">P(loss: {escape(w.cls)})</text>'
        f'<text class="axis-label" x="{(LEFT + W - RIGHT) / 2:.1f}" y="{y(0) + 32:.1f}"'
        f' font-size="11" text-anchor="middle">ms after the {escape(w.after)} (log)</text>'
    )
    fitted = w.result.verdict == "window"
    if fitted:
        parts += _fit(w, x, y)
    for delay, lost in zip(w.delays_ms, w.lost, strict=True):
        py = y(1.0 if lost else 0.0)
        parts.append(
            f'<line class="cut" x1="{x(delay):.1f}" y1="{py - 4:.1f}" x2="{x(delay):.1f}" '
            f'y2="{py + 4:.1f}" stroke="{LOST if lost else KEPT}" stroke-width="2"'
            ' stroke-opacity="0.8"/>'
        )
    parts += _quantile_marks(w, x, 10.0**lo, 10.0**hi)
    parts += _legend(fitted, y(0) + 48)
    title = f"{w.model}: {w.cls}, delay after the {w.after} (ms, log)"
    return (
        f'<figure><svg class="window-chart" xmlns="http://www.w3.org/2000/svg" width="{W}"'
        f' height="{H}">{"".join(parts)}</svg><figcaption>{escape(title)}</figcaption></figure>'
    )


def _fit(w: ModelWindow, x: Callable[[float], float], y: Callable[[float], float]) -> list[str]:
    """The fitted probit curve and its 95 % band."""
    band = [(x(a), y(h)) for a, h in zip(w.band_at_ms, w.band_high, strict=True)]
    band += [(x(a), y(v)) for a, v in reversed(list(zip(w.band_at_ms, w.band_low, strict=True)))]
    points = " ".join(f"{a:.1f},{b:.1f}" for a, b in band)
    at = np.asarray(w.band_at_ms)
    curve = w.result.loss_probability(at)
    line = " ".join(f"{x(a):.1f},{y(p):.1f}" for a, p in zip(at, curve, strict=True))
    return [
        f'<polygon points="{points}" fill="{BAND}" stroke="none"/>',
        f'<polyline points="{line}" fill="none" stroke="{CURVE}" stroke-width="2"/>',
    ]


def _quantile_marks(
    w: ModelWindow, x: Callable[[float], float], low_ms: float, high_ms: float
) -> list[str]:
    """t50 and t99 as dashed vertical lines with their values (where the fit gives them)."""
    marks = []
    for q, name, row in ((0.5, "t50", 0), (0.99, "t99", 1)):
        found = w.result.quantile(q) if w.result.verdict == "window" else None
        if found is None or not low_ms <= found.estimate_ms <= high_ms:
            continue
        px = x(found.estimate_ms)
        marks.append(
            f'<g class="t-mark" data-q="{name}"><line x1="{px:.1f}" x2="{px:.1f}" y1="{TOP}"'
            f' y2="{H - BOTTOM}" stroke="#333" stroke-dasharray="5 3"/><text x="{px + 3:.1f}"'
            f' y="{TOP + 10 + 12 * row}" font-size="10" stroke="#fff" stroke-width="3"'
            f' paint-order="stroke">{name} {found.estimate_ms:.3g} ms</text></g>'
        )
    return marks


def _legend(fitted: bool, top: float) -> list[str]:
    items = [("line", KEPT, "cut, nothing lost (at 0)"), ("line", LOST, "cut that lost (at 1)")]
    if fitted:
        items += [("line", CURVE, "probit fit"), ("rect", BAND, "95 % band")]
    out, left = ['<g class="legend">'], float(LEFT)
    for kind, colour, label in items:
        if kind == "line":
            out.append(
                f'<line x1="{left:.0f}" x2="{left + 12:.0f}" y1="{top:.0f}" y2="{top:.0f}"'
                f' stroke="{colour}" stroke-width="3"/>'
            )
        else:
            out.append(
                f'<rect x="{left:.0f}" y="{top - 5:.0f}" width="12" height="10" fill="{colour}"/>'
            )
        out.append(f'<text x="{left + 16:.0f}" y="{top + 4:.0f}" font-size="10">{label}</text>')
        left += 24 + 5.4 * len(label)
    return [*out, "</g>"]
