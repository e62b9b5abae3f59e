"""A campaign's summary in Markdown (`rig report --markdown FILE`): per model its verdict, cuts,
failing cuts, bound and reliability shown, the verdict's reasons, and each drive's line; for a
ticket, a pull request or a chat message. A consumer of the record like the others: the figures
are the report's (report.json's), written by reports/render/templates/summary.md.j2."""

from __future__ import annotations

import datetime
from pathlib import Path

import jinja2

from reports.analysis.record import NOT_REPORTED, Report
from reports.render.cells import pct

# Markdown, not HTML: no autoescaping; a table cell escapes what would end it (`cell`)
ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reports.render", "templates"),
    autoescape=False,
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
)


def cell(value: object) -> str:
    """A value as one Markdown table cell: a pipe escaped, line breaks as spaces."""
    return " ".join(str(value).split("\n")).replace("|", "\\|")


ENV.filters.update(cell=cell, pct=pct, fmt=format)


def text(report: Report, generated_at: float) -> str:
    when = datetime.datetime.fromtimestamp(generated_at, tz=datetime.UTC)
    return ENV.get_template("summary.md.j2").render(
        report=report, when=when.strftime("%Y-%m-%d %H:%M UTC"), not_reported=NOT_REPORTED
    )


def write(report: Report, path: str | Path, generated_at: float) -> None:
    Path(path).write_text(text(report, generated_at), encoding="utf-8")
