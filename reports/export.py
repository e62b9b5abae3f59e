"""Write a report folder from one or more stores: one record (reports/analysis/record.py) from the
analysis, and each output a consumer of it: report.html and one page per model
(reports/render/html.py on reports/render/templates/), report.json (reports/render/json_out.py),
the CSV tables (reports/render/csv_tables.py), junit.xml (reports/render/junit.py) and, where asked,
a Markdown summary (reports/render/markdown.py)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from reports.analysis import reliability as analysis
from reports.analysis import window
from reports.analysis.record import ModelReport, Report
from reports.load import dataset
from reports.render import (
    brownout,
    csv_tables,
    deferred,
    html,
    json_out,
    junit,
    markdown,
    ocp,
    timing,
    window_html,
)


def write_report(
    db_paths: Sequence[str],
    out_dir: str,
    confidence: float = 0.95,
    junit_path: str = "",
    markdown_path: str | None = None,
) -> str:
    """Build the report of the given stores into `out_dir`; returns the HTML file's path."""
    data = dataset.load(db_paths)
    return write_dataset_report(data, out_dir, confidence, junit_path, markdown_path)


def write_dataset_report(
    data: dataset.Dataset,
    out_dir: str,
    confidence: float = 0.95,
    junit_path: str = "",
    markdown_path: str | None = None,
) -> str:
    """Build the report of a dataset (stores, the central database, or both merged); its JUnit
    XML goes to `junit_path` (default: junit.xml in `out_dir`), a Markdown summary to
    `markdown_path` where given."""
    report = analysis.analyse(data, confidence)
    windows = window.analyse(data)  # the window of vulnerability: its own section and key
    extra_json = {"window": window.to_json(windows)} if windows else {}
    sags = brownout.analyse(data, confidence)  # the brownout map (sag campaigns only)
    extra_json.update({"brownout": [m.to_json() for m in sags]} if sags else {})
    unmapped = brownout.not_mapped(data)  # sags of the central database: not mapped yet
    accounts = ocp.analyse(data)  # the OCP log and readiness (drives that report them only)
    extra_json.update({"ocp": ocp.to_json(accounts)} if accounts else {})
    timed = timing.analyse(data)  # where the cuts fell against their plan
    extra_json.update({"timing": timing.to_json(timed)} if timed else {})
    window_part = window_html.window_section(windows)  # before the models' finding lists
    extra_html = brownout.section(sags, unmapped) + ocp.section(accounts) + timing.section(timed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = time.time()
    page = out / "report.html"
    deferred.write(str(page), html.render_text(report, now, extra_html, window_part))
    deferred.write(str(out / "report.json"), json_out.json_text(report, now, extra_json))
    junit.write(report, junit_path or out / "junit.xml")
    csv_tables.write_csvs(report, data, out)
    ocp.write_csv(accounts, out)
    if markdown_path:
        markdown.write(report, markdown_path, now)
    for model in report.models:  # a page per model too, for a file that cites one model
        alone = html.render_text(model_alone(report, model), now)
        deferred.write(str(out / html.model_page(model.model)), alone)
    return str(page)


def model_alone(report: Report, model: ModelReport) -> Report:
    """The record of one model: its figures and its comparisons with the others."""
    pairs = [c for c in report.comparisons if model.model in (c.model_a, c.model_b)]
    return dataclasses.replace(report, models=[model], comparisons=pairs)
