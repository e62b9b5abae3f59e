"""`Axis.many` (the marks of a chart of a million cuts at once: docs/decisions.md, "Charts: one
colour per verdict, no invented values, the same floats") gives each pixel exactly as
`Axis.__call__` does, so the page's bytes do not change."""

from __future__ import annotations

import math
import random

import numpy as np

from reports.render import deferred
from reports.render.svg import Axis, Chart


def _values(rng: random.Random, low: float, high: float) -> list[float]:
    inside = [rng.uniform(low, high) for _ in range(3000)]
    spread = [10 ** rng.uniform(-15, 8) * rng.choice((1, -1)) for _ in range(3000)]
    return inside + spread + [0.0, low, high, -0.0, 1e-300, 1e300, math.nan]


def _same(a: list[float], b: list[float]) -> bool:
    return all((x == y) or (x != x and y != y) for x, y in zip(a, b, strict=True))


def test_many_is_each_value_through_the_axis() -> None:
    rng = random.Random(431)
    for log in (False, True):
        for low, high in ((0.01, 900.0), (3.0, 3.0), (1e-6, 1e6), (0.0, 1.0)):
            axis = Axis(low, high, log, 70.0, 620.0)
            values = _values(rng, low, high)
            if not log:
                values = [v for v in values if abs(v) < 1e300]  # (inf - inf: nan either way)
            assert _same(axis.many(values), [axis(v) for v in values])
            assert _same(axis.many(np.array(values)), [axis(v) for v in values])


def test_a_charts_marks_and_curve_are_the_per_value_text() -> None:
    rng = random.Random(7)
    xs = sorted(rng.uniform(1, 5000) for _ in range(20000))
    ys = [rng.uniform(0, 1) for _ in xs]
    chart = Chart("t", (1, 5000), (0, 1), "x", "y", xlog=True)
    chart.points(np.array(xs), ys, "#000")
    counts = [rng.randint(1, 4) for _ in xs]
    chart.cdf(xs, "#111", counts)
    marks, curve = (deferred.join(p) for p in chart.parts[-2:])
    x, y = chart.x, chart.y
    assert marks == "".join(
        f'<circle class="mark" cx="{x(a):.1f}" cy="{y(b):.1f}" r="3" fill="#000"'
        ' fill-opacity="0.7"></circle>'
        for a, b in zip(xs, ys, strict=True)
    )
    n, below, steps = sum(counts), 0, []
    for v, c in zip(xs, counts, strict=True):
        steps.append(f" {x(v):.1f},{y(below / n):.1f} {x(v):.1f},{y((below + c) / n):.1f}")
        below += c
    assert curve == (
        f'<polyline class="series" points="{x(xs[0]):.1f},{y(0.0):.1f}'
        + "".join(steps)
        + '" fill="none" stroke="#111" stroke-width="2"/>'
    )
