"""Reads for the fleet's replicator (rig/interface/fleet/replicator.py) and the dashboard:
everything a finished cycle left, in the order it was recorded (row ids only grow: one writer, one
transaction at a time)."""

from __future__ import annotations

import sqlite3

from rig.store.connection import StoreConnection


class ReplicationReads(StoreConnection):
    """What the replicator ships and the dashboard shows."""

    def campaigns(self) -> list[sqlite3.Row]:
        """Every campaign of this store, oldest first."""
        return self.query("SELECT * FROM campaign ORDER BY id")

    def drives_of(self, campaign_id: int) -> list[sqlite3.Row]:
        return self.query(
            "SELECT * FROM drive WHERE campaign_id = ? ORDER BY channel", (campaign_id,)
        )

    def cycles_after(self, campaign_id: int, after_id: int, limit: int) -> list[sqlite3.Row]:
        """Finished cycles of a campaign recorded after row `after_id`, with their channel."""
        return self.query(
            "SELECT d.channel, c.* FROM cycle c JOIN drive d ON d.id = c.drive_id"
            " WHERE d.campaign_id = ? AND c.id > ? ORDER BY c.id LIMIT ?",
            (campaign_id, after_id, limit),
        )

    def findings_of_cycles(self, cycle_ids: list[int]) -> list[sqlite3.Row]:
        return self._rows_of_cycles("SELECT * FROM finding", "cycle_id", cycle_ids, "id")

    def cycle_events_of(self, cycle_ids: list[int]) -> list[sqlite3.Row]:
        return self._rows_of_cycles("SELECT * FROM event", "cycle_id", cycle_ids, "id")

    def rail_sense_of(self, cycle_ids: list[int]) -> list[sqlite3.Row]:
        return self._rows_of_cycles("SELECT * FROM rail_sense", "cycle_id", cycle_ids, "cycle_id")

    def ledgers_of(self, cycle_ids: list[int]) -> list[sqlite3.Row]:
        return self._rows_of_cycles("SELECT * FROM ledger", "cycle_id", cycle_ids, "cycle_id")

    def _rows_of_cycles(
        self, select: str, column: str, cycle_ids: list[int], order: str
    ) -> list[sqlite3.Row]:
        if not cycle_ids:
            return []
        marks = ",".join("?" * len(cycle_ids))
        return self.query(
            f"{select} WHERE {column} IN ({marks}) ORDER BY {order}", tuple(cycle_ids)
        )

    def loose_events_after(self, after_id: int, limit: int) -> list[sqlite3.Row]:
        """Events of no cycle (board edges, drive status changes), with their drive's campaign
        and channel (NULL for station-wide events)."""
        return self.query(
            "SELECT e.*, d.campaign_id, d.channel FROM event e LEFT JOIN drive d"
            " ON d.id = e.drive_id WHERE e.cycle_id IS NULL AND e.id > ? ORDER BY e.id LIMIT ?",
            (after_id, limit),
        )

    def health_after(self, campaign_id: int, after_id: int, limit: int) -> list[sqlite3.Row]:
        return self.query(
            "SELECT d.channel, h.* FROM health h JOIN drive d ON d.id = h.drive_id"
            " WHERE d.campaign_id = ? AND h.id > ? ORDER BY h.id LIMIT ?",
            (campaign_id, after_id, limit),
        )

    def endurance_after(self, campaign_id: int, after_id: int, limit: int) -> list[sqlite3.Row]:
        return self.query(
            "SELECT d.channel, i.* FROM endurance_interval i JOIN drive d ON d.id = i.drive_id"
            " WHERE d.campaign_id = ? AND i.id > ? ORDER BY i.id LIMIT ?",
            (campaign_id, after_id, limit),
        )

    def progress_rows(self, since: float) -> list[sqlite3.Row]:
        """Per drive: cycles (less interrupted ones, which are run again), cuts (ok or dead),
        rig errors, cycles with a failure, cycles
        ended after `since` (wall clock), the last end (the dashboard's progress)."""
        return self.query(
            "SELECT d.id AS drive_id, d.campaign_id, d.channel,"
            " COALESCE(SUM(c.status <> 'interrupted'), 0) AS cycles,"
            " COALESCE(SUM(c.status IN ('ok', 'dead')), 0) AS cuts,"
            " COALESCE(SUM(c.status = 'error'), 0) AS rig_errors,"
            " COALESCE(SUM(c.failures > 0), 0) AS failing,"
            " COALESCE(SUM(c.ended_at > ?), 0) AS recent, MAX(c.ended_at) AS last_ended"
            " FROM drive d LEFT JOIN cycle c ON c.drive_id = d.id GROUP BY d.id",
            (since,),
        )

    def failure_counts(self) -> list[sqlite3.Row]:
        """Failure findings per campaign and class."""
        return self.query(
            "SELECT d.campaign_id, f.class, COUNT(*) AS n FROM finding f"
            " JOIN cycle c ON c.id = f.cycle_id JOIN drive d ON d.id = c.drive_id"
            " WHERE f.failure = 1 GROUP BY d.campaign_id, f.class"
        )

    def latest_campaign(self) -> sqlite3.Row | None:
        rows = self.query("SELECT * FROM campaign ORDER BY id DESC LIMIT 1")
        return rows[0] if rows else None

    def cycle_counts(self) -> tuple[int, int]:
        """(cycle rows, cycles less interrupted ones) of the whole store: what a fleet station
        reports it has recorded (the rows its replicator must ship, and its progress)."""
        row = self.query(
            "SELECT COUNT(*) AS n, COALESCE(SUM(status <> 'interrupted'), 0) AS counted FROM cycle"
        )[0]
        return int(row["n"]), int(row["counted"])

    def cycle_keys(self) -> list[sqlite3.Row]:
        """(media id, channel, seq, status, failures) of every cycle: what a fleet check compares
        with the central database."""
        return self.query(
            "SELECT k.media_id, d.channel, c.seq, c.status, c.failures,"
            " (SELECT COUNT(*) FROM finding f WHERE f.cycle_id = c.id) AS findings"
            " FROM cycle c JOIN drive d ON d.id = c.drive_id"
            " JOIN campaign k ON k.id = d.campaign_id"
            " ORDER BY k.media_id, d.channel, c.seq"
        )
