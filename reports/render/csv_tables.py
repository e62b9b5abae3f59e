"""The CSV tables of a report, one row of TABLES per file: its name, its header and the function
that makes its rows from the record (cuts.csv: its lines, made a chunk at a time from the
dataset's columns, so a store of a million cuts is written in bounded pieces).

models.csv, classes.csv, drives.csv, cuts.csv (one row per cycle, with its outcome and delays),
comparisons.csv, survival.csv, endurance.csv (one row per endurance interval, with its latency
sample count), endurance_series.csv (per PTS run: every preconditioning pass and write interval
with its round, verdict, fill level and capacity multiple written), endurance_marks.csv (cuts and
retention checks on those axes) and pts_windows.csv (each tracking variable over the measurement
window: average, slope, range).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.analysis.endurance import EnduranceSeries, SteadyStateFit
from reports.analysis.record import NOT_ENOUGH_DATA, Report
from reports.load.cuts import CutTable, SpilledCuts, column_chunks, table_of
from reports.load.dataset import Dataset, DriveData
from reports.load.run_parts import SummarisedCuts

Row = Sequence[object]


@dataclass(frozen=True)
class CsvTable:
    """One CSV file: rows of cells from the record (csv.writer writes them), or lines already
    made from the dataset (the per-cut table)."""

    name: str
    head: Sequence[str]
    rows: Callable[[Report], Iterable[Row]] | None = None
    lines: Callable[[Dataset], Iterable[str]] | None = None
    # a table of a kind of run the stores may not hold (endurance): written only with a row,
    # never as a header alone beside a report that has no such run
    optional: bool = False

    def write(self, out: Path, report: Report, data: Dataset) -> Path | None:
        rows = iter(self.rows(report)) if self.rows is not None else iter(())
        first = next(rows, None)
        if self.optional and first is None:
            return None
        path = out / self.name
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(self.head)
            if first is not None:
                writer.writerow(first)
                writer.writerows(rows)
            if self.lines is not None:
                handle.writelines(self.lines(data))
        return path


def write_csvs(report: Report, data: Dataset, out: Path) -> list[Path]:
    written = (table.write(out, report, data) for table in TABLES)
    return [path for path in written if path is not None]


MODELS_HEAD = (
    *("model", "drives", "cuts", "failing_cuts", "rate", "upper_bound"),
    *("reliability_demonstrated", "drives_failed", "drives_dead", "rig_errors", "interrupted"),
    *("criteria", "verdict", "verdict_rule"),
)
EXPOSURE_HEAD = (
    *("model", "class", "exposed_cuts", "failing_cuts", "unknown_exposure", "rate"),
    *("upper_bound", "zero_tolerance", "verdict"),
)
CLASSES_HEAD = ("model", "class", "findings", "blocks", "cuts_with", "cuts", "rate", "upper_bound")
DRIVES_HEAD = (
    *("model", "serial", "wwn", "firmware", "stations", "campaigns", "cuts", "failing_cuts"),
    *("upper_bound", "rig_errors", "interrupted", "allowed_losses", "bytes_written"),
    *("blocks_checked", "full_scans", "blocks_unchecked", "dead_at_cut", "median_return_ms"),
    *("findings", "verdict"),
)
COMPARISONS_HEAD = (
    *("outcome", "model_a", "failing_a", "cuts_a", "model_b", "failing_b", "cuts_b"),
    *("fisher_p", "holm_p"),
)
SURVIVAL_HEAD = ("model", "cuts", "at_risk", "events", "survival", "lower", "upper")
MARKS_HEAD = ("model", "drive", "campaign", "kind", "seq", "fill_fraction", "capacity_multiple")


def _model_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        p = m.any_failure
        yield (
            *(m.model, len(m.drives), m.cuts, p.failed, p.rate, p.upper),
            *(m.reliability_demonstrated, m.drive_level.failed, m.drives_dead, m.rig_errors),
            *(m.interrupted, m.criteria.describe(), m.verdict.label, m.verdict.rule),
        )


def _exposure_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        for e in m.exposure:
            c = e.cuts
            yield (m.model, e.cls, c.trials, c.failed, e.unknown, c.rate, c.upper,
                   int(e.zero_tolerance), e.verdict)  # fmt: skip


def _class_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        for s in m.classes:
            c = s.cuts
            yield (m.model, s.cls, s.findings, s.blocks, c.failed, c.trials, c.rate, c.upper)


def _drive_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        for d in m.drives:
            yield (
                *(d.model, d.serial, d.wwn, " ".join(d.firmware), " ".join(d.stations)),
                *(" ".join(d.campaigns), d.cuts.trials, d.cuts.failed, d.cuts.upper),
                *(d.rig_errors, d.interrupted, d.allowed_losses, d.bytes_written),
                *(d.blocks_checked, d.full_scans, d.blocks_unchecked, d.dead_at_cut),
                *(d.median_return_ms, json.dumps(d.findings, sort_keys=True), d.verdict),
            )


def _comparison_rows(report: Report) -> Iterator[Row]:
    for c in report.comparisons:
        a, b = c.a, c.b
        yield (
            *(c.outcome, c.model_a, a.failed, a.trials, c.model_b, b.failed, b.trials),
            *(c.p_value, c.p_holm),
        )


def _survival_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        for s in m.survival.steps:
            yield (m.model, s.time, s.at_risk, s.events, s.survival, s.lower, s.upper)


def _interval_rows(report: Report) -> Iterator[Row]:
    return (_endurance_row(m.model, r) for m in report.models for r in m.intervals)


def _series_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        for s in m.endurance:
            yield from (_series_row(m.model, s, r) for r in s.rows)


def _mark_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        for s in m.endurance:
            for k in s.marks:
                yield (m.model, s.drive, s.campaign, k.kind, k.seq, k.fill, k.capacity_multiple)


def _pts_steady_state_rows(report: Report) -> Iterator[Row]:
    for m in report.models:
        for s in m.endurance:
            yield from (_steady_state_row(m.model, s, f) for f in s.steady.fits)


def _cuts_lines(data: Dataset) -> Iterator[str]:
    for run in data.runs:
        yield from _cut_lines(run)


CUTS_HEAD = (
    *("store", "campaign", "model", "serial", "channel", "seq", "status", "cut_delay_ms"),
    *("ack_to_cut_ms", "flush_to_cut_ms", "gone_ms", "return_ms", "failure_classes"),
    *("realized_delay_ms", "delay_error_ms"),
)
CHUNK = 8192  # rows made at a time


def _csv_cell(value: object) -> str:
    """One cell as csv.writer writes it (quoted where it must be), without the line end."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(["", value])  # "" alone would be quoted
    return buffer.getvalue()[1:]


def _cut_lines(run: DriveData) -> Iterator[str]:
    """cuts.csv's rows of the run, as csv.writer writes them, made a chunk at a time from its
    columns (read a piece at a time); a run of the central report's only if asked
    (`--cut-rows`, streamed from the server a chunk at a time: docs/decisions.md, "The central
    report states figures from the server's aggregates")."""
    head = "".join(
        _csv_cell(v) + ","
        for v in (run.campaign.source, run.campaign.name, run.model, run.serial, run.channel)
    )
    if isinstance(run.cuts, SummarisedCuts):
        for table in run.cuts.listed() if run.cuts.listed is not None else ():
            yield from _table_lines(head, table)
        return
    yield from _table_lines(
        head, run.cuts if isinstance(run.cuts, SpilledCuts) else table_of(run.cuts)
    )


def _table_lines(head: str, source: SpilledCuts | CutTable) -> Iterator[str]:
    """The lines of a table's rows: the run's own cells (`head`) once, a status or class set
    once per kind, a float by repr."""
    statuses = [_csv_cell(s) for s in source.statuses]
    classes = [_csv_cell(" ".join(sorted(s))) for s in source.class_sets]
    names = (
        *("seq", "cut_delay_ms", "ack_to_cut_ms", "flush_to_cut_ms", "gone_ms", "return_ms"),
        *("realized_delay_ms", "delay_error_ms"),
    )
    for piece in column_chunks(source, (*names, "status", "classes")):
        for start in range(0, len(piece["status"]), CHUNK):
            end = start + CHUNK
            columns = [piece[n][start:end].tolist() for n in names]
            codes = zip(
                piece["status"][start:end].tolist(),
                piece["classes"][start:end].tolist(),
                strict=True,
            )
            yield "".join(
                f"{head}{seq},{statuses[s]},{delay!r},{'' if a != a else repr(a)},"
                f"{'' if f != f else repr(f)},{'' if g != g else repr(g)},"
                f"{'' if b != b else repr(b)},{classes[c]},"
                f"{'' if r != r else repr(r)},{'' if e != e else repr(e)}\r\n"
                for (seq, delay, a, f, g, b, r, e), (s, c) in zip(
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


def _steady_state_row(model: str, s: EnduranceSeries, f: SteadyStateFit) -> list[object]:
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
        p99 = NOT_ENOUGH_DATA
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
            value = NOT_ENOUGH_DATA
        cells.append(value)
    return cells


TABLES = (
    CsvTable("models.csv", MODELS_HEAD, _model_rows),
    CsvTable("classes.csv", CLASSES_HEAD, _class_rows),
    CsvTable("exposure.csv", EXPOSURE_HEAD, _exposure_rows),
    CsvTable("drives.csv", DRIVES_HEAD, _drive_rows),
    CsvTable("cuts.csv", CUTS_HEAD, lines=_cuts_lines),
    CsvTable("comparisons.csv", COMPARISONS_HEAD, _comparison_rows),
    CsvTable("survival.csv", SURVIVAL_HEAD, _survival_rows),
    CsvTable("endurance.csv", ENDURANCE_HEAD, _interval_rows, optional=True),
    CsvTable("endurance_series.csv", SERIES_HEAD, _series_rows, optional=True),
    CsvTable("endurance_marks.csv", MARKS_HEAD, _mark_rows, optional=True),
    CsvTable("pts_windows.csv", PTS_WINDOW_HEAD, _pts_steady_state_rows, optional=True),
)
