"""The report's PTS and write-cliff sections (docs/campaign.md, "Endurance"): the steady-state
convergence plot and the measurement-window plot per drive, throughput, IOPS and latency against
fill level and against drive-capacity multiples written with cuts and retention checks marked,
and TRIM off beside TRIM on for the same drive."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from markupsafe import Markup

from reports.analysis.endurance import EnduranceSeries, Mark, SteadyStateFit, TrimPair
from reports.analysis.record import ModelReport
from reports.render import svg
from reports.render.templating import ENV
from rig.campaign.endurance import pts

LABELS = {"iops": "IOPS", "mb_per_s": "MB/s", "mean_latency_us": "mean latency µs"}
MARK_COLOURS = {"cut": "#d62728", "retention": "#9467bd"}
W, H = 560, 260


def _num(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _label(s: EnduranceSeries) -> str:
    return f"{s.drive.split('|')[-1]} ({s.campaign}{', TRIM' if s.trim else ''})"


def steady_sentence(s: EnduranceSeries) -> str:
    st = s.steady
    if st.verdict == pts.REACHED and st.reached_at is not None:
        first = st.reached_at - st.window + 1
        return (
            f"steady state reached at round {st.reached_at} (measurement window rounds"
            f" {first}–{st.reached_at})"
        )
    if st.verdict == pts.NOT_REACHED:
        return f"steady state not reached within {st.max_rounds} rounds"
    if not s.rounds:
        return "no PTS rounds recorded (the store predates them)"
    return f"steady state not reached yet ({len(s.rounds)} rounds, window {st.window})"


# -- PTS: convergence and measurement window ------------------------------------------------------
def convergence_chart(s: EnduranceSeries) -> str:
    """Every tracking variable per round, as a share of its measurement window's average (the
    three have different units); the ±20 % band, the window's start and the verdict marked."""
    title = f"PTS steady-state convergence: {_label(s)}"
    if not s.rounds:
        return svg.no_data(title, "no PTS rounds recorded")
    averages = {f.variable: f.average for f in s.steady.fits}
    n = len(s.rounds)
    xs = [float(r.get("round", i)) for i, r in enumerate(s.rounds, start=1)]
    lines: list[tuple[str, list[float]]] = []
    for variable in pts.TRACKED:
        values = [_num(r.get(variable)) or 0.0 for r in s.rounds]
        base = averages.get(variable) or (statistics.fmean(values[-s.steady.window :]) or 1.0)
        lines.append((variable, [100.0 * v / base for v in values]))
    top = max([130.0] + [max(v) for _, v in lines])
    chart = svg.Chart(
        title,
        (1, max(n, 2)),
        (0, min(top * 1.05, 400.0)),
        "round (after preconditioning)",
        "% of the window's average",
        width=W,
        height=H,
    )
    chart.band([1, max(n, 2)], [80, 80], [120, 120], "#2ca02c")
    for i, (variable, ys) in enumerate(lines):
        chart.line(xs, [min(y, 400.0) for y in ys], svg.colour(i))
        chart.points(xs, [min(y, 400.0) for y in ys], svg.colour(i), LABELS[variable])
        chart.legend(LABELS[variable], svg.colour(i))
    st = s.steady
    if st.fits:
        chart.vline(st.fits[0].rounds[0], "#444", "window")
    if st.verdict == pts.REACHED and st.reached_at:
        chart.vline(st.reached_at, "#2ca02c", "steady")
    elif st.verdict == pts.NOT_REACHED:
        chart.vline(st.max_rounds, "#d62728", "max rounds: not reached")
    chart.legend("±20 % band", "#2ca02c")
    return chart.render()


def steady_state_chart(s: EnduranceSeries, fit: SteadyStateFit) -> str:
    label = LABELS[fit.variable]
    title = f"Window, {label}: range {fit.range_share:.1%} (≤20%), slope {fit.excursion:.1%} (≤10%)"
    avg = fit.average
    low = min([avg * 0.75, *fit.values])
    high = max([avg * 1.25, *fit.values])
    xs = [float(r) for r in fit.rounds]
    chart = svg.Chart(title, (xs[0], xs[-1]), (low, high), "round", label, width=W, height=H)
    chart.band(xs, [avg * 0.8] * len(xs), [avg * 1.2] * len(xs), "#ff7f0e")
    chart.band(xs, [avg * 0.9] * len(xs), [avg * 1.1] * len(xs), "#2ca02c")
    chart.hline(avg, "#444", f"average {avg:.4g}")
    fitted = [fit.intercept + fit.slope * i for i in range(len(xs))]
    chart.line(xs, fitted, "#d62728", dash="6 4")
    chart.line(xs, fit.values, svg.colour(0))
    chart.points(xs, fit.values, svg.colour(0), label)
    chart.legend(label, svg.colour(0))
    chart.legend("least-squares slope", "#d62728")
    chart.legend("±10 %", "#2ca02c")
    chart.legend("±20 %", "#ff7f0e")
    return chart.render()


def pts_run(s: EnduranceSeries) -> dict[str, object]:
    """What the template shows of one PTS run: its label, verdict, set-up, window fits, charts."""
    setup = (
        f"purge {s.purge}; workload-independent preconditioning"
        f" {'2 × region, 128 KiB sequential' if s.precondition else 'none'};"
        f" window {s.steady.window} rounds, at most {s.steady.max_rounds or 'unlimited'}"
    )
    fits = [
        [LABELS[f.variable], f"{f.average:.4g}", f"{f.range_share:.1%}", f"{f.excursion:.1%}", ok]
        for f in s.steady.fits
        for ok in ["yes" if f.ok else "no"]
    ]
    windows = "".join(steady_state_chart(s, f) for f in s.steady.fits)
    return {
        "label": _label(s),
        "sentence": steady_sentence(s),
        "setup": setup,
        "fits": fits,
        "charts": Markup(convergence_chart(s) + windows),
    }


# -- fill level and capacity multiples (the write cliff) ------------------------------------------
Getter = Callable[[dict[str, Any]], float | None]


def _mean_latency(row: dict[str, Any]) -> float | None:
    detail = row.get("detail")
    figures = detail.get("pts") if isinstance(detail, dict) else None
    return _num(figures.get("mean_latency_us")) if isinstance(figures, dict) else None


def _marks(chart: svg.Chart, marks: list[Mark], x: Callable[[Mark], float | None]) -> None:
    labelled: set[str] = set()
    for mark in marks:
        at = x(mark)
        if at is None:
            continue
        name = "" if mark.kind in labelled else mark.kind
        labelled.add(mark.kind)
        chart.vline(at, MARK_COLOURS.get(mark.kind, "#444"), name)


def series_chart(
    series: list[EnduranceSeries],
    title: str,
    xlabel: str,
    ylabel: str,
    x: Getter,
    ys: Sequence[tuple[Getter, str]],
    mark_x: Callable[[Mark], float | None],
    ylog: bool = False,
    y_range: tuple[float, float] | None = None,
    x_range: tuple[float, float] | None = None,
) -> str:
    points = [
        (xv, yv)
        for s in series
        for r in s.rows
        for get, _ in ys
        if (xv := x(r)) is not None and (yv := get(r)) is not None and (yv > 0 or not ylog)
    ]
    if not points:
        return svg.no_data(title, "no write rows with these figures")
    xs_all = [p[0] for p in points]
    ys_all = [p[1] for p in points]
    low_y = min(ys_all) if ylog else 0.0
    yr = y_range or (low_y, max(ys_all) * 1.1 or 1.0)
    xr = x_range or (min(xs_all), max(xs_all))
    chart = svg.Chart(title, xr, yr, xlabel, ylabel, ylog=ylog, width=W, height=H)
    for i, s in enumerate(series):
        for get, dash in ys:
            pts_ = [
                (xv, yv) for r in s.rows if (xv := x(r)) is not None and (yv := get(r)) is not None
            ]
            if ylog:
                pts_ = [(a, b) for a, b in pts_ if b > 0]
            if pts_:
                chart.line([a for a, _ in pts_], [b for _, b in pts_], svg.colour(i), dash=dash)
                if not dash:
                    chart.points(
                        [a for a, _ in pts_], [b for _, b in pts_], svg.colour(i), _label(s)
                    )
        chart.legend(_label(s), svg.colour(i))
        _marks(chart, s.marks, mark_x)
    for kind, colour in MARK_COLOURS.items():
        if any(m.kind == kind for s in series for m in s.marks):
            chart.legend(kind, colour)
    return chart.render()


def _fill(row: dict[str, Any]) -> float | None:
    value = _num(row.get("fill_fraction"))
    return None if value is None else 100.0 * value


def _multiple(row: dict[str, Any]) -> float | None:
    return _num(row.get("capacity_multiple"))


def _getter(key: str) -> Getter:
    return lambda row: _num(row.get(key))


LATENCY_LINES: tuple[tuple[Getter, str], ...] = (
    (_mean_latency, ""),
    (_getter("lat_p99_us"), "6 4"),
    (_getter("lat_max_us"), "2 3"),
)


def cliff_charts(series: list[EnduranceSeries]) -> str:
    def fill_mark(m: Mark) -> float:
        return 100.0 * m.fill

    def multiple_mark(m: Mark) -> float | None:
        return m.capacity_multiple

    mbs = ((_getter("mb_per_s"), ""),)
    iops = ((_getter("iops"), ""),)
    return "".join(
        [
            series_chart(
                series, "Throughput vs fill level", "fill %", "MB/s", _fill, mbs, fill_mark
            ),
            series_chart(
                series,
                "Latency vs fill level: mean (solid), p99 (dashed), max (dotted)",
                "fill %",
                "µs (log)",
                _fill,
                LATENCY_LINES,
                fill_mark,
                ylog=True,
            ),
            series_chart(
                series,
                "Write cliff: throughput vs drive capacity written",
                "capacity multiples written (host bytes / tested capacity)",
                "MB/s",
                _multiple,
                mbs,
                multiple_mark,
            ),
            series_chart(
                series,
                "IOPS vs drive capacity written",
                "capacity multiples written",
                "IOPS",
                _multiple,
                iops,
                multiple_mark,
            ),
            series_chart(
                series,
                "Latency vs capacity written: mean (solid), p99 (dashed), max (dotted)",
                "capacity multiples written",
                "µs (log)",
                _multiple,
                LATENCY_LINES,
                multiple_mark,
                ylog=True,
            ),
        ]
    )


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.4g}" if values else "n/a"


def summary_row(s: EnduranceSeries) -> list[object]:
    writes = [r for r in s.rows if r.get("kind") == "write"]
    mbs = [v for r in writes if (v := _num(r.get("mb_per_s"))) is not None]
    iops = [v for r in writes if (v := _num(r.get("iops"))) is not None]
    means = [v for r in writes if (v := _mean_latency(r)) is not None]
    worst = [v for r in s.rows if (v := _num(r.get("lat_max_us"))) is not None]
    multiple = _num(s.rows[-1].get("capacity_multiple")) if s.rows else None
    return [
        s.drive.split("|")[-1],
        s.campaign,
        s.discard,
        s.purge,
        "yes" if s.precondition else "no",
        len(s.rounds),
        steady_sentence(s),
        _median(mbs),
        f"{min(mbs):.4g}" if mbs else "n/a",
        _median(iops),
        f"{min(iops):.4g}" if iops else "n/a",
        _median(means),
        f"{max(worst):.4g}" if worst else "n/a",
        "n/a" if multiple is None else f"{multiple:.2f}",
        sum(1 for m in s.marks if m.kind == "cut"),
        sum(1 for m in s.marks if m.kind == "retention"),
    ]


SUMMARY_HEAD = (
    "drive",
    "campaign",
    "discard",
    "purge",
    "preconditioned",
    "rounds",
    "steady state",
    "MB/s median",
    "MB/s min",
    "IOPS median",
    "IOPS min",
    "mean latency µs median",
    "max latency µs",
    "capacity written ×",
    "cuts",
    "retention checks",
)


def trim_section(pair: TrimPair) -> dict[str, object]:
    """TRIM off beside TRIM on, on the same scales (MB/s, capacity multiples from 0) so the
    difference is visible."""
    both = [pair.off, pair.on]
    top = max((_num(r.get("mb_per_s")) or 0.0) for s in both for r in s.rows) * 1.1 or 1.0
    right = max((_num(r.get("capacity_multiple")) or 0.0) for s in both for r in s.rows) or 1.0
    charts = []
    for s in both:
        charts.append(
            series_chart(
                [s],
                f"TRIM {'on (' + s.discard + ')' if s.trim else 'off'}: MB/s vs capacity written",
                "capacity multiples written",
                "MB/s",
                _multiple,
                ((_getter("mb_per_s"), ""),),
                lambda m: m.capacity_multiple,
                y_range=(0.0, top),
                x_range=(0.0, right),
            )
        )
    off, on = (
        [
            v
            for r in s.rows
            if r.get("kind") == "write" and (v := _num(r.get("mb_per_s"))) is not None
        ]
        for s in both
    )
    change = ""
    if off and on and statistics.median(off) > 0:
        delta = statistics.median(on) / statistics.median(off) - 1.0
        change = f" Median write-interval MB/s with TRIM {delta:+.0%} against without."
    return {
        "drive": pair.drive.split("|")[-1],
        "off": pair.off.campaign,
        "on": pair.on.campaign,
        "discard": pair.on.discard,
        "change": change,
        "rows": [summary_row(s) for s in both],
        "charts": Markup("".join(charts)),
    }


def endurance_sections(m: ModelReport) -> str:
    """The PTS, fill/cliff and TRIM sections of one model ("" without endurance series)."""
    if not m.endurance:
        return ""
    return ENV.get_template("endurance.html.j2").render(
        m=m,
        summary_head=SUMMARY_HEAD,
        summary=[summary_row(s) for s in m.endurance],
        runs=[pts_run(s) for s in m.endurance],
        cliff=Markup(cliff_charts(m.endurance)),
        trims=[trim_section(p) for p in m.trim_pairs],
    )
