"""Reads for the short campaign summary (reports/load/summary.py)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from rig.store.connection import StoreConnection
from rig.store.cycle_sums import NAMES, RETURNED


class SummaryReads(StoreConnection):
    """What `rig report`'s summary shows of the latest campaign and every drive."""

    def latest_campaign_head(self) -> list[sqlite3.Row]:
        """(name, station, status) of the latest campaign; no row in an empty store."""
        return self.query("SELECT name, station, status FROM campaign ORDER BY id DESC LIMIT 1")

    def notify_failures(self) -> list[sqlite3.Row]:
        """(kind, n, last): the notifications not delivered, per kind, with the last one's
        detail (JSON), through the partial index `event_notify` (its WHERE repeated)."""
        return self.query(
            "SELECT g.kind, g.n, e.detail AS last FROM (SELECT kind, COUNT(*) AS n,"
            " MAX(id) AS last_id FROM event"
            " WHERE kind IN ('notify_failed', 'notify_gave_up', 'notify_dropped')"
            " GROUP BY kind) g JOIN event e ON e.id = g.last_id ORDER BY g.kind"
        )

    def notify_failures_last(self, limit: int) -> list[sqlite3.Row]:
        """(kind, detail) of the newest `limit` notifications not delivered, newest first,
        through the same partial index (as many entries as there are such events)."""
        return self.query(
            "SELECT kind, detail FROM event"
            " WHERE kind IN ('notify_failed', 'notify_gave_up', 'notify_dropped')"
            " ORDER BY id DESC LIMIT ?",
            (limit,),
        )

    def all_drives(self) -> list[sqlite3.Row]:
        return self.query("SELECT * FROM drive ORDER BY campaign_id, channel")

    def criteria_of_campaign(self, campaign_id: int) -> dict[str, Any]:
        """The campaign's stored pass criteria (rig.config.campaign.Criteria as JSON; {} where
        none)."""
        rows = self.query("SELECT criteria FROM campaign WHERE id = ?", (campaign_id,))
        value = json.loads(rows[0]["criteria"]) if rows and rows[0]["criteria"] else {}
        return value if isinstance(value, dict) else {}

    def drive_cycle_sums(self) -> dict[int, sqlite3.Row]:
        """Each drive's cycle counts and sums, by drive id (a drive without cycles has no row),
        as `record_cycle` keeps them (v12 `cycle_total`, rig/store/cycle_sums.py): no cycle row
        is read. `returned`: cycles whose drive was seen back after the cut."""
        rows = self.query(f"SELECT drive_id, {NAMES} FROM cycle_total")
        return {r["drive_id"]: r for r in rows}

    def cuts_outside_range(self) -> dict[int, int]:
        """Per drive id, its cuts whose realized delay fell outside the requested range (v13;
        the partial index `cycle_off_range` holds only those: no pass over the cycles). An
        older store, without the column, has none known."""
        if "delay_in_range" not in {r[1] for r in self.query("PRAGMA table_info(cycle)")}:
            return {}
        rows = self.query(
            "SELECT drive_id, COUNT(*) FROM cycle WHERE delay_in_range = 0 GROUP BY drive_id"
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def middle_return_ns(self, drive_id: int, returned: int) -> list[int]:
        """The one or two middle values (ns) of the drive's `returned` times from the cut to the
        drive seen back, in order: what their median is made of. The v12 index `cycle_return`
        holds them in order (the WHERE below is its own), so SQLite walks half of the drive's
        entries and sorts nothing."""
        if returned <= 0:
            return []
        rows = self.query(
            f"SELECT back_ns - cut_ns FROM cycle WHERE drive_id = ? AND {RETURNED}"
            " ORDER BY back_ns - cut_ns LIMIT ? OFFSET ?",
            (drive_id, 2 - returned % 2, (returned - 1) // 2),
        )
        return [r[0] for r in rows]

    def exposure_of_drive(self, drive_id: int) -> list[sqlite3.Row]:
        """(class, exposed, failing) per class a cut of the drive was exposed to; none for a
        store older than exposure (docs/schema.md)."""
        known = self.query("SELECT 1 FROM sqlite_master WHERE name = 'exposure_total'")
        if not known:
            return []
        return self.query(
            "SELECT class, exposed, failing FROM exposure_total WHERE drive_id = ?", (drive_id,)
        )

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
