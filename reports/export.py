"""Write a report folder from one or more stores: report.html, report.json and CSV tables.

report.json holds every figure of the HTML (the `analysis.Report`, field for field); the CSV files
are the tables an engineer re-plots or cites: models.csv, classes.csv, drives.csv, cuts.csv (one
row per cycle, with its outcome and delays), comparisons.csv, survival.csv, endurance.csv (one
row per endurance interval, with its latency sample count), endurance_series.csv (per PTS run:
every preconditioning pass and write interval with its round, verdict, fill level and capacity
multiple written), endurance_marks.csv (cuts and retention checks on those axes) and
pts_windows.csv (each tracking variable over the measurement window: average, slope, range);
junit.xml the verdicts as JUnit XML for CI systems (reports/junit.py).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from reports import analysis, brownout, dataset, deferred, html, junit, window, window_html
from reports.analysis import Report
from reports.cuts import Counted, DelayPoints, table_of
from reports.endurance import EnduranceSeries, WindowFit

FORMAT = "rig-report/1"


def _clean(value: Any) -> Any:
    """JSON has no inf/nan: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, bytes):
        return None  # raw blobs stay in the store
    return value


def to_json(report: Report, generated_at: float) -> str:
    return deferred.join(json_text(report, generated_at))


def json_text(report: Report, generated_at: float, extra: dict[str, Any] | None = None) -> str:
    """report.json with each model's per-cut lists (return_ms, delays) as tokens
    (reports/deferred.py): written as they are made, never held whole. `extra`: keys of
    sections of their own modules (the window of vulnerability), absent when empty."""
    big: dict[str, Callable[[int], Iterator[str]]] = {}
    models = []
    for m in report.models:
        marks = {name: f"@@per-cut:{len(big) + i}@@" for i, name in enumerate(PER_CUT)}
        big[marks["return_ms"]] = functools.partial(_float_items, m.return_ms)
        big[marks["delays"]] = functools.partial(_delay_items, m.delays)
        big[marks["lost_after_ack_ms"]] = functools.partial(_counted_items, m.lost_after_ack_ms)
        big[marks["lost_after_flush_ms"]] = functools.partial(_counted_items, m.lost_after_flush_ms)
        models.append(dataclasses.replace(m, **marks))  # type: ignore[arg-type]
    plain = dataclasses.replace(report, models=models)
    body = {"format": FORMAT, "generated_at": generated_at, **dataclasses.asdict(plain)}
    for model in body["models"]:  # a model without a sequential plan: no key, as before
        if model.get("sequential") is None:
            model.pop("sequential", None)
    body.update(extra or {})
    text = json.dumps(_clean(body), indent=1, sort_keys=False)
    out, at = [], 0
    for match in re.finditer('"(@@per-cut:[0-9]+@@)"', text):
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
        depth = len(line) - len(line.lstrip(" "))
        out.append(text[at : match.start()])
        out.append(deferred.defer(functools.partial(_json_list, big[match.group(1)], depth)))
        at = match.end()
    out.append(text[at:])
    return "".join(out)


PER_CUT = ("return_ms", "delays", "lost_after_ack_ms", "lost_after_flush_ms")


def _json_list(items: Callable[[int], Iterator[str]], depth: int) -> Iterator[str]:
    """A JSON list as json.dumps(indent=1) writes it at `depth`, its items from `items(depth)`."""
    first = True
    for piece in items(depth + 1):
        yield ("[\n" if first else ",\n") + piece
        first = False
    yield "[]" if first else "\n" + " " * depth + "]"


def _float_items(values: npt.NDArray[np.float64], depth: int) -> Iterator[str]:
    pad = " " * depth
    for start in range(0, len(values), CHUNK):
        yield ",\n".join(pad + _number(v) for v in values[start : start + CHUNK].tolist())


def _counted_items(values: Counted, depth: int) -> Iterator[str]:
    """Each distinct value with its count, as the list [value, count] (decision 146)."""
    pad, inner = " " * depth, " " * (depth + 1)
    pairs = list(zip(values.values, values.counts, strict=True))
    for start in range(0, len(pairs), CHUNK):
        yield ",\n".join(
            f"{pad}[\n{inner}{_number(v)},\n{inner}{n}\n{pad}]"
            for v, n in pairs[start : start + CHUNK]
        )


def _number(v: float | None) -> str:
    if v is None or v != v or v in (math.inf, -math.inf):
        return "null"  # JSON has no NaN or inf (_clean)
    return float.__repr__(v)


def _delay_items(points: DelayPoints, depth: int) -> Iterator[str]:
    """Each cut as dataclasses.asdict(DelayPoint) would be written."""
    pad, inner = " " * depth, " " * (depth + 1)
    listed = [_json_strings(c, depth + 1) for c in points.class_lists]
    head = f'{pad}{{\n{inner}"ack_to_cut_ms": '
    for start in range(0, len(points), CHUNK):
        end = start + CHUNK
        rows = zip(
            points.ack_to_cut_ms[start:end].tolist(),
            points.flush_to_cut_ms[start:end].tolist(),
            points.cut_delay_ms[start:end].tolist(),
            points.classes[start:end].tolist(),
            strict=True,
        )
        yield ",\n".join(
            f'{head}{_number(a)},\n{inner}"flush_to_cut_ms": {_number(f)},\n'
            f'{inner}"cut_delay_ms": {_number(d)},\n{inner}"failed": {"true" if c else "false"},'
            f'\n{inner}"classes": {listed[c]}\n{pad}}}'
            for a, f, d, c in rows
        )


def _json_strings(values: list[str], depth: int) -> str:
    if not values:
        return "[]"
    pad = " " * (depth + 1)
    items = ",\n".join(pad + json.dumps(v) for v in values)
    return f"[\n{items}\n{' ' * depth}]"


def _write_csv(path: Path, head: Sequence[str], rows: list[Sequence[object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(head)
        writer.writerows(rows)


def write_csvs(report: Report, data: dataset.Dataset, out: Path) -> list[Path]:
    written = []

    def emit(name: str, head: Sequence[str], rows: list[Sequence[object]]) -> None:
        _write_csv(out / name, head, rows)
        written.append(out / name)

    emit(
        "models.csv",
        [
            "model",
            "drives",
            "cuts",
            "failing_cuts",
            "rate",
            "upper_bound",
            "reliability_demonstrated",
            "drives_failed",
            "drives_dead",
            "rig_errors",
            "interrupted",
            "criteria",
            "verdict",
        ],
        [
            [
                m.model,
                len(m.drives),
                m.cuts,
                m.any_failure.failed,
                m.any_failure.rate,
                m.any_failure.upper,
                m.reliability_demonstrated,
                m.drive_level.failed,
                m.drives_dead,
                m.rig_errors,
                m.interrupted,
                m.criteria.describe(),
                m.verdict.label,
            ]
            for m in report.models
        ],
    )
    emit(
        "classes.csv",
        ["model", "class", "findings", "blocks", "cuts_with", "cuts", "rate", "upper_bound"],
        [
            [
                m.model,
                s.cls,
                s.findings,
                s.blocks,
                s.cuts.failed,
                s.cuts.trials,
                s.cuts.rate,
                s.cuts.upper,
            ]
            for m in report.models
            for s in m.classes
        ],
    )
    emit(
        "drives.csv",
        [
            "model",
            "serial",
            "wwn",
            "firmware",
            "stations",
            "campaigns",
            "cuts",
            "failing_cuts",
            "upper_bound",
            "rig_errors",
            "interrupted",
            "allowed_losses",
            "bytes_written",
            "blocks_checked",
            "full_scans",
            "blocks_unchecked",
            "dead_at_cut",
            "median_return_ms",
            "findings",
            "verdict",
        ],
        [
            [
                d.model,
                d.serial,
                d.wwn,
                " ".join(d.firmware),
                " ".join(d.stations),
                " ".join(d.campaigns),
                d.cuts.trials,
                d.cuts.failed,
                d.cuts.upper,
                d.rig_errors,
                d.interrupted,
                d.allowed_losses,
                d.bytes_written,
                d.blocks_checked,
                d.full_scans,
                d.blocks_unchecked,
                d.dead_at_cut,
                d.median_return_ms,
                json.dumps(d.findings, sort_keys=True),
                d.verdict,
            ]
            for m in report.models
            for d in m.drives
        ],
    )
    with open(out / "cuts.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerow(CUTS_HEAD)
        for r in data.runs:
            handle.writelines(_cut_lines(r))
    written.append(out / "cuts.csv")
    emit(
        "comparisons.csv",
        [
            "outcome",
            "model_a",
            "failing_a",
            "cuts_a",
            "model_b",
            "failing_b",
            "cuts_b",
            "fisher_p",
            "holm_p",
        ],
        [
            [
                c.outcome,
                c.model_a,
                c.a.failed,
                c.a.trials,
                c.model_b,
                c.b.failed,
                c.b.trials,
                c.p_value,
                c.p_holm,
            ]
            for c in report.comparisons
        ],
    )
    emit(
        "survival.csv",
        ["model", "cuts", "at_risk", "events", "survival", "lower", "upper"],
        [
            [m.model, s.time, s.at_risk, s.events, s.survival, s.lower, s.upper]
            for m in report.models
            for s in m.survival.steps
        ],
    )
    emit(
        "endurance.csv",
        ENDURANCE_HEAD,
        [_endurance_row(m.model, r) for m in report.models for r in m.intervals],
    )
    emit(
        "endurance_series.csv",
        SERIES_HEAD,
        [_series_row(m.model, s, r) for m in report.models for s in m.endurance for r in s.rows],
    )
    emit(
        "endurance_marks.csv",
        ["model", "drive", "campaign", "kind", "seq", "fill_fraction", "capacity_multiple"],
        [
            [m.model, s.drive, s.campaign, k.kind, k.seq, k.fill, k.capacity_multiple]
            for m in report.models
            for s in m.endurance
            for k in s.marks
        ],
    )
    emit(
        "pts_windows.csv",
        PTS_WINDOW_HEAD,
        [
            _window_row(m.model, s, f)
            for m in report.models
            for s in m.endurance
            for f in s.steady.fits
        ],
    )
    return written


CUTS_HEAD = (
    *("store", "campaign", "model", "serial", "channel", "seq", "status", "cut_delay_ms"),
    *("ack_to_cut_ms", "flush_to_cut_ms", "gone_ms", "return_ms", "failure_classes"),
)
CHUNK = 8192  # rows made at a time


def _csv_cell(value: object) -> str:
    """One cell as csv.writer writes it (quoted where it must be), without the line end."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(["", value])  # "" alone would be quoted
    return buffer.getvalue()[1:]


def _cut_lines(run: dataset.DriveRun) -> Iterator[str]:
    """cuts.csv's rows of the run, as csv.writer writes them, made a chunk at a time from its
    columns: the run's own cells once, a status or class set once per kind, a float by repr."""
    t = table_of(run.cuts)
    head = "".join(
        _csv_cell(v) + ","
        for v in (run.campaign.source, run.campaign.name, run.model, run.serial, run.channel)
    )
    statuses = [_csv_cell(s) for s in t.statuses]
    classes = [_csv_cell(" ".join(sorted(s))) for s in t.class_sets]
    names = ("seq", "cut_delay_ms", "ack_to_cut_ms", "flush_to_cut_ms", "gone_ms", "return_ms")
    for start in range(0, len(t), CHUNK):
        end = start + CHUNK
        columns = [t.columns[n][start:end].tolist() for n in names]
        codes = zip(t.status[start:end].tolist(), t.classes[start:end].tolist(), strict=True)
        yield "".join(
            f"{head}{seq},{statuses[s]},{delay!r},{'' if a != a else repr(a)},"
            f"{'' if f != f else repr(f)},{'' if g != g else repr(g)},"
            f"{'' if b != b else repr(b)},{classes[c]}\r\n"
            for (seq, delay, a, f, g, b), (s, c) in zip(
                zip(*columns, strict=True), codes, strict=True
            )
        )


SERIES_HEAD = (
    "model",
    "drive",
    "campaign",
    "discard",
    "kind",
    "seq",
    "interval_no",
    "round",
    "pts_verdict",
    "fill_fraction",
    "capacity_multiple",
    "host_bytes_total",
    "mb_per_s",
    "iops",
    "mean_latency_us",
    "lat_p99_us",
    "lat_max_us",
)
PTS_WINDOW_HEAD = (
    "model",
    "drive",
    "campaign",
    "discard",
    "verdict",
    "reached_at_round",
    "variable",
    "window_first_round",
    "window_last_round",
    "average",
    "slope_per_round",
    "intercept",
    "range_share",
    "slope_excursion",
    "meets",
)


def _window_row(model: str, s: EnduranceSeries, f: WindowFit) -> list[object]:
    head: list[object] = [model, s.drive, s.campaign, s.discard, s.steady.verdict]
    fit: list[object] = [s.steady.reached_at, f.variable, f.rounds[0], f.rounds[-1]]
    return [*head, *fit, f.average, f.slope, f.intercept, f.range_share, f.excursion, f.ok]


def _series_row(model: str, series: EnduranceSeries, row: dict[str, Any]) -> list[object]:
    """One row that wrote data (preconditioning pass or write interval) of a PTS series; the
    p99 its samples could not support is "not enough data", as in endurance.csv."""
    detail = row.get("detail")
    figures = detail.get("pts", {}) if isinstance(detail, dict) else {}
    p99 = row.get("lat_p99_us")
    if p99 is None and row.get("lat_samples"):
        p99 = html.NOT_ENOUGH_DATA
    return [
        model,
        series.drive,
        series.campaign,
        series.discard,
        row.get("kind"),
        row.get("seq"),
        row.get("interval_no"),
        figures.get("round"),
        figures.get("verdict"),
        row.get("fill_fraction"),
        row.get("capacity_multiple"),
        row.get("host_bytes_total"),
        row.get("mb_per_s"),
        row.get("iops"),
        figures.get("mean_latency_us"),
        p99,
        row.get("lat_max_us"),
    ]


ENDURANCE_HEAD = (
    "model",
    "drive",
    "seq",
    "kind",
    "seconds",
    "mb_per_s",
    "iops",
    "lat_samples",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p999_us",
    "lat_max_us",
    "host_bytes_total",
    "fill_fraction",
    "steady",
    "verified_blocks",
    "failures",
)
PERCENTILES = ("lat_p50_us", "lat_p99_us", "lat_p999_us")


def _endurance_row(model: str, row: dict[str, Any]) -> list[object]:
    """One endurance interval; a percentile its samples could not support (NULL beside a
    non-zero `lat_samples`) is written as "not enough data", never as a number."""
    samples = row.get("lat_samples") or 0
    cells: list[object] = [model]
    for key in ENDURANCE_HEAD[1:]:
        value = row.get(key)
        if key in PERCENTILES and value is None and samples:
            value = html.NOT_ENOUGH_DATA
        cells.append(value)
    return cells


def write_report(
    db_paths: Sequence[str], out_dir: str, confidence: float = 0.95, junit_path: str = ""
) -> str:
    """Build the report of the given stores into `out_dir`; returns the HTML file's path."""
    return write_dataset_report(dataset.load(db_paths), out_dir, confidence, junit_path)


def write_dataset_report(
    data: dataset.Dataset, out_dir: str, confidence: float = 0.95, junit_path: str = ""
) -> str:
    """Build the report of a dataset (stores, the central database, or both merged); its JUnit
    XML goes to `junit_path` (default: junit.xml in `out_dir`)."""
    report = analysis.analyse(data, confidence)
    windows = window.analyse(data)
    extra_json = {"window": window.to_json(windows)} if windows else {}
    extra_html = window_html.window_section(windows)
    sags = brownout.analyse(data, confidence)  # the brownout map (sag campaigns only)
    extra_json.update({"brownout": [m.to_json() for m in sags]} if sags else {})
    extra_html += brownout.section(sags)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = time.time()
    page = out / "report.html"
    deferred.write(str(page), html.render_text(report, now, extra_html))
    deferred.write(str(out / "report.json"), json_text(report, now, extra_json))
    junit.write(report, junit_path or out / "junit.xml")
    write_csvs(report, data, out)
    # one self-contained page per model too, for a certification file that cites one model
    for model in report.models:
        alone = dataclasses.replace(
            report,
            models=[model],
            comparisons=[c for c in report.comparisons if model.model in (c.model_a, c.model_b)],
        )
        deferred.write(str(out / html.model_page(model.model)), html.render_text(alone, now))
    return str(page)
