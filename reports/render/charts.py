"""The report's SVG charts (drawn with reports/render/svg.py), each from the record's figures: what
the templates place on the page (reports/render/templates/), never computing a figure themselves."""

from __future__ import annotations

import functools
import html
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from reports.analysis.record import DriveStat, ModelReport, RailStat
from reports.load import binned, ordered
from reports.load.binned import BinnedDelays, BinnedReturns
from reports.load.cuts import FloatArray, StoredReturns
from reports.render import svg
from rig.check import failures
from rig.verdict import rule as verdicts

esc = html.escape


def bounds_chart(models: Sequence[ModelReport], confidence: float) -> str:
    """Per model: the observed failing-cut rate (dot) and its one-sided upper bound (bar), on a
    log scale, with each model's target as a dashed line."""
    shown = [m for m in models if m.any_failure.trials]
    if not shown:
        return svg.no_data("Failure probability per cut", "no cuts recorded")
    lowest = min(
        [m.any_failure.upper or 1.0 for m in shown] + [m.criteria.max_failure_rate for m in shown]
    )
    chart = svg.Chart(
        f"Failure probability per cut: rate (dot) and {confidence:.0%} upper bound (bar,"
        " coloured by the model's verdict)",
        (0, len(shown) + 1),  # an empty slot at the right: the target's label, over no bar
        (min(lowest / 3, 1e-4), 1.0),
        "model",
        "probability per cut (log)",
        ylog=True,
        width=max(560, 160 * (len(shown) + 1) + 120),
    )
    for i, m in enumerate(shown):
        p = m.any_failure
        assert p.upper is not None and p.rate is not None
        verdict = m.verdict.label
        tip = f"{m.model}: upper {p.upper:.3g} ({verdict})"
        chart.bar(i + 0.25, i + 0.75, p.upper, svg.verdict_fill(verdict), tip, verdict)
        if p.failed:
            chart.points([i + 0.5], [p.rate], "#000", f"{m.model}: rate {p.rate:.3g}", r=4)
        else:  # a zero rate is below every point of a log axis: said, never drawn at its floor
            chart.note(i + 0.5, chart.y.low, f"0 of {p.trials}", f"{m.model}: no failing cut")
        chart.category(i + 0.5, m.model)
    for target in sorted({m.criteria.max_failure_rate for m in shown}):
        chart.hline(target, "#333", f"target p < {target:g}")
    for verdict in dict.fromkeys(m.verdict.label for m in shown):
        chart.legend(verdict, svg.verdict_fill(verdict))
    return chart.render()


def _verdict_styles(models: Sequence[ModelReport]) -> list[tuple[str, str]]:
    """Per model: (its verdict's colour, a dash of its own), so a curve's colour says the
    verdict as the bars do and models of one verdict (or identical curves) still differ."""
    return [
        (svg.verdict_fill(m.verdict.label), SAME_CURVE_DASHES[i % len(SAME_CURVE_DASHES)])
        for i, m in enumerate(models)
    ]


def survival_chart(models: Sequence[ModelReport]) -> str:
    subjects = [s for m in models for s in m.survival.subjects]
    if not subjects:
        return svg.no_data("Drive survival (Kaplan-Meier)", "no drives")
    longest = max(t for t, _ in subjects) or 1
    chart = svg.Chart(
        "Drive survival vs cuts (Kaplan-Meier; dead device = event, alive = censored)",
        (0, longest),
        (0, 1.05),
        "cuts taken by the drive",
        "fraction of drives alive",
    )
    drawn: dict[tuple[object, ...], str] = {}  # a curve -> the first model drawn with it
    drawn_order: list[str] = []  # per model drawn: the first model of its curve
    styles = _verdict_styles(models)
    for i, m in enumerate(models):
        if not m.survival.subjects:
            continue
        end = max(t for t, _ in m.survival.subjects)
        xs, ys, lo, hi = [0.0], [1.0], [1.0], [1.0]
        for s in m.survival.steps:
            xs.append(s.time)
            ys.append(s.survival)
            lo.append(s.lower)
            hi.append(s.upper)
        xs.append(end)
        ys.append(ys[-1])
        lo.append(lo[-1])
        hi.append(hi[-1])
        censored = [t for t, died in m.survival.subjects if not died]
        # models with the very same curve would hide each other: each later one is dashed
        # (the earlier colours show through its gaps) and its legend names the first
        curve = (*xs, None, *ys, None, *censored)
        same = drawn.setdefault(curve, m.model)
        fill, dash = styles[i]  # (a dash per model: identical curves show through each other)
        drawn_order.append(same)
        if m.survival.steps:
            chart.band(*_stepped(xs, lo, hi), fill=fill)
        chart.step(xs, ys, fill, dash)
        chart.points(censored, [_km_at(m, t) for t in censored], fill, "censored", r=4)
        note = f", identical to {same}" if same != m.model else ""
        drives = len(m.survival.subjects)
        chart.legend(
            f"{m.model}: {m.verdict.label} ({drives} {_plural(drives, 'drive')}{note})", fill
        )
    return chart.render()


SAME_CURVE_DASHES = ("", "9 5", "3 4", "12 4 3 4")


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _stepped(
    xs: list[float], lo: list[float], hi: list[float]
) -> tuple[list[float], list[float], list[float]]:
    sx: list[float] = []
    sl: list[float] = []
    sh: list[float] = []
    for i in range(len(xs)):
        if i:
            sx.append(xs[i])
            sl.append(sl[-1])
            sh.append(sh[-1])
        sx.append(xs[i])
        sl.append(lo[i])
        sh.append(hi[i])
    return sx, sl, sh


def _km_at(m: ModelReport, t: float) -> float:
    value = 1.0
    for s in m.survival.steps:
        if s.time <= t:
            value = s.survival
    return value


def return_chart(models: Sequence[ModelReport]) -> str:
    """Each model's return times as an empirical CDF; the axis from their quantiles' min and
    max, each curve's values sorted when the page is written (no model's values held from
    drawing to writing)."""
    shown = [m for m in models if len(m.return_ms)]
    if not shown:
        return svg.no_data("Return time", "no cut with both the cut edge and the return recorded")
    low = min(m.return_quantiles["min"] for m in shown)
    high = max(m.return_quantiles["max"] for m in shown)
    log = high / max(low, 1e-9) > 20
    chart = svg.Chart(
        "Return time after the cut (empirical CDF)",
        (low * 0.9, high * 1.1),
        (0, 1.0),
        "ms from the cut edge to the drive back on the bus" + (" (log)" if log else ""),
        "fraction of cuts",
        xlog=log,
    )
    styles = _verdict_styles(models)
    for i, m in enumerate(models):
        if not len(m.return_ms):
            continue
        fill, dash = styles[i]
        if isinstance(m.return_ms, BinnedReturns):  # the central report: a step per bin
            values, counts = m.return_ms.histogram.steps()
            chart.cdf(values, fill, counts, dash)
            error = f" (bins of +-{binned.RELATIVE_ERROR:.1%})"
        else:
            chart.cdf(svg.Later(functools.partial(_sorted, m), len(m.return_ms)), fill, None, dash)
            error = ""
        chart.legend(f"{m.model}: {m.verdict.label}{error}", fill)
    return chart.render()


def _sorted(m: ModelReport) -> Iterable[float]:
    """The model's return times in order, a piece at a time (reports/load/ordered.py)."""
    values = m.return_ms
    if not isinstance(values, StoredReturns):
        return np.sort(values)
    return itertools.chain.from_iterable(p.tolist() for p in ordered.sorted_pieces(values.pieces))


def delay_chart(m: ModelReport) -> str:
    """Each cut at (ms since the last flush, ms since the last ack), failed or not. The axes
    and counts are taken now and the marks made when the page is written, each a piece of the
    model's points at a time (none held from drawing to writing, never all at once)."""
    low_x = low_y = math.inf
    high_x = high_y = -math.inf
    good = bad = 0
    for xs, ys, failed in _delay_marks(m):
        if len(xs):
            low_x, high_x = min(low_x, float(xs.min())), max(high_x, float(xs.max()))
            low_y, high_y = min(low_y, float(ys.min())), max(high_y, float(ys.max()))
            bad += int(failed.sum())
            good += len(failed) - int(failed.sum())
    if isinstance(m.delays, BinnedDelays):
        return svg.no_data(
            "Outcome vs time since last acknowledgement and flush",
            "the central report keeps the delays as cuts and failing cuts per delay bin (the"
            " bins' table), not a mark per cut",
        )
    if not good + bad:
        return svg.no_data(
            "Outcome vs time since last acknowledgement and flush",
            "no cut with its write log and cut edge stored",
        )
    chart = svg.Chart(
        "Outcome vs time from the last flush and the last ack to the cut",
        (low_x, high_x),
        (low_y, high_y),
        "ms since the last completed flush (log)",
        "ms since the last ack (log)",
        xlog=True,
        ylog=True,
    )
    kept, lost = svg.verdict_fill(verdicts.PASS), svg.verdict_fill(verdicts.FAIL)
    chart.point_pieces(functools.partial(_delay_side, m, False), kept, "no failure")
    chart.point_pieces(functools.partial(_delay_side, m, True), lost, "failure", r=3.5)
    chart.legend(f"no failure ({good})", kept)
    chart.legend(f"failure ({bad})", lost)
    return chart.render()


def _delay_marks(
    m: ModelReport,
) -> Iterator[tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]]:
    """The model's cuts with both delays, a piece at a time: (ms since the flush, ms since the
    ack, failed)."""
    for d in m.delays.chunks():
        both = ~np.isnan(d.flush_to_cut_ms) & ~np.isnan(d.ack_to_cut_ms)
        xs = np.maximum(d.flush_to_cut_ms[both], 1e-3)
        ys = np.maximum(d.ack_to_cut_ms[both], 1e-3)
        yield xs, ys, d.failed[both]


def _delay_side(m: ModelReport, failing: bool) -> Iterator[tuple[FloatArray, FloatArray]]:
    for xs, ys, failed in _delay_marks(m):
        keep = failed if failing else ~failed
        yield xs[keep], ys[keep]


def lost_after_chart(m: ModelReport) -> str:
    """How long after its acknowledgement and its flush each lost durable write had been safe."""
    ack, flush = m.lost_after_ack_ms, m.lost_after_flush_ms
    if not ack and not flush:
        return ""
    ends = [s.values[k] for s in (ack, flush) if s for k in (0, -1)]
    chart = svg.Chart(
        "Lost durable writes: time they had been acknowledged / flushed at the cut",
        (max(min(ends), 1e-3), max(max(ends), 1e-3)),
        (0, 1.0),
        "ms before the cut (log)",
        "fraction of lost durable writes",
        xlog=True,
    )
    for i, (label, series) in enumerate((("since its ack", ack), ("since its flush", flush))):
        if series:
            shown = series.mapped(lambda v: max(v, 1e-3))
            chart.cdf(shown.values, svg.colour(i), shown.counts)
            chart.legend(f"{label} (max {series.values[-1]:.1f} ms)", svg.colour(i))
    return chart.render()


def class_chart(drives: Sequence[DriveStat]) -> str:
    """Failure findings per class per drive, stacked horizontal bars."""
    classes = failures.ordered(c for d in drives for c in d.findings)
    if not classes:
        return svg.no_data("Failure findings per class per drive", "no failure findings")
    width, row_h, left = 560, 26, 200
    biggest = max(sum(d.findings.values()) for d in drives) or 1
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width + left + 30}"'
        f' height="{row_h * len(drives) + 60}" role="img" aria-label="findings per drive">'
        f'<rect x="0" y="0" width="{width + left + 30}" height="{row_h * len(drives) + 60}"'
        ' fill="#fff"/><text x="0" y="16" font-size="13" font-weight="bold">'
        "Failure findings per class per drive</text>"
    ]
    for i, d in enumerate(drives):
        y = 28 + i * row_h
        parts.append(
            f'<text x="0" y="{y + 15}" font-size="12">{esc(d.serial or d.wwn)[:26]}</text>'
        )
        x = float(left)
        for k, cls in enumerate(classes):
            n = d.findings.get(cls, 0)
            if n:
                w = width * n / biggest
                parts.append(
                    f'<rect class="mark" x="{x:.1f}" y="{y}" width="{max(w, 1):.1f}"'
                    f' height="{row_h - 6}" fill="{svg.colour(k)}">'
                    f"<title>{esc(cls)}: {n}</title></rect>"
                )
                x += w
        if x == left:
            parts.append(
                f'<text x="{left}" y="{y + 15}" font-size="12" fill="#1b7837">no failures</text>'
            )
    y = 36 + len(drives) * row_h
    x = float(left)
    for k, cls in enumerate(classes):
        parts.append(
            f'<rect x="{x:.0f}" y="{y}" width="10" height="10" fill="{svg.colour(k)}"/>'
            f'<text x="{x + 13:.0f}" y="{y + 9}" font-size="10">{esc(cls)}</text>'
        )
        x += 24 + 5.6 * len(cls)
    parts.append("</svg>")
    return "".join(parts)


def unsafe_chart(m: ModelReport) -> str:
    """Rise of the unsafe-shutdown counter vs cuts: an honest drive follows the diagonal."""
    drives = [h for h in m.health if len(h.unsafe_rise) > 1]
    if not drives:
        return svg.no_data(
            "Unsafe-shutdown counter vs cuts", "fewer than two snapshots with the counter"
        )
    longest = max(h.unsafe_rise[-1][0] for h in drives) or 1
    top = max([longest] + [y for h in drives for _, y in h.unsafe_rise])
    chart = svg.Chart(
        "Unsafe-shutdown counter rise vs cuts (dashed: one per cut)",
        (0, longest),
        (min(0.0, *(y for h in drives for _, y in h.unsafe_rise)), top * 1.05),
        "cuts since the first snapshot",
        "counter rise",
        width=520,
        height=260,
    )
    chart.line([0, longest], [0, longest], "#999", dash="5 4")
    for i, h in enumerate(drives):
        chart.line([x for x, _ in h.unsafe_rise], [y for _, y in h.unsafe_rise], svg.colour(i))
        chart.legend(h.drive, svg.colour(i))
    return chart.render()


def rail_chart(rail: Sequence[RailStat]) -> str:
    """The stored fall curves of the drives' rails after the off edge, with the thresholds;
    "" when no samples were stored (times only)."""
    curves = [(r, dt, s) for r in rail for dt, s in r.curves]
    if not curves:
        return ""
    longest = max(dt * (len(s) - 1) for _, dt, s in curves) or 1.0
    top = max(max(s) for _, _, s in curves)
    chart = svg.Chart(
        "Rail fall after the off edge (ADC counts)",
        (0, longest),
        (0, top * 1.05 or 1.0),
        "µs after the off edge",
        "ADC counts",
        width=560,
        height=260,
    )
    drives = sorted({r.drive for r, _, _ in curves})
    for r, dt, samples in curves:
        i = drives.index(r.drive)
        chart.line([k * dt for k in range(len(samples))], samples, svg.colour(i))
    for i, name in enumerate(drives):
        chart.legend(name, svg.colour(i))
    thresholds = {(r.hi_threshold, "high") for r in rail} | {(r.lo_threshold, "low") for r in rail}
    for value, label in sorted(t for t in thresholds if t[0]):
        chart.hline(value, "#b00", f"{label} threshold")
    return chart.render()
