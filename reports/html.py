"""The per-model reliability report as one self-contained HTML page (inline CSS and SVG charts,
no script, no network), rendered from `analysis.Report`."""

from __future__ import annotations

import datetime
import html
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from reports import certificate, deferred, svg
from reports.analysis import (
    NOT_REPORTED,
    DelayBin,
    DriveHealth,
    DriveStat,
    ModelReport,
    Proportion,
    Report,
)
from reports.endurance_html import endurance_sections
from reports.sequential_html import sequential_section
from rig.check import failures

STYLE = (
    """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{margin-bottom:0}h2{border-bottom:2px solid #ddd;padding-bottom:2px;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}
.PASS{color:#080;font-weight:bold}.FAIL{color:#b00;font-weight:bold}
.DEAD{color:#fff;background:#b00;font-weight:bold}
.verdict{display:inline-block;padding:4px 12px;border-radius:4px;color:#fff;font-weight:bold}
.verdict.PASS{background:#2a2}.verdict.FAIL{background:#c22}
.verdict.NOT-YET-DEMONSTRATED{background:#c70;color:#fff}.NOT-YET-DEMONSTRATED{color:#a50;font-weight:bold}
.absent{color:#777;font-style:italic}.note{color:#555;font-size:13px}
.detail{font-size:12px;white-space:nowrap}
code{font-size:12px;word-break:break-all}.charts{display:flex;flex-wrap:wrap;gap:12px}
section.model{border-left:4px solid #ccc;padding-left:14px;margin-top:2em}
"""
    + certificate.PRINT_STYLE
)
esc = html.escape


def _pct(p: float | None, digits: int = 3) -> str:
    if p is None:
        return "n/a"
    if p == 0:
        return "0"
    return f"{p:.{digits}g}"


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def _table(head: Sequence[str], rows: Iterable[Sequence[object]], numeric: int = 0) -> str:
    """A table; columns from index `numeric` on are right-aligned numbers."""
    out = ["<table><tr>", *(f"<th>{esc(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>")
        for i, cell in enumerate(row):
            cls = ' class="n"' if numeric and i >= numeric else ""
            out.append(f"<td{cls}>{cell}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _absent(what: str) -> str:
    return f'<p class="absent">{esc(what)}</p>'


def _prop_cells(p: Proportion) -> list[object]:
    interval = f"{_pct(p.lower95)} – {_pct(p.upper95)}"
    return [p.failed, p.trials, _pct(p.rate), _pct(p.upper), interval]


# charts -------------------------------------------------------------------------------------


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
        f"Failure probability per cut: rate (dot) and {confidence:.0%} upper bound (bar)",
        (0, len(shown)),
        (min(lowest / 3, 1e-4), 1.0),
        "model",
        "probability per cut (log)",
        ylog=True,
        width=max(420, 160 * len(shown) + 120),
    )
    for i, m in enumerate(shown):
        p = m.any_failure
        assert p.upper is not None and p.rate is not None
        chart.bar(i + 0.25, i + 0.75, p.upper, svg.colour(i), f"{m.model}: upper {p.upper:.3g}")
        if p.failed:
            chart.points([i + 0.5], [p.rate], "#000", f"{m.model}: rate {p.rate:.3g}", r=4)
        else:  # a zero rate is below every point of a log axis: said, never drawn at its floor
            chart.note(i + 0.5, chart.y.low, f"0 of {p.trials}", f"{m.model}: no failing cut")
        chart.category(i + 0.5, m.model)
    for target in sorted({m.criteria.max_failure_rate for m in shown}):
        chart.hline(target, "#b00", f"target p < {target:g}")
    return chart.render()


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
        dash = SAME_CURVE_DASHES[sum(1 for v in drawn_order if v == same) % len(SAME_CURVE_DASHES)]
        drawn_order.append(same)
        if m.survival.steps:
            chart.band(*_stepped(xs, lo, hi), fill=svg.colour(i))
        chart.step(xs, ys, svg.colour(i), dash)
        chart.points(censored, [_km_at(m, t) for t in censored], svg.colour(i), "censored", r=4)
        note = f", identical to {same}" if same != m.model else ""
        chart.legend(f"{m.model} ({len(m.survival.subjects)} drives{note})", svg.colour(i))
    return chart.render()


SAME_CURVE_DASHES = ("", "9 5", "3 4", "12 4 3 4")


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
    shown = [m for m in models if len(m.return_ms)]
    if not shown:
        return svg.no_data("Return time", "no cut with both the cut edge and the return recorded")
    low = min(float(np.min(m.return_ms)) for m in shown)
    high = max(float(np.max(m.return_ms)) for m in shown)
    log = high / max(low, 1e-9) > 20
    chart = svg.Chart(
        "Return time after the cut (empirical CDF)",
        (low * 0.9, high * 1.1),
        (0, 1.0),
        "ms from the cut edge to the drive back on the bus" + (" (log)" if log else ""),
        "fraction of cuts",
        xlog=log,
    )
    for i, m in enumerate(models):
        if not len(m.return_ms):
            continue
        chart.cdf(np.sort(m.return_ms), svg.colour(i))
        chart.legend(m.model, svg.colour(i))
    return chart.render()


def delay_chart(m: ModelReport) -> str:
    d = m.delays
    both = ~np.isnan(d.flush_to_cut_ms) & ~np.isnan(d.ack_to_cut_ms)
    if not both.any():
        return svg.no_data(
            "Outcome vs time since last acknowledgement and flush",
            "no cut with its write log and cut edge stored",
        )
    xs = np.maximum(d.flush_to_cut_ms[both], 1e-3)
    ys = np.maximum(d.ack_to_cut_ms[both], 1e-3)
    chart = svg.Chart(
        "Outcome vs time from the last flush and the last ack to the cut",
        (float(xs.min()), float(xs.max())),
        (float(ys.min()), float(ys.max())),
        "ms since the last completed flush (log)",
        "ms since the last ack (log)",
        xlog=True,
        ylog=True,
    )
    failed = d.failed[both]
    chart.points(xs[~failed], ys[~failed], "#2ca02c", "no failure")
    chart.points(xs[failed], ys[failed], "#d62728", "failure", r=3.5)
    chart.legend(f"no failure ({int((~failed).sum())})", "#2ca02c")
    chart.legend(f"failure ({int(failed.sum())})", "#d62728")
    return chart.render()


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
                    f' height="{row_h - 6}" fill="{svg.colour(k + 1)}">'
                    f"<title>{esc(cls)}: {n}</title></rect>"
                )
                x += w
        if x == left:
            parts.append(
                f'<text x="{left}" y="{y + 15}" font-size="12" fill="#080">no failures</text>'
            )
    y = 36 + len(drives) * row_h
    x = float(left)
    for k, cls in enumerate(classes):
        parts.append(
            f'<rect x="{x:.0f}" y="{y}" width="10" height="10" fill="{svg.colour(k + 1)}"/>'
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


def health_section(m: ModelReport) -> str:
    if not m.health and not m.anomalies:
        return _absent(
            "SMART deltas and counter anomalies: no health snapshots in the store (health"
            " polling was off, the station cannot read health, or the store predates health"
            " recording)."
        )
    # one column per drive (a model has few), one row per counter
    fields = [f for f in HEALTH_ORDER if any(d.field == f for h in m.health for d in h.deltas)]
    by_drive = [{d.field: d for d in h.deltas} for h in m.health]
    rows: list[list[object]] = [
        ["campaign", *(esc(h.campaign) for h in m.health)],
        ["source", *(esc(h.source) for h in m.health)],
        ["snapshots / cuts covered", *(f"{h.snapshots} / {h.cuts}" for h in m.health)],
        ["unsafe-shutdown counter", *(_unsafe_counter(h) for h in m.health)],
    ]
    for f in fields:
        cells: list[object] = [esc(f)]
        for deltas_of in by_drive:
            d = deltas_of.get(f)
            cells.append("—" if d is None else f"{d.first:g} → {d.last:g} (<b>{d.delta:+g}</b>)")
        rows.append(cells)
    rows.append(
        [
            "counter anomalies",
            *(
                "<br>".join(f"{esc(k)}: {v}" for k, v in sorted(h.anomalies.items())) or "none"
                for h in m.health
            ),
        ]
    )
    deltas = (
        _table(["counter", *(esc(h.drive) for h in m.health)], rows)
        if m.health
        else _absent("No health snapshots (counter anomalies were recorded without them).")
    )
    anomalies = (
        _table(
            ["drive", "after cut", "counter", "before", "after", "expected", "reason"],
            [
                [
                    esc(str(a.get("drive", ""))),
                    a.get("seq", ""),
                    esc(str(a.get("field", ""))),
                    esc(str(a.get("before", ""))),
                    esc(str(a.get("after", ""))),
                    esc(str(a.get("expected", ""))),
                    esc(str(a.get("reason", ""))),
                ]
                for a in m.anomalies[:50]
            ],
        )
        + (f'<p class="note">first 50 of {len(m.anomalies)}</p>' if len(m.anomalies) > 50 else "")
        if m.anomalies
        else '<p class="note">No counter anomaly: every counter moved as a drive\'s should.</p>'
    )
    return (
        f"<h4>Counters, first snapshot → last</h4>{deltas}"
        f'<div class="charts">{unsafe_chart(m)}</div>'
        f"<h4>Counter anomalies ({len(m.anomalies)})</h4>{anomalies}"
    )


UNSAFE_COUNTER_MISSING = "counter not available"


def _unsafe_counter(h: DriveHealth) -> str:
    """Where the unsafe-shutdown rule read its counter, or why no cut of this drive was judged
    by it (a model without the counter, or one smartctl's drive database does not name)."""
    if h.unsafe_source:
        return esc(h.unsafe_source)
    return f'<b class="FAIL">{UNSAFE_COUNTER_MISSING}</b>: cuts not judged by this rule'


HEALTH_ORDER = (
    "power_cycles",
    "unsafe_shutdowns",
    "media_errors",
    "crc_errors",
    "reallocated_sectors",
    "pending_sectors",
    "reported_uncorrectable",
    "offline_uncorrectable",
    "error_log_entries",
    "percentage_used",
    "available_spare",
    "critical_warning",
    "host_bytes_written",
    "temperature_c",
)


def rail_section(m: ModelReport) -> str:
    rows = []
    for r in m.rail:
        rows.append(
            [
                esc(r.drive),
                r.measured,
                esc(", ".join(f"{k} {v}" for k, v in sorted(r.ends.items()))),
                *(_ms(r.hi_us.get(k)) for k in ("p50", "p90", "max")),
                *(_ms(r.lo_us.get(k)) for k in ("p50", "p90", "max")),
            ]
        )
    table = _table(
        [
            "drive",
            "cuts measured",
            "ends",
            "below high threshold µs p50",
            "p90",
            "max",
            "below low threshold µs p50",
            "p90",
            "max",
        ],
        rows,
        numeric=3,
    )
    curves = [(r, dt, s) for r in m.rail for dt, s in r.curves]
    if not curves:
        return table + _absent("No rail samples stored (times only): no fall curves to draw.")
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
    thresholds = {(r.hi_threshold, "high") for r in m.rail} | {
        (r.lo_threshold, "low") for r in m.rail
    }
    for value, label in sorted(t for t in thresholds if t[0]):
        chart.hline(value, "#b00", f"{label} threshold")
    return table + f'<div class="charts">{chart.render()}</div>'


def _numeric_series(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    keys = [
        k
        for k in (rows[0].keys() if rows else ())
        if not k.startswith("_") and k not in ("id", "drive", "cycle_id", "seq")
    ]
    series = {}
    for k in keys:
        values = [r.get(k) for r in rows]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            series[k] = [float(v) for v in values]  # type: ignore[arg-type]
    return series


ENDURANCE_COLUMNS = {"kind", "mb_per_s", "host_bytes_total", "lat_p99_us", "steady", "seq"}


def _num(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def endurance_charts(m: ModelReport) -> str:
    if not m.intervals:
        return _absent(
            "Endurance: no endurance intervals in the store (the campaign ran no endurance"
            " phase, or the store predates endurance recording)."
        )
    if ENDURANCE_COLUMNS.issubset(m.intervals[0]):
        return _endurance_v6(m)
    return _generic_interval_charts(m)


from reports.record import NOT_ENOUGH_DATA  # noqa: E402  (moved: record.py)


def _percentile_cell(writes: list[dict[str, Any]], key: str, summary: Any) -> str:
    """`summary` (median, max) of a latency percentile over the intervals that state it; an
    interval whose samples could not support it stores NULL beside its sample count
    (`lat_samples`), and such intervals are said to have too little data, never given a number."""
    values = [v for v in (_num(r.get(key)) for r in writes) if v is not None]
    short = sum(1 for r in writes if _num(r.get(key)) is None and (_num(r.get("lat_samples")) or 0))
    if not values:
        return NOT_ENOUGH_DATA if short else "n/a"
    cell = f"{summary(values):.0f}"
    return cell + (f" ({short} intervals: {NOT_ENOUGH_DATA})" if short else "")


def _endurance_v6(m: ModelReport) -> str:
    """Store v6 `endurance_interval`: throughput and latency against host bytes written (a write
    cliff shows as the drive fills), steady state, TBW, retention checks."""
    by_drive: dict[str, list[dict[str, Any]]] = {}
    for row in m.intervals:
        by_drive.setdefault(str(row["drive"]).split("|")[-1], []).append(row)
    rows = []
    for drive, intervals in sorted(by_drive.items()):
        writes = [r for r in intervals if r.get("kind") == "write"]
        retention = [r for r in intervals if r.get("kind") == "retention"]
        last = writes[-1] if writes else intervals[-1]
        # write intervals by their own number (retention rows share `seq`, not this numbering);
        # stores before v10 have no interval_no: the write rows' order is the same numbering
        numbers = [r.get("interval_no") or n for n, r in enumerate(writes, 1)]
        steady = next((k for k, r in zip(numbers, writes, strict=True) if r.get("steady")), None)
        speeds = [v for v in (_num(r.get("mb_per_s")) for r in writes) if v is not None]
        samples = [int(v) for v in (_num(r.get("lat_samples")) for r in writes) if v is not None]
        tbw = _num(last.get("tbw_fraction"))
        fill = _num(last.get("fill_fraction"))
        rows.append(
            [
                esc(drive),
                len(writes),
                f"{(_num(last.get('host_bytes_total')) or 0) / 1e9:.3g}",
                "not rated" if tbw is None else f"{tbw * 100:.3g}%",
                "n/a" if fill is None else f"{fill:.0%}",
                "not reached" if steady is None else f"from interval {steady}",
                f"{statistics.median(speeds):.1f}" if speeds else "n/a",
                f"{min(speeds):.1f}" if speeds else "n/a",
                f"{min(samples):,}–{max(samples):,}" if samples else "n/a",
                _percentile_cell(writes, "lat_p50_us", statistics.median),
                _percentile_cell(writes, "lat_p99_us", statistics.median),
                _percentile_cell(writes, "lat_p99_us", max),
                _percentile_cell(writes, "lat_p999_us", statistics.median),
                int(sum(_num(r.get("verified_blocks")) or 0 for r in intervals)),
                int(sum(_num(r.get("failures")) or 0 for r in intervals)),
                f"{len(retention)} ({int(sum(_num(r.get('failures')) or 0 for r in retention))}"
                " failing)",
            ]
        )
    table = _table(
        [
            "drive",
            "intervals",
            "host GB written",
            "TBW used",
            "fill",
            "steady state",
            "MB/s median",
            "MB/s min",
            "latency samples / interval",
            "p50 µs median",
            "p99 µs median",
            "p99 µs max",
            "p99.9 µs median",
            "blocks verified",
            "failures",
            "retention checks",
        ],
        rows,
        numeric=1,
    )
    series = {
        drive: [
            r
            for r in intervals
            if r.get("kind") == "write"
            and _num(r.get("host_bytes_total")) is not None
            and _num(r.get("mb_per_s")) is not None
        ]
        for drive, intervals in sorted(by_drive.items())
    }
    points = [r for rs in series.values() for r in rs]
    if not points:
        return table
    gb = [(_num(r["host_bytes_total"]) or 0) / 1e9 for r in points]
    speeds = [_num(r["mb_per_s"]) or 0 for r in points]
    speed = svg.Chart(
        "Write throughput vs host data written (dots: steady state)",
        (min(gb), max(gb)),
        (0, max(speeds) * 1.1 or 1.0),
        "host GB written",
        "MB/s",
        width=560,
        height=260,
    )
    latencies = [
        v
        for r in points
        for k in ("lat_p50_us", "lat_p99_us", "lat_p999_us")
        if (v := _num(r.get(k)))
    ]
    latency = svg.Chart(
        "Write latency p50 (dotted), p99 (solid), p99.9 (dashed)",
        (min(gb), max(gb)),
        (min(latencies or [1.0]), max(latencies or [10.0])),
        "host GB written",
        "µs (log)",
        ylog=True,
        width=560,
        height=260,
    )
    for i, (drive, rs) in enumerate(series.items()):
        if not rs:
            continue
        xs = [(_num(r["host_bytes_total"]) or 0) / 1e9 for r in rs]
        speed.line(xs, [_num(r["mb_per_s"]) or 0 for r in rs], svg.colour(i))
        steady = [(x, _num(r["mb_per_s"]) or 0) for x, r in zip(xs, rs, strict=True) if r["steady"]]
        speed.points([x for x, _ in steady], [y for _, y in steady], svg.colour(i), "steady")
        speed.legend(drive, svg.colour(i))
        for key, dash in (("lat_p50_us", "2 3"), ("lat_p99_us", ""), ("lat_p999_us", "6 4")):
            pts = [(x, v) for x, r in zip(xs, rs, strict=True) if (v := _num(r.get(key)))]
            if pts:
                latency.line([x for x, _ in pts], [y for _, y in pts], svg.colour(i), dash=dash)
        latency.legend(drive, svg.colour(i))
    return table + f'<div class="charts">{speed.render()}{latency.render()}</div>'


def _generic_interval_charts(m: ModelReport) -> str:
    charts = []
    by_drive: dict[str, list[dict[str, Any]]] = {}
    for row in m.intervals:
        by_drive.setdefault(str(row["drive"]), []).append(row)
    series_names = sorted({k for rows in by_drive.values() for k in _numeric_series(rows)})
    for name in series_names[:8]:
        all_values = [v for rows in by_drive.values() for v in _numeric_series(rows).get(name, [])]
        if not all_values:
            continue
        longest = max(len(rows) for rows in by_drive.values())
        chart = svg.Chart(
            name.replace("_", " "),
            (0, max(longest - 1, 1)),
            (min(0.0, min(all_values)), max(all_values) * 1.05 or 1.0),
            "interval",
            name,
            width=420,
            height=240,
        )
        for i, (drive, rows) in enumerate(sorted(by_drive.items())):
            ys = _numeric_series(rows).get(name)
            if ys:
                chart.line(list(range(len(ys))), ys, svg.colour(i))
                chart.legend(drive.split("|")[-1], svg.colour(i))
        charts.append(chart.render())
    return f'<div class="charts">{"".join(charts)}</div>'


def _generic_rows(rows: list[dict[str, Any]], limit: int = 200) -> str:
    keys = [k for k in rows[0] if not k.startswith("_") and not isinstance(rows[0][k], bytes)]
    body = [[esc(_short(r.get(k))) for k in keys] for r in rows[:limit]]
    more = f'<p class="note">first {limit} of {len(rows)} rows</p>' if len(rows) > limit else ""
    return _table(keys, body) + more


def _short(value: object) -> str:
    text = json.dumps(value) if isinstance(value, dict | list) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


DETAIL_LIST_ITEMS = 16  # a list in a finding's detail (sector generations...) shows this many


def finding_detail(detail: object) -> str:
    """A finding's detail (its JSON, docs/checker.md "What each finding carries") as readable
    `key: value` lines: a time stored in nanoseconds (a key ending `_ns`) in ms or s, a list
    as its items (the first DETAIL_LIST_ITEMS and how many in all), yes/no for a flag."""
    if not isinstance(detail, dict):
        return esc(_short(detail)) if detail not in (None, "") else ""
    lines = []
    for key, value in detail.items():
        name = str(key)
        if name.endswith("_ns") and isinstance(value, int | float) and not isinstance(value, bool):
            name, text = name.removesuffix("_ns"), _nanoseconds(value)
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, list):
            shown = " ".join(str(v) for v in value[:DETAIL_LIST_ITEMS])
            more = len(value) - DETAIL_LIST_ITEMS
            text = f"{shown} … ({len(value)} in all)" if more > 0 else shown
        else:
            text = _short(value)
        lines.append(f"{esc(name.replace('_', ' '))}: {esc(text)}")
    return "<br>".join(lines)


def _nanoseconds(ns: float) -> str:
    return f"{ns / 1e6:.4g} ms" if abs(ns) < 10e9 else f"{ns / 1e9:.4g} s"


# sections -----------------------------------------------------------------------------------


def _summary_table(report: Report) -> str:
    rows = []
    for m in report.models:
        p = m.criteria_failure
        rows.append(
            [
                f'<a href="#{_anchor(m.model)}">{esc(m.model)}</a>'
                f'<br><a class="note" href="{esc(model_page(m.model))}">own page</a>',
                esc(", ".join(m.firmware)),
                len(m.drives),
                m.cuts,
                m.any_failure.failed,
                _pct(m.any_failure.rate),
                _pct(m.any_failure.upper),
                _pct(m.reliability_demonstrated, 6),
                f"{m.drive_level.failed}/{m.drive_level.trials}",
                m.drives_dead,
                m.rig_errors,
                f'<span class="verdict {m.verdict.css}">{m.verdict.label}</span>'
                f'<br><span class="note">{esc("; ".join(m.verdict.reasons))}</span>'
                f'<br><span class="note">criteria: {esc(m.criteria.describe())}'
                f" ({p.failed}/{p.trials} counted)</span>",
            ]
        )
    c = f"{report.confidence:.0%}"
    return _table(
        [
            "model",
            "firmware",
            "drives",
            "cuts",
            "failing cuts",
            "rate",
            f"{c} upper bound",
            f"reliability shown ({c})",
            "drives with failures",
            "dead",
            "rig errors",
            "verdict",
        ],
        rows,
    )


def _comparisons(report: Report) -> str:
    if not report.comparisons:
        return _absent("Only one model in these stores: no model-vs-model comparison.")
    rows = [
        [
            esc(c.outcome),
            esc(c.model_a),
            f"{c.a.failed}/{c.a.trials}",
            esc(c.model_b),
            f"{c.b.failed}/{c.b.trials}",
            f"{c.p_value:.3g}",
            f"{c.p_holm:.3g}",
            "yes" if c.significant else "no",
        ]
        for c in report.comparisons
    ]
    return _table(
        [
            "cuts with",
            "model A",
            "failing/cuts",
            "model B",
            "failing/cuts",
            "Fisher p (two-sided)",
            "Holm-adjusted p",
            f"differ at {1 - report.confidence:.0%}",
        ],
        rows,
    ) + (
        "<p class=\"note\">Fisher's exact test on cuts with vs without the outcome; Holm's"
        " correction over every test in this table.</p>"
    )


def model_page(model: str) -> str:
    """The file name of a model's own page (written beside report.html by reports.export)."""
    return "model-" + "".join(ch if ch.isalnum() or ch in "._" else "-" for ch in model) + ".html"


def _anchor(model: str) -> str:
    return "m-" + "".join(ch if ch.isalnum() else "-" for ch in model)


def _bins_table(title: str, bins: list[DelayBin]) -> str:
    rows = []
    for b in bins:
        high = "∞" if b.high_ms is None else f"{b.high_ms:g}"
        rows.append([f"[{b.low_ms:g}, {high}) ms", *_prop_cells(b.cuts)])
    return f"<h4>{esc(title)}</h4>" + _table(
        ["time before the cut", "failing", "cuts", "rate", "upper bound", "two-sided interval"],
        rows,
        numeric=1,
    )


def _drive_rows(m: ModelReport) -> list[list[object]]:
    rows = []
    for d in m.drives:
        rows.append(
            [
                f"{esc(d.serial)}<br><code>{esc(d.wwn)}</code>",
                esc(", ".join(d.firmware) or NOT_REPORTED),
                esc(", ".join(d.stations)),
                esc(", ".join(d.campaigns)),
                esc(d.profile),
                d.cuts.trials,
                d.cuts.failed,
                _pct(d.cuts.upper),
                "<br>".join(f"{esc(k)}: {v}" for k, v in d.findings.items()) or "none",
                d.allowed_losses,
                f"{d.bytes_written / 1e9:.3g} GB / {d.blocks_checked} blocks / {d.full_scans} full"
                f" / {d.blocks_unchecked} unchecked",
                d.rig_errors + d.interrupted,
                "alive" if d.dead_at_cut is None else f"dead at cut {d.dead_at_cut}",
                _ms(d.median_return_ms),
                f'<span class="{d.verdict.replace(" ", "-")}">{d.verdict}</span>',
            ]
        )
    return rows


def _model_section(m: ModelReport, confidence: float) -> str:
    c = f"{confidence:.0%}"
    crit = m.criteria
    verdict = (
        f'<p><span class="verdict {m.verdict.css}">{m.verdict.label}</span> against the'
        f" criteria: {esc(crit.describe())}. <span class='note'>{esc(m.criteria_note)}.</span></p>"
        f"<ul>{''.join(f'<li>{esc(r)}</li>' for r in m.verdict.reasons)}</ul>"
        f'<p class="note">Success-run: {m.cuts_needed} failure-free cuts demonstrate'
        f" p &lt; {crit.max_failure_rate:g} at {crit.confidence:.0%}"
        f" (n = ln(1 − C) / ln(R)). Reliability shown by these cuts:"
        f" R ≥ {_pct(m.reliability_demonstrated, 6)}."
        + (
            f" <b>{m.verdict.cuts_needed} more failure-free cuts</b> are needed to reach the claim."
            if m.verdict.cuts_needed
            else ""
        )
        + "</p>"
    )
    firmware = _table(
        ["firmware", "failing cuts", "cuts", "rate", f"{c} upper", "two-sided interval"],
        [[esc(fw), *_prop_cells(p)] for fw, p in m.firmware.items()],
        numeric=1,
    )
    classes = (
        _table(
            [
                "class",
                "findings",
                "blocks",
                "cuts with it",
                "cuts",
                "rate per cut",
                f"{c} upper bound",
                "two-sided interval",
            ],
            [[esc(s.cls), s.findings, s.blocks, *_prop_cells(s.cuts)] for s in m.classes],
            numeric=1,
        )
        if m.classes
        else _absent("No failure finding of any class.")
    )
    drives = _table(
        [
            "drive (serial, WWN)",
            "firmware",
            "stations",
            "campaigns",
            "profile",
            "cuts",
            "failing cuts",
            f"{c} upper (this drive)",
            "findings",
            "allowed losses",
            "written / checked / full scans / unchecked",
            "rig errors / interrupted",
            "status",
            "median return ms",
            "verdict",
        ],
        _drive_rows(m),
    )
    dl = m.drive_level
    drive_level = (
        f'<p class="note">Drive level (each drive counted once, no independence between cuts'
        f" assumed): {dl.failed} of {dl.trials} drives had a failing cut; the per-drive"
        f" probability of failing within its cuts is below {_pct(dl.upper)} at {c}."
        f" {m.drives_dead} drive(s) died.</p>"
    )
    if 0 < dl.failed < dl.trials:
        drive_level += (
            '<p class="note"><b>The drives of this model disagree</b> (some failed, some did'
            " not): cuts are clustered by drive, so the pooled per-cut bound is optimistic for"
            " the model; cite the drive-level figure and each drive's own bound.</p>"
        )
    q = m.return_quantiles
    returns = (
        _table(
            ["cuts", "min", "p50", "p90", "p99", "max", "mean"],
            [[len(m.return_ms), *(_ms(q[k]) for k in ("min", "p50", "p90", "p99", "max", "mean"))]],
            numeric=1,
        )
        if q
        else _absent("No return times recorded.")
    )
    examples = (
        _table(
            ["drive", "cycle", "class", "LBA range", "expected gen", "observed gen", "detail"],
            [
                [
                    esc(str(e["drive"])),
                    e.get("cycle", ""),
                    esc(str(e.get("class", ""))),
                    f"{e.get('lba_first')}+{e.get('lba_count')}",
                    e.get("expected_gen", ""),
                    e.get("observed_gen", ""),
                    f'<span class="detail">{finding_detail(e.get("detail", ""))}</span>',
                ]
                for e in m.examples[:60]
            ],
        )
        if m.examples
        else _absent("No failure findings.")
    )
    health = health_section(m)
    rail = (
        rail_section(m)
        if m.rail
        else _absent(
            "Rail fall: no rail-sense measurements in the store (the station has no rail sense,"
            " e.g. a simulated or manual station, or the store predates rail recording)."
        )
    )
    return f"""<section class="model" id="{_anchor(m.model)}">
<h2>{esc(m.model)}</h2>
<p>Campaigns: {esc("; ".join(m.campaigns))}. {m.cuts} cuts on {len(m.drives)} drive(s);
{m.rig_errors} rig errors and {m.interrupted} interrupted cycles are not counted as cuts.</p>
{verdict}{sequential_section(m.sequential)}
<h3>Firmware versions</h3>{firmware}
<h3>Findings per class</h3>{classes}
<h3>Per drive</h3>{drives}{drive_level}
<div class="charts">{class_chart(m.drives)}</div>
<h3>Return time</h3>{returns}
<h3>Outcome vs cut delay since the last acknowledgement and flush</h3>
<div class="charts">{delay_chart(m)}{lost_after_chart(m)}</div>
<div class="charts"><div>{_bins_table("by time since the last completed flush", m.flush_bins)}</div>
<div>{_bins_table("by time since the last acknowledged write", m.ack_bins)}</div></div>
<h3>SMART deltas and counter anomalies</h3>{health}
<h3>Endurance</h3>{endurance_charts(m)}{endurance_sections(m)}
<h3>Rail fall</h3>{rail}
<h3>Failure findings (first {min(len(m.examples), 60)})</h3>{examples}
</section>"""


METHODS = """<h2>Method</h2><ul class="note">
<li>Built from the SQLite stores (opened read-only) or the fleet's central database; several
sources merge, and a drive is the same physical drive (model and serial, else WWN) in every
campaign and station.</li>
<li>A cut is a cycle whose power cut reached the drive (status ok, or dead). Rig errors and
interrupted cycles are shown but never counted as cuts or failures. A failing cut has at least one
failure finding; allowed losses of unflushed writes are not failures.</li>
<li>Bounds are exact one-sided Clopper-Pearson upper bounds (beta quantiles from scipy.stats);
intervals are two-sided exact at the same confidence. Verdict: PASS when the upper bound is below
the claim; FAIL when the lower bound is above it or a drive died; otherwise NOT YET DEMONSTRATED,
with the failure-free cuts still needed.
The reliability shown is 1 − the upper bound; with zero failures it equals the success-run value
(1 − C)<sup>1/n</sup>.</li>
<li>Cuts on one drive are not independent: the pooled per-cut bound assumes they are
exchangeable across drives. Each drive's own bound and the drive-level count (drives with any
failing cut, each drive counted once) are shown beside it; when drives of one model disagree,
trust the drive-level figure.</li>
<li>Survival: Kaplan-Meier over drives, time in cuts, a dead device is an event at the cut it died
on, a drive still alive is censored at its cut count (scipy.stats.ecdf); band: log-log.</li>
<li>Model vs model: Fisher's exact test (two-sided, scipy.stats) on cuts with vs without the
outcome (any failure, and each class), Holm-corrected over every test.</li>
<li>Time since the last acknowledgement / flush: from each cut's stored write log, the last write
completion and last flush completion before the cut edge on the host clock.</li></ul>"""


def render(report: Report, generated_at: float | None = None) -> str:
    return deferred.join(render_text(report, generated_at))


def render_text(report: Report, generated_at: float | None = None, extra: str = "") -> str:
    """The page with its largest parts as tokens (reports/deferred.py), for writing to a file
    as it is made. `extra`: sections of their own modules, after the models' (the window of
    vulnerability, reports/window_html.py); "" leaves the page as it was."""
    when = datetime.datetime.fromtimestamp(
        generated_at if generated_at is not None else 0, tz=datetime.UTC
    ).strftime("%Y-%m-%d %H:%M UTC")
    campaigns = _table(
        ["store", "campaign", "station", "status", "started", "ended"],
        [
            [
                f"<code>{esc(c['source'])}</code>",
                esc(c["name"]),
                esc(c["station"]),
                esc(c["status"]),
                _when(c["started_at"]),
                _when(c["ended_at"]),
            ]
            for c in report.campaigns
        ],
    )
    unread = [f"{esc(s)}: {esc(', '.join(t))}" for s, t in report.unread_tables.items() if t]
    unread_note = (
        f'<p class="note">Tables not read by this report version: {"; ".join(unread)}.</p>'
        if unread
        else ""
    )
    models = "".join(_model_section(m, report.confidence) for m in report.models)
    title = ", ".join(m.model for m in report.models) or "no drives"
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>Power-fault reliability report: {esc(title)}</title><style>{STYLE}</style></head>
<body class="report">
<h1>Power-fault reliability report</h1>
<p class="note">Generated {when} from {len(report.sources)} store(s).
Confidence {report.confidence:.0%}. Findings are classed as the rig's docs/checker.md defines
them ("The class table").</p>
<h2>Campaigns</h2>{campaigns}{unread_note}
<h2>Models</h2>{_summary_table(report) if report.models else _absent("No drives.")}
<div class="charts">{bounds_chart(report.models, report.confidence)}</div>
<h2>Model vs model</h2>{_comparisons(report)}
<h2>Drive survival</h2><div class="charts">{survival_chart(report.models)}</div>
<h2>Return time</h2><div class="charts">{return_chart(report.models)}</div>
{models}
{extra}{METHODS}
{certificate.certificates(report, when)}
</body></html>
"""


def _when(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "—"
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
