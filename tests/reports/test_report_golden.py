"""The whole report of fixed stores equals the reference written by the report before it read cuts
as columns (tests/reports/golden_report.py): every CSV, report.json and every HTML page, byte for
byte once the store location and the generation time are masked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.reports.golden_report import CASES, GOLDEN, report_files


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_content_is_unchanged(case: str, tmp_path: Path) -> None:
    files = report_files(case, tmp_path)
    expected = {p.name: p.read_text(encoding="utf-8") for p in (GOLDEN / case).iterdir()}
    assert sorted(files) == sorted(expected)
    for name, text in expected.items():
        assert files[name] == text, f"{case}/{name} differs from the reference"


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_stores_migrated_to_v11_give_the_same_report(case: str, tmp_path: Path) -> None:
    """The report from the v11 summaries (filled by the migration's backfill) equals the one
    read from the findings of the v10 stores the references were made of."""
    for name in CASES[case]:  # the references' stores are older than the summaries
        assert (
            sqlite3.connect(GOLDEN / "stores" / name).execute("PRAGMA user_version").fetchone()[0]
            < 11
        )
    files = report_files(case, tmp_path, migrate=True)
    expected = {p.name: p.read_text(encoding="utf-8") for p in (GOLDEN / case).iterdir()}
    assert sorted(files) == sorted(expected)
    for name, text in expected.items():
        assert files[name] == text, f"{case}/{name} differs from the reference"
