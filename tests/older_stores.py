"""Stores as an older rig left them, for the tests of migration and of readers that must not
migrate: one statement per schema step taken back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# v12 -> v11: the per-drive cycle sums and the index of return times
TO_V11 = "DROP INDEX cycle_return; DROP TABLE cycle_total; PRAGMA user_version = 11;"
# v11 -> v10: the finding summaries (per-drive totals, lost-after lists, each cycle's classes)
TO_V10 = TO_V11 + (
    " DROP TABLE finding_total; DROP TABLE lost_after;"
    " ALTER TABLE cycle DROP COLUMN failure_classes; PRAGMA user_version = 10;"
)


def downgrade_to_v11(path: Path | str) -> None:
    """Take a current store back to v11, its rows kept (the v12 migration backfills them)."""
    db = sqlite3.connect(path)
    try:
        db.executescript(TO_V11)
    finally:
        db.close()


def downgrade_to_v10(path: Path | str) -> None:
    """Take a current store back to v10, its rows kept (the v11 migration backfills them)."""
    db = sqlite3.connect(path)
    try:
        db.executescript(TO_V10)
    finally:
        db.close()
