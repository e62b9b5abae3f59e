"""What a report holds does not grow with cuts: after the analysis, and after the page
is rendered up to its write (every chart drawn, its marks not yet made), the memory still
allocated (tracemalloc: numpy's arrays included) is the same for a store of 800 cuts and one of
4,000, within a margin far below one 8-byte number per cut. A per-cut array surviving to the
page's write (the sorted return times of the return-time chart, the coordinates of the delay
chart, the return times kept for the quantiles) holds 8 to 40 B a cut: 25 to 130 KB more here
(main at b62a04d: +7.9 B a cut after the analysis, +32 B rendered; this code: +0).
Not timed: bytes held, counted by tracemalloc."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from reports.analysis import reliability as analysis
from reports.load import cuts, dataset
from reports.render import deferred, html
from rig.check import failures
from tests.reports.golden_report import CASES, GOLDEN, report_files
from tests.reports.storebuilder import DriveSpec, build

SMALL, LARGE = 400, 2000  # cuts per drive, two drives
# allowed growth of what is held, per cut added: a quarter of one float64 per cut
ALLOWED_PER_CUT = 2.0


def _store(path: Path, per_drive: int) -> Path:
    outcomes = [failures.LOST_DURABLE if i % 7 == 3 else "ok" for i in range(per_drive)]
    delays = [(0.5 + (i % 97) * 1.3, 2.0 + (i % 89) * 3.1) for i in range(per_drive)]
    drives = [
        DriveSpec("Model M", f"S{k}", outcomes, channel=k, return_ms=60 + 10 * k, delays_ms=delays)
        for k in range(2)
    ]
    return build(path, drives)


def _held(path: Path) -> tuple[int, int]:
    """Bytes allocated and still held after the analysis, and after the page is rendered (its
    charts drawn) but not yet written; the one-at-a-time slots of reports.load.cuts let go."""
    data = dataset.load([str(path)])
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        report = analysis.analyse(data, 0.95)
        cuts.let_go()
        gc.collect()
        analysed = tracemalloc.get_traced_memory()[0] - start
        text = html.render_text(report, 0.0)
        cuts.let_go()
        gc.collect()
        rendered = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    page = deferred.join(text)  # the marks are made now: one per cut in the delay chart
    delay_marks = page.count('r="3" fill="#7fbf7b"') + page.count('r="3.5" fill="#b2182b"')
    assert delay_marks == report.models[0].cuts == 2 * len(data.runs[0].cuts)
    return analysed, rendered


def test_what_a_report_holds_does_not_grow_with_cuts(tmp_path: Path) -> None:
    small_store = _store(tmp_path / "small.sqlite", SMALL)
    _held(small_store)  # (once before: what stays after a first report, templates compiled...)
    small = _held(small_store)
    large = _held(_store(tmp_path / "large.sqlite", LARGE))
    added = 2 * (LARGE - SMALL)
    for stage, a, b in zip(
        ("after the analysis", "rendered, before the write"), small, large, strict=True
    ):
        assert b - a < ALLOWED_PER_CUT * added, (
            f"{stage}: {a} B held at {2 * SMALL} cuts, {b} B at {2 * LARGE}"
            f" ({(b - a) / added:.1f} B per cut added)"
        )


@pytest.mark.parametrize("case", sorted(CASES))
def test_read_in_pieces_of_a_few_rows_the_report_is_the_reference(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report reads the runs' columns a piece at a time (reports.load.cuts.column_chunks); with
    pieces of 7 rows, so that every pass meets many boundaries (a few per drive in the golden
    stores otherwise: none), every file is still the reference's."""
    monkeypatch.setattr(cuts, "ROWS_AT_A_TIME", 7)
    files = report_files(case, tmp_path)
    expected = {p.name: p.read_text(encoding="utf-8") for p in (GOLDEN / case).iterdir()}
    assert sorted(files) == sorted(expected)
    for name, text in expected.items():
        assert files[name] == text, f"{case}/{name} differs from the reference"
