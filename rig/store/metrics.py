"""Reads for the Prometheus metrics (rig/interface/fleet/metrics.py): totals computed from the
store at each scrape, so a restart of the process that serves them never counts a cut twice."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from rig.store.connection import StoreConnection


def bucket_case(seconds: str, bounds_s: Sequence[float]) -> str:
    """An SQL expression giving the index of the first bound `seconds` is at most (len(bounds)
    above them all): the histogram's bucket, for SQLite and PostgreSQL alike. The bounds are
    the code's own numbers, never input."""
    whens = " ".join(f"WHEN {seconds} <= {float(b)!r} THEN {i}" for i, b in enumerate(bounds_s))
    return f"CASE {whens} ELSE {len(bounds_s)} END"


class MetricReads(StoreConnection):
    """Per drive of every campaign: cuts, rig errors, failing cuts (in all and per class), and
    the return times as histogram buckets per model."""

    def metric_drives(self) -> list[sqlite3.Row]:
        return self.query(
            "SELECT k.name AS campaign, d.model, d.serial, d.channel, d.status,"
            " CASE WHEN k.ended_at IS NULL THEN '' ELSE k.status END AS campaign_end,"
            " COALESCE(SUM(c.status IN ('ok', 'dead')), 0) AS cuts,"
            " COALESCE(SUM(c.status = 'error'), 0) AS rig_errors,"
            " COALESCE(SUM(c.failures > 0), 0) AS failing"
            " FROM drive d JOIN campaign k ON k.id = d.campaign_id"
            " LEFT JOIN cycle c ON c.drive_id = d.id GROUP BY d.id ORDER BY d.id"
        )

    def metric_failing_classes(self) -> list[sqlite3.Row]:
        """(campaign, serial, channel, classes, cuts): cuts per set of failure classes, from
        each cycle's own list (the v11 summary column), grouped in SQL."""
        return self.query(
            "SELECT k.name AS campaign, d.serial, d.channel, c.failure_classes AS classes,"
            " COUNT(*) AS cuts FROM cycle c JOIN drive d ON d.id = c.drive_id"
            " JOIN campaign k ON k.id = d.campaign_id WHERE c.failure_classes IS NOT NULL"
            " GROUP BY d.id, c.failure_classes"
        )

    def metric_returns(self, bounds_s: Sequence[float]) -> list[sqlite3.Row]:
        """(model, bucket, n, seconds): cuts whose drive came back, per bucket of return time."""
        seconds = "((c.back_ns - c.cut_ns) / 1e9)"
        return self.query(
            f"SELECT d.model, {bucket_case(seconds, bounds_s)} AS bucket, COUNT(*) AS n,"
            f" SUM({seconds}) AS seconds FROM cycle c JOIN drive d ON d.id = c.drive_id"
            " WHERE c.back_ns IS NOT NULL AND c.cut_ns IS NOT NULL AND c.back_ns >= c.cut_ns"
            " GROUP BY d.model, bucket"
        )
