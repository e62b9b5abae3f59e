"""Small inline-SVG charts (no JavaScript, no network): axes with linear or log scales, lines,
step curves, bands, points, bars and a legend. Enough for a report; nothing more."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from reports.render import deferred

# Series that are not verdicts (drives, classes, delays): no green, red or orange, which mean a
# verdict on every chart of the report and the dashboard (VERDICT_FILL)
PALETTE = (
    "#1f77b4",
    "#9467bd",
    "#8c564b",
    "#17becf",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#393b79",
)

# A verdict's colour, the same in every chart and on the dashboard; the lightness alone tells
# them apart in grey (relative luminance DEAD 0.02 < FAIL 0.10 < PASS 0.43 < NOT YET 0.75), and
# FAIL and DEAD marks are hatched as well (HATCH)
VERDICT_FILL = {
    "PASS": "#7fbf7b",
    "NOT YET DEMONSTRATED": "#fee08b",
    "FAIL": "#b2182b",
    "DEAD": "#252525",
}
HATCHED = ("FAIL", "DEAD")
HATCH_ID = "verdict-hatch"
HATCH = (
    f'<defs><pattern id="{HATCH_ID}" width="6" height="6" patternUnits="userSpaceOnUse"'
    ' patternTransform="rotate(45)"><rect width="2" height="6" fill="#fff"'
    ' fill-opacity="0.6"/></pattern></defs>'
)


def verdict_fill(verdict: str) -> str:
    """The fill of a mark that stands for a verdict (PASS, FAIL, ...; grey for any other)."""
    return VERDICT_FILL.get(verdict, "#999")


CHUNK = 8192  # marks formatted at a time
Values = Sequence[float] | npt.NDArray[Any]


class Later:
    """Values a chart draws, made when the page is written (`make()`) and let go after: a
    chart of a mark per cut holds none of them from its drawing to the page's write.
    `length`: how many values `make` gives, known before."""

    def __init__(self, make: Callable[[], Any], length: int) -> None:
        self.make, self.length = make, length

    def __len__(self) -> int:
        return self.length


def _chunks(values: Values | Iterable[float]) -> Iterator[list[float]]:
    """Python floats, CHUNK at a time, of a numpy array, a sequence or any iterable."""
    if hasattr(values, "tolist"):
        for start in range(0, len(values), CHUNK):  # type: ignore[arg-type]
            yield values[start : start + CHUNK].tolist()  # type: ignore[index]
        return
    it = iter(values)
    while chunk := [float(v) for v in itertools.islice(it, CHUNK)]:
        yield chunk


def _same_length(xs: Values, ys: Values) -> None:
    if len(xs) != len(ys):
        raise ValueError("points: xs and ys differ in length")


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-2:
        exponent = math.floor(math.log10(abs(v)))
        mantissa = v / 10**exponent
        return f"1e{exponent}" if abs(mantissa - 1) < 1e-9 else f"{v:.0e}"
    return f"{v:g}"


class Axis:
    def __init__(self, low: float, high: float, log: bool, start: float, end: float) -> None:
        if log:
            low, high = max(low, 1e-12), max(high, low * 10)
            low, high = 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))
        elif high <= low:
            high = low + 1.0
        self.low, self.high, self.log, self.start, self.end = low, high, log, start, end

    def __call__(self, v: float) -> float:
        if self.log:
            v = min(max(v, self.low), self.high)
            f = (math.log10(v) - math.log10(self.low)) / (
                math.log10(self.high) - math.log10(self.low)
            )
        else:
            f = (v - self.low) / (self.high - self.low)
        return self.start + f * (self.end - self.start)

    def many(self, values: Values) -> list[float]:
        """`self(v)` of each value, computed over the whole list at once (numpy: the same
        IEEE operations in the same order, so the same floats; a chart of a million cuts draws
        a mark per cut: docs/decisions.md, "Charts: one colour per verdict, no invented values,
        the same floats")."""
        v = np.asarray(values, dtype=np.float64)
        if self.log:
            v = np.minimum(np.maximum(v, self.low), self.high)
            # math.log10 per value: numpy's SIMD log10 differs from libm's in the last bit
            logs = np.fromiter(map(math.log10, v.tolist()), dtype=np.float64, count=len(v))
            low = math.log10(self.low)
            f = (logs - low) / (math.log10(self.high) - low)
        else:
            f = (v - self.low) / (self.high - self.low)
        pixels: list[float] = (self.start + f * (self.end - self.start)).tolist()
        return pixels

    def ticks(self) -> list[float]:
        if self.log:
            first, last = round(math.log10(self.low)), round(math.log10(self.high))
            step = max(1, (last - first) // 6)
            return [10.0**e for e in range(first, last + 1, step)]
        span = self.high - self.low
        raw = span / 5
        magnitude = 10 ** math.floor(math.log10(raw))
        step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
        first = math.ceil(self.low / step) * step
        return [first + i * step for i in range(int((self.high - first) / step + 1e-9) + 1)]


class Chart:
    """One plot area with x and y axes; draw calls append SVG elements."""

    def __init__(
        self,
        title: str,
        x: tuple[float, float],
        y: tuple[float, float],
        xlabel: str,
        ylabel: str,
        xlog: bool = False,
        ylog: bool = False,
        width: int = 640,
        height: int = 300,
    ) -> None:
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = 70, 20, 30, 45
        self.x = Axis(x[0], x[1], xlog, self.left, width - self.right)
        self.y = Axis(y[0], y[1], ylog, height - self.bottom, self.top)
        self.title, self.xlabel, self.ylabel = title, xlabel, ylabel
        self.parts: list[str] = []
        self.legend_items: list[tuple[str, str]] = []
        self.categories: list[tuple[float, str]] = []  # x labels replacing numeric ticks

    def line(self, xs: Sequence[float], ys: Sequence[float], stroke: str, dash: str = "") -> None:
        points = " ".join(f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in zip(xs, ys, strict=True))
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(
            f'<polyline class="series" points="{points}" fill="none" stroke="{stroke}"'
            f' stroke-width="2"{extra}/>'
        )

    def step(self, xs: Sequence[float], ys: Sequence[float], stroke: str, dash: str = "") -> None:
        """A right-continuous step function through (xs[i], ys[i])."""
        sx: list[float] = []
        sy: list[float] = []
        for i, (a, b) in enumerate(zip(xs, ys, strict=True)):
            if i:
                sx.append(a)
                sy.append(sy[-1])
            sx.append(a)
            sy.append(b)
        self.line(sx, sy, stroke, dash)

    def band(
        self, xs: Sequence[float], lows: Sequence[float], highs: Sequence[float], fill: str
    ) -> None:
        top = [f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in zip(xs, highs, strict=True)]
        bottom = [f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in zip(xs, lows, strict=True)]
        self.parts.append(
            f'<polygon points="{" ".join(top + bottom[::-1])}" fill="{fill}" fill-opacity="0.15"'
            ' stroke="none"/>'
        )

    def points(self, xs: Values, ys: Values, fill: str, label: str = "", r: float = 3) -> None:
        """A circle per point; made when the page is written (a chart may have a mark per cut)."""
        _same_length(xs, ys)
        self.point_pieces(lambda: [(xs, ys)], fill, label, r)

    def point_pieces(
        self,
        pieces: Callable[[], Iterable[tuple[Values, Values]]],
        fill: str,
        label: str = "",
        r: float = 3,
    ) -> None:
        """Circles as `points` draws them, of the points `pieces()` gives (xs, ys) a piece at a
        time when the page is written: none of them held before."""
        tip = f"<title>{html.escape(label)}</title>" if label else ""
        x, y = self.x, self.y

        def marks() -> Iterator[str]:
            for xs, ys in pieces():
                _same_length(xs, ys)
                for start in range(0, len(xs), CHUNK):
                    yield "".join(
                        f'<circle class="mark" cx="{a:.1f}" cy="{b:.1f}" r="{r}"'
                        f' fill="{fill}" fill-opacity="0.7">{tip}</circle>'
                        for a, b in zip(
                            x.many(xs[start : start + CHUNK]),
                            y.many(ys[start : start + CHUNK]),
                            strict=True,
                        )
                    )

        self.parts.append(deferred.defer(marks))

    def cdf(
        self,
        ordered: Values | Iterable[float] | Later,
        stroke: str,
        counts: Sequence[int] | None = None,
        dash: str = "",
    ) -> None:
        """The empirical CDF of sorted values as a step line, each value up by its count / n
        (`counts`: how many times each distinct value was seen; None: once each),
        as `step` draws it from ([v0, *values], [0, 1/n, ..., 1]); made when the page is
        written (`ordered` a `Later`: the values too)."""
        x, y = self.x, self.y
        n = len(ordered) if counts is None else sum(counts)  # type: ignore[arg-type]

        def points() -> Iterator[str]:
            below = 0
            times = iter(counts) if counts is not None else itertools.repeat(1)
            values_of = ordered.make() if isinstance(ordered, Later) else ordered
            for values in _chunks(values_of):
                if not below:
                    yield f'<polyline class="series" points="{x(values[0]):.1f},{y(0.0):.1f}'
                # the running counts below and at each value, then every pixel at once
                at = list(itertools.accumulate(itertools.islice(times, len(values)), initial=below))
                ys = y.many([k / n for k in at])
                yield "".join(
                    f" {xv:.1f},{low:.1f} {xv:.1f},{high:.1f}"
                    for xv, low, high in zip(x.many(values), ys, ys[1:], strict=False)
                )
                below = at[-1]
            extra = f' stroke-dasharray="{dash}"' if dash else ""
            yield f'" fill="none" stroke="{stroke}" stroke-width="2"{extra}/>'

        self.parts.append(deferred.defer(points))

    def bar(
        self, x0: float, x1: float, y: float, fill: str, label: str = "", verdict: str = ""
    ) -> None:
        """A bar from the axis up to y; `verdict`: it stands for one (its fill is the verdict's
        colour, FAIL and DEAD hatched over it; `data-verdict` names it)."""
        left, right = self.x(x0), self.x(x1)
        top, base = self.y(y), self.y(self.y.low)
        tip = f"<title>{html.escape(label)}</title>" if label else ""
        box = (
            f'x="{left:.1f}" y="{top:.1f}" width="{max(right - left, 1):.1f}"'
            f' height="{max(base - top, 0):.1f}"'
        )
        said = f' data-verdict="{html.escape(verdict)}"' if verdict else ""
        self.parts.append(f'<rect class="mark"{said} {box} fill="{fill}">{tip}</rect>')
        if verdict in HATCHED:
            self.parts.append(f'<rect class="hatch" {box} fill="url(#{HATCH_ID})"/>')

    def note(self, x: float, y: float, text: str, label: str = "") -> None:
        """A short text standing for a value instead of a mark (a zero on a log axis, which
        has no place on it), just above (x, y), haloed to stay legible over a bar."""
        tip = f"<title>{html.escape(label)}</title>" if label else ""
        self.parts.append(
            f'<text class="note-mark" x="{self.x(x):.1f}" y="{self.y(y) - 6:.1f}" font-size="11"'
            ' text-anchor="middle" stroke="#fff" stroke-width="3" paint-order="stroke">'
            f"{html.escape(text)}{tip}</text>"
        )

    def hline(self, y: float, stroke: str, label: str) -> None:
        """A dashed line across the plot, its label at the right end (a chart with marks there
        leaves that end free: `bounds_chart` keeps an empty slot)."""
        yy = self.y(y)
        self.parts.append(
            f'<line x1="{self.left}" x2="{self.width - self.right}" y1="{yy:.1f}" y2="{yy:.1f}"'
            f' stroke="{stroke}" stroke-dasharray="6 4"/>'
            f'<text class="line-label" x="{self.width - self.right - 4}" y="{yy - 4:.1f}"'
            f' font-size="11" text-anchor="end" fill="{stroke}">{html.escape(label)}</text>'
        )

    def vline(self, x: float, stroke: str, label: str) -> None:
        xx = self.x(x)
        self.parts.append(
            f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{self.top}" y2="{self.height - self.bottom}"'
            f' stroke="{stroke}" stroke-dasharray="6 4"/>'
            f'<text x="{xx + 4:.1f}" y="{self.top + 12}" font-size="11" fill="{stroke}">'
            f"{html.escape(label)}</text>"
        )

    def category(self, x: float, label: str) -> None:
        self.categories.append((x, label))

    def legend(self, label: str, fill: str) -> None:
        self.legend_items.append((label, fill))

    def _legend_rows(self) -> list[list[tuple[float, str, str]]]:
        """Legend entries laid out in rows under the plot, wrapped at the chart's width."""
        rows: list[list[tuple[float, str, str]]] = []
        x = float(self.width)
        for label, fill in self.legend_items:
            size = 24 + 6.3 * len(label)
            if x + size > self.width - self.right:
                rows.append([])
                x = float(self.left)
            rows[-1].append((x, label, fill))
            x += size
        return rows

    def render(self) -> str:
        legend = self._legend_rows()
        w, h = self.width, self.height
        full = h + (16 * len(legend) + 6 if legend else 0)
        base, left = h - self.bottom, self.left
        out = [
            f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{full}"'
            f' viewBox="0 0 {w} {full}" role="img" aria-label="{html.escape(self.title)}">',
            HATCH,
            f'<rect x="0" y="0" width="{w}" height="{full}" fill="#fff"/>',
            f'<text x="{left}" y="18" font-size="13" font-weight="bold">'
            f"{html.escape(self.title)}</text>",
        ]
        for t in [] if self.categories else self.x.ticks():
            xx = self.x(t)
            out.append(
                f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{self.top}" y2="{base}" stroke="#eee"/>'
                f'<text x="{xx:.1f}" y="{base + 14}" font-size="10" text-anchor="middle">'
                f"{_fmt(t)}</text>"
            )
        for t in self.y.ticks():
            yy = self.y(t)
            out.append(
                f'<line x1="{left}" x2="{w - self.right}" y1="{yy:.1f}" y2="{yy:.1f}"'
                f' stroke="#eee"/><text x="{left - 5}" y="{yy + 3:.1f}" font-size="10"'
                f' text-anchor="end">{_fmt(t)}</text>'
            )
        out.append(
            f'<line x1="{left}" x2="{w - self.right}" y1="{base}" y2="{base}" stroke="#444"/>'
            f'<line x1="{left}" x2="{left}" y1="{self.top}" y2="{base}" stroke="#444"/>'
            f'<text x="{(left + w - self.right) / 2}" y="{h - 8}" font-size="11"'
            f' text-anchor="middle">{html.escape(self.xlabel)}</text>'
            f'<text x="14" y="{(self.top + base) / 2}" font-size="11" text-anchor="middle"'
            f' transform="rotate(-90 14 {(self.top + base) / 2})">{html.escape(self.ylabel)}</text>'
        )
        for x, label in self.categories:
            out.append(
                f'<text x="{self.x(x):.1f}" y="{base + 14}" font-size="11" text-anchor="middle">'
                f"{html.escape(label[:24])}</text>"
            )
        out.extend(self.parts)
        for row, entries in enumerate(legend):
            y = h + 6 + 16 * row
            for x, label, fill in entries:
                out.append(
                    f'<rect x="{x:.0f}" y="{y - 4}" width="10" height="10" fill="{fill}"/>'
                    f'<text x="{x + 14:.0f}" y="{y + 5}" font-size="11">{html.escape(label)}</text>'
                )
        out.append("</svg>")
        return "".join(out)


def no_data(title: str, why: str, width: int = 640, height: int = 60) -> str:
    """A placeholder that says plainly what is missing (instead of an empty or broken plot)."""
    return (
        f'<svg class="chart nodata" xmlns="http://www.w3.org/2000/svg" width="{width}"'
        f' height="{height}" role="img" aria-label="{html.escape(title)}: no data">'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fafafa" stroke="#ddd"/>'
        f'<text x="10" y="24" font-size="13" font-weight="bold">{html.escape(title)}</text>'
        f'<text x="10" y="44" font-size="12" fill="#666">{html.escape(why)}</text></svg>'
    )
