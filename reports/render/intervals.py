"""Endurance intervals (store v6 `endurance_interval`) per drive, for the report's Endurance part:
the summary row of each drive (writes, host data, TBW, fill, steady state, throughput, latency
percentiles, verification) and the charts of throughput and latency against host data written,
where a write cliff shows as the drive fills. A table of another shape (`interval`, rows with a
`drive_id`) gets a chart per numeric column."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from reports.analysis.record import NOT_ENOUGH_DATA, ModelReport
from reports.render import svg

Row = dict[str, Any]
ENDURANCE_COLUMNS = {"kind", "mb_per_s", "host_bytes_total", "lat_p99_us", "steady", "seq"}
HEAD = (
    *("drive", "intervals", "host GB written", "TBW used", "fill", "steady state"),
    *("MB/s median", "MB/s min", "latency samples / interval", "p50 µs median"),
    *("p99 µs median", "p99 µs max", "p99.9 µs median", "blocks verified", "failures"),
    "retention checks",
)


def is_v6(m: ModelReport) -> bool:
    return bool(m.intervals) and ENDURANCE_COLUMNS.issubset(m.intervals[0])


def num(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def by_drive(m: ModelReport) -> dict[str, list[Row]]:
    """Each drive's intervals, by serial, in drive order."""
    drives: dict[str, list[Row]] = {}
    for row in m.intervals:
        drives.setdefault(str(row["drive"]).split("|")[-1], []).append(row)
    return dict(sorted(drives.items()))


def percentile_cell(writes: list[Row], key: str, summary: Callable[[list[float]], float]) -> str:
    """`summary` (median, max) of a latency percentile over the intervals that state it; an
    interval whose samples could not support it stores NULL beside its sample count
    (`lat_samples`), and such intervals are said to have too little data, never given a number."""
    values = [v for v in (num(r.get(key)) for r in writes) if v is not None]
    short = sum(1 for r in writes if num(r.get(key)) is None and (num(r.get("lat_samples")) or 0))
    if not values:
        return NOT_ENOUGH_DATA if short else "n/a"
    cell = f"{summary(values):.0f}"
    return cell + (f" ({short} intervals: {NOT_ENOUGH_DATA})" if short else "")


def summary_row(drive: str, intervals: list[Row]) -> list[object]:
    """One drive's row of the Endurance table."""
    writes = [r for r in intervals if r.get("kind") == "write"]
    retention = [r for r in intervals if r.get("kind") == "retention"]
    last = writes[-1] if writes else intervals[-1]
    # write intervals by their own number (retention rows share `seq`, not this numbering);
    # stores before v10 have no interval_no: the write rows' order is the same numbering
    numbers = [r.get("interval_no") or n for n, r in enumerate(writes, 1)]
    steady = next((k for k, r in zip(numbers, writes, strict=True) if r.get("steady")), None)
    speeds = [v for v in (num(r.get("mb_per_s")) for r in writes) if v is not None]
    samples = [int(v) for v in (num(r.get("lat_samples")) for r in writes) if v is not None]
    tbw = num(last.get("tbw_fraction"))
    fill = num(last.get("fill_fraction"))
    return [
        drive,
        len(writes),
        f"{(num(last.get('host_bytes_total')) or 0) / 1e9:.3g}",
        "not rated" if tbw is None else f"{tbw * 100:.3g}%",
        "n/a" if fill is None else f"{fill:.0%}",
        "not reached" if steady is None else f"from interval {steady}",
        f"{statistics.median(speeds):.1f}" if speeds else "n/a",
        f"{min(speeds):.1f}" if speeds else "n/a",
        f"{min(samples):,}–{max(samples):,}" if samples else "n/a",
        percentile_cell(writes, "lat_p50_us", statistics.median),
        percentile_cell(writes, "lat_p99_us", statistics.median),
        percentile_cell(writes, "lat_p99_us", max),
        percentile_cell(writes, "lat_p999_us", statistics.median),
        int(sum(num(r.get("verified_blocks")) or 0 for r in intervals)),
        int(sum(num(r.get("failures")) or 0 for r in intervals)),
        f"{len(retention)} ({int(sum(num(r.get('failures')) or 0 for r in retention))} failing)",
    ]


def summary_rows(m: ModelReport) -> list[list[object]]:
    return [summary_row(drive, intervals) for drive, intervals in by_drive(m).items()]


def write_charts(m: ModelReport) -> str:
    """Throughput (steady intervals marked) and latency p50/p99/p99.9 against host data
    written, per drive; "" when no write interval states both."""
    series = {
        drive: [
            r
            for r in intervals
            if r.get("kind") == "write"
            and num(r.get("host_bytes_total")) is not None
            and num(r.get("mb_per_s")) is not None
        ]
        for drive, intervals in by_drive(m).items()
    }
    points = [r for rs in series.values() for r in rs]
    if not points:
        return ""
    speed, latency = _write_axes(points)
    for i, (drive, rs) in enumerate(series.items()):
        if not rs:
            continue
        xs = [(num(r["host_bytes_total"]) or 0) / 1e9 for r in rs]
        speed.line(xs, [num(r["mb_per_s"]) or 0 for r in rs], svg.colour(i))
        steady = [(x, num(r["mb_per_s"]) or 0) for x, r in zip(xs, rs, strict=True) if r["steady"]]
        speed.points([x for x, _ in steady], [y for _, y in steady], svg.colour(i), "steady")
        speed.legend(drive, svg.colour(i))
        for key, dash in (("lat_p50_us", "2 3"), ("lat_p99_us", ""), ("lat_p999_us", "6 4")):
            pts = [(x, v) for x, r in zip(xs, rs, strict=True) if (v := num(r.get(key)))]
            if pts:
                latency.line([x for x, _ in pts], [y for _, y in pts], svg.colour(i), dash=dash)
        latency.legend(drive, svg.colour(i))
    return speed.render() + latency.render()


def _write_axes(points: Sequence[Row]) -> tuple[svg.Chart, svg.Chart]:
    gb = [(num(r["host_bytes_total"]) or 0) / 1e9 for r in points]
    speeds = [num(r["mb_per_s"]) or 0 for r in points]
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
        if (v := num(r.get(k)))
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
    return speed, latency


def numeric_series(rows: list[Row]) -> dict[str, list[float]]:
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


def generic_charts(m: ModelReport) -> str:
    """A chart per numeric column (the first eight) of an interval table of another shape."""
    charts = []
    drives: dict[str, list[Row]] = {}
    for row in m.intervals:
        drives.setdefault(str(row["drive"]), []).append(row)
    series_names = sorted({k for rows in drives.values() for k in numeric_series(rows)})
    for name in series_names[:8]:
        all_values = [v for rows in drives.values() for v in numeric_series(rows).get(name, [])]
        if not all_values:
            continue
        longest = max(len(rows) for rows in drives.values())
        chart = svg.Chart(
            name.replace("_", " "),
            (0, max(longest - 1, 1)),
            (min(0.0, min(all_values)), max(all_values) * 1.05 or 1.0),
            "interval",
            name,
            width=420,
            height=240,
        )
        for i, (drive, rows) in enumerate(sorted(drives.items())):
            ys = numeric_series(rows).get(name)
            if ys:
                chart.line(list(range(len(ys))), ys, svg.colour(i))
                chart.legend(drive.split("|")[-1], svg.colour(i))
        charts.append(chart.render())
    return "".join(charts)
