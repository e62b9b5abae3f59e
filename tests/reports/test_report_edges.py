"""The report's rough edges: a zero rate is said ("0 of N"), never drawn on a log
axis's floor; identical survival curves stay visible and are named identical; a finding's detail
reads as `key: value` with times in ms; the class table is cited as docs/checker.md, never by a
section number of a document outside the repository; a firmware version the drive did not report
has one wording everywhere."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

from reports import export
from reports.analysis import reliability as analysis
from reports.analysis.record import NOT_REPORTED, Report
from reports.load import dataset
from reports.render import cells, charts, deferred
from tests.reports.storebuilder import MS, DriveSpec, build

REPO = Path(__file__).resolve().parents[2]


def _report(tmp_path: Path) -> tuple[Report, str]:
    """Three models of one drive each with ten cuts and no death (the same survival curve):
    one failure-free, one failing, one whose drive reports no firmware version."""
    store = build(
        tmp_path / "s.sqlite",
        [
            DriveSpec("Clean", "C1", ["ok"] * 10),
            DriveSpec("Liar", "L1", ["ok", "lost_durable_write"] * 5, channel=1),
            DriveSpec("Silent", "S1", ["ok"] * 10, channel=2, firmware=""),
        ],
    )
    report = analysis.analyse(dataset.load([str(store)]))
    page = Path(export.write_report([str(store)], str(tmp_path / "r"))).read_text()
    return report, page


def test_a_zero_rate_is_said_not_drawn_on_the_log_axis(tmp_path: Path) -> None:
    report, _ = _report(tmp_path)
    chart = deferred.join(charts.bounds_chart(report.models, report.confidence))
    for m in report.models:
        dot = re.search(rf"<circle[^>]*><title>{m.model}: rate ", chart)
        zero = f">0 of {m.cuts}<title>{m.model}: no failing cut</title>"
        if m.any_failure.failed:
            assert dot and zero not in chart
        else:  # was a dot at the axis's floor, as if a tiny rate had been measured
            assert dot is None and zero in chart, m.model


def test_identical_survival_curves_are_told_apart(tmp_path: Path) -> None:
    report, _ = _report(tmp_path)
    chart = deferred.join(charts.survival_chart(report.models))
    curves = re.findall(
        r'<polyline class="series" points="([^"]*)"[^>]*?(/>| stroke-dasharray)', chart
    )
    assert len(curves) == 3 and len({points for points, _ in curves}) == 1  # the same curve
    dashes = re.findall(r'<polyline class="series"[^>]*?(?:stroke-dasharray="([^"]*)")?/>', chart)
    assert len(set(dashes)) == 3  # solid, and two dash patterns: each one shows
    first = report.models[0].model
    assert chart.count(f"identical to {first}") == 2


def test_finding_details_read_as_key_and_value_with_times_in_ms(tmp_path: Path) -> None:
    _, page = _report(tmp_path)
    assert "ack_to_cut_ns" not in page and "3000000" not in page  # the raw JSON
    assert f"ack to cut: {3 * MS / 1e6:g} ms<br>flush to cut: {2 * MS / 1e6:g} ms" in page
    text = cells.finding_detail(
        {"ack_to_cut_ns": 442_193_287, "gap_ns": 12_500_000_000, "tear": True, "gens": [1] * 20}
    )
    assert text.split("<br>") == [
        "ack to cut: 442.2 ms",
        "gap: 12.5 s",
        "tear: yes",
        f"gens: {' '.join(['1'] * cells.DETAIL_LIST_ITEMS)} … (20 in all)",
    ]


def test_the_class_table_is_cited_where_the_repository_has_it(tmp_path: Path) -> None:
    _, page = _report(tmp_path)
    # no numbered section of a design document, none outside the repository
    assert "§" not in page and "../shared" not in page
    assert "docs/checker.md" in page and '"The class table"' in page.replace("&quot;", '"')
    assert "## The class table" in (REPO / "docs" / "checker.md").read_text()


def test_a_firmware_not_reported_has_one_wording(tmp_path: Path) -> None:
    _, page = _report(tmp_path)
    section = page[page.index('id="m-Silent"') :]
    drive_row = section[section.index("<td>S1<br>") :]
    firmware_cell = re.match(r"<td>S1<br><code>[^<]*</code></td><td>([^<]*)</td>", drive_row)
    assert firmware_cell and firmware_cell.group(1) == escape(NOT_REPORTED)  # was "n/a"
    firmware_table = section[section.index("<h3>Firmware versions</h3>") :]
    assert firmware_table.index(escape(NOT_REPORTED)) < firmware_table.index("</table>")
