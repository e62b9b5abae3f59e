"""Stores as an older rig left them, for the tests of migration and of readers that must not
migrate: one statement per schema step taken back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# v16 -> v12: the undelivered-notices index (v16), each cut's exposed classes (v15), each
# cycle's realized delay (v14), the power-ons of a cycle (v13)
TO_V12 = (
    "DROP INDEX IF EXISTS event_notify; DROP TABLE exposure_total;"
    " ALTER TABLE cycle DROP COLUMN exposed;"
    " DROP INDEX cycle_off_range; ALTER TABLE cycle DROP COLUMN realized_delay_ns;"
    " ALTER TABLE cycle DROP COLUMN timed_from;"
    " ALTER TABLE cycle DROP COLUMN delay_error_ns; ALTER TABLE cycle DROP COLUMN delay_in_range;"
    " DROP TABLE power_on; PRAGMA user_version = 12;"
)
# v12 -> v11: the per-drive cycle sums and the index of return times
TO_V11 = TO_V12 + " DROP INDEX cycle_return; DROP TABLE cycle_total; PRAGMA user_version = 11;"
# v11 -> v10: the finding summaries (per-drive totals, lost-after lists, each cycle's classes)
TO_V10 = TO_V11 + (
    " DROP TABLE finding_total; DROP TABLE lost_after;"
    " ALTER TABLE cycle DROP COLUMN failure_classes; PRAGMA user_version = 10;"
)


def downgrade_to_v12(path: Path | str) -> None:
    """Take a current store back to before the exposure migration, its rows kept (the
    migration recomputes each cut's exposure from its ledger)."""
    db = sqlite3.connect(path)
    try:
        db.executescript(TO_V12)
    finally:
        db.close()


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
