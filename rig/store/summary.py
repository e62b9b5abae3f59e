"""Reads for the short campaign summary (reports/summary.py)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from rig.store.connection import StoreConnection


class SummaryReads(StoreConnection):
    """What `rig report`'s summary shows of the latest campaign and every drive."""

    def latest_campaign_head(self) -> list[sqlite3.Row]:
        """(name, station, status) of the latest campaign; no row in an empty store."""
        return self.query("SELECT name, station, status FROM campaign ORDER BY id DESC LIMIT 1")

    def all_drives(self) -> list[sqlite3.Row]:
        return self.query("SELECT * FROM drive ORDER BY campaign_id, channel")

    def criteria_of_campaign(self, campaign_id: int) -> dict[str, Any]:
        """The campaign's stored pass criteria (rig.config.Criteria as JSON; {} where none)."""
        rows = self.query("SELECT criteria FROM campaign WHERE id = ?", (campaign_id,))
        value = json.loads(rows[0]["criteria"]) if rows and rows[0]["criteria"] else {}
        return value if isinstance(value, dict) else {}

    def cycles_of(self, drive_id: int) -> list[sqlite3.Row]:
        return self.query("SELECT * FROM cycle WHERE drive_id = ?", (drive_id,))

    def finding_totals_of_drive(self, drive_id: int) -> list[sqlite3.Row]:
        """(class, failure, n, blocks) of the drive's findings."""
        return self.query(
            "SELECT class, failure, n, blocks FROM finding_total WHERE drive_id = ?"
            " ORDER BY class, failure",
            (drive_id,),
        )

    def failure_examples(self, limit: int) -> list[sqlite3.Row]:
        """The first `limit` failure findings of the store, with their drive and cycle."""
        return self.query(
            "SELECT d.channel, d.model, c.seq AS cycle, f.class, f.lba_first, f.lba_count,"
            " f.expected_gen, f.observed_gen, f.detail FROM finding f"
            " JOIN cycle c ON c.id = f.cycle_id"
            " JOIN drive d ON d.id = c.drive_id WHERE f.failure = 1 ORDER BY f.id LIMIT ?",
            (limit,),
        )
