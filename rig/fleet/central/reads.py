"""What dashboards and reports read from the central database."""

from __future__ import annotations

import time
from typing import Any

from rig.fleet.central.connection import CentralConnection, Row

# what reports/central.py reads of a cycle (reports.dataset.cuts_from_rows)
REPORT_CYCLE_COLUMNS = (
    *("seq", "status", "cut_delay_ns", "cut_ns", "back_ns", "gone_ns", "last_ack_to_cut_ns"),
    *("last_flush_to_cut_ns", "started_at", "bytes_written", "blocks_checked", "full_scan"),
    *("blocks_unchecked", "failure_classes"),
)
MODEL_DAYS = (
    "SELECT day, sum(cuts) AS cuts, sum(failing) AS failing, sum(rig_errors) AS rig_errors"
    " FROM fleet.day_cycles WHERE model = %s AND day BETWEEN %s AND %s GROUP BY day ORDER BY day"
)


class ReadQueries(CentralConnection):
    """Stations, submissions, campaigns and their rows, per drive."""

    def stations(self) -> list[Row]:
        return self._read(
            "SELECT s.name, s.last_seen, s.agent, s.heartbeat_s, s.kind,"
            " extract(epoch FROM now() - s.last_seen) AS silent_s,"
            " (SELECT count(*) FROM fleet.inventory i WHERE i.station = s.name) AS drives"
            " FROM fleet.station s ORDER BY s.name"
        )

    def submissions(self) -> list[Row]:
        """Every submission, with the age of its station's last report of it (the server's
        clock: `reported_s`)."""
        return self._read(
            "SELECT *, extract(epoch FROM now() - recorded_at) AS reported_s"
            " FROM fleet.submission ORDER BY id"
        )

    def campaign_rows(self) -> list[Row]:
        return self._read("SELECT * FROM fleet.campaign ORDER BY started_at, station, uid")

    def drive_rows(self) -> list[Row]:
        return self._read("SELECT * FROM fleet.drive ORDER BY station, campaign_uid, channel")

    def progress_rows(self, recent_s: float) -> list[Row]:
        """Per drive of every campaign: cycle rows, cycles (less those a crash cut short: the
        campaign runs them again), cuts, rig errors, failing cycles, and cycles ended within the
        last `recent_s` seconds (for the rate)."""
        return self._read(
            "SELECT station, campaign_uid, channel,"
            " count(*) AS rows, count(*) FILTER (WHERE status <> 'interrupted') AS cycles,"
            " count(*) FILTER (WHERE status IN ('ok', 'dead')) AS cuts,"
            " count(*) FILTER (WHERE status = 'error') AS rig_errors,"
            " count(*) FILTER (WHERE failures > 0) AS failing,"
            " count(*) FILTER (WHERE ended_at > %s) AS recent,"
            " max(ended_at) AS last_ended"
            " FROM fleet.cycle GROUP BY station, campaign_uid, channel",
            (time.time() - recent_s,),
        )

    def finding_counts(self) -> list[Row]:
        """Failure findings per class, per campaign."""
        return self._read(
            "SELECT station, campaign_uid, class, count(*) AS n FROM fleet.finding"
            " WHERE failure = 1 GROUP BY station, campaign_uid, class"
        )

    def cycles_of(self, station: str, uid: int, channel: int) -> list[Row]:
        """A drive's cycles, the columns a report reads (with the station's failure classes)."""
        return self._read(
            f"SELECT {', '.join(REPORT_CYCLE_COLUMNS)} FROM fleet.cycle WHERE station = %s"
            " AND campaign_uid = %s AND channel = %s ORDER BY seq",
            (station, uid, channel),
        )

    # the summaries (schema v4, rig/fleet/central/summaries.py), read through each drive's index
    def drive_class_totals(self, station: str, uid: int, channel: int) -> list[Row]:
        """Per class and failure flag: findings, their blocks, and cuts with the class."""
        return self._read(
            "SELECT class, failure, sum(findings) AS n, sum(blocks) AS blocks, sum(cuts) AS cuts"
            " FROM fleet.day_class WHERE station = %s AND campaign_uid = %s AND channel = %s"
            " GROUP BY class, failure ORDER BY class, failure",
            (station, uid, channel),
        )

    def drive_lost_after(self, station: str, uid: int, channel: int) -> list[Row]:
        """(since, ms, n): the drive's lost durable writes per time since their ack or flush."""
        return self._read(
            "SELECT since, ms, sum(n) AS n FROM fleet.day_lost_after WHERE station = %s"
            " AND campaign_uid = %s AND channel = %s GROUP BY since, ms ORDER BY since, ms",
            (station, uid, channel),
        )

    def model_days(self, model: str, first_day: Any, last_day: Any) -> list[Row]:
        """A model's cuts and failing cuts per day over a span of days: that model's summary
        rows only (the keys lead with the model)."""
        return self._read(MODEL_DAYS, (model, first_day, last_day))

    def explain_model_days(self, model: str, first_day: Any, last_day: Any) -> str:
        """The server's plan for `model_days` (the scale bench and its test show it)."""
        rows = self._read("EXPLAIN " + MODEL_DAYS, (model, first_day, last_day))
        return "\n".join(str(next(iter(r.values()))) for r in rows)

    def findings_of(
        self,
        station: str,
        uid: int,
        channel: int,
        *,
        failures_only: bool = False,
        cls: str | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        query = (
            "SELECT * FROM fleet.finding WHERE station = %s AND campaign_uid = %s AND channel = %s"
        )
        args: list[Any] = [station, uid, channel]
        if failures_only:
            query += " AND failure = 1"
        if cls is not None:
            query += " AND class = %s"
            args.append(cls)
        query += " ORDER BY seq, ordinal"
        if limit is not None:
            query += " LIMIT %s"
            args.append(limit)
        return self._read(query, args)

    def finding_groups(self, station: str, uid: int, channel: int) -> list[Row]:
        """Findings per cycle, class and failure flag: count and blocks."""
        return self._read(
            "SELECT seq, class, failure, count(*) AS n, sum(lba_count) AS blocks"
            " FROM fleet.finding WHERE station = %s AND campaign_uid = %s AND channel = %s"
            " GROUP BY seq, class, failure",
            (station, uid, channel),
        )

    def health_of(self, station: str, uid: int, channel: int) -> list[Row]:
        return self._read(
            "SELECT after_seq, source, fields FROM fleet.health WHERE station = %s"
            " AND campaign_uid = %s AND channel = %s ORDER BY after_seq",
            (station, uid, channel),
        )

    def rail_of(self, station: str, uid: int, channel: int) -> list[Row]:
        return self._read(
            "SELECT * FROM fleet.rail_sense WHERE station = %s AND campaign_uid = %s"
            " AND channel = %s ORDER BY seq",
            (station, uid, channel),
        )

    def endurance_of(self, station: str, uid: int, channel: int) -> list[Row]:
        return self._read(
            "SELECT row FROM fleet.endurance_interval WHERE station = %s AND campaign_uid = %s"
            " AND channel = %s ORDER BY seq",
            (station, uid, channel),
        )

    def replication_lags(self, station: str) -> list[float]:
        """Seconds from each cycle's end on the station to its arrival here (same clock only
        when the station and the server share a host: the replication bench)."""
        rows = self._read(
            "SELECT extract(epoch FROM replicated_at) - ended_at AS lag FROM fleet.cycle"
            " WHERE station = %s ORDER BY local_id",
            (station,),
        )
        return [float(r["lag"]) for r in rows]

    def cycle_keys(self, station: str) -> list[Row]:
        """(campaign, channel, seq, status, failures, findings) of every cycle of a station: the
        same shape as rig.store.Store.cycle_keys, to compare the two."""
        return self._read(
            "SELECT c.campaign_uid AS media_id, c.channel, c.seq, c.status, c.failures,"
            " (SELECT count(*) FROM fleet.finding f WHERE f.station = c.station"
            "  AND f.campaign_uid = c.campaign_uid AND f.channel = c.channel AND f.seq = c.seq)"
            " AS findings FROM fleet.cycle c WHERE c.station = %s"
            " ORDER BY c.campaign_uid, c.channel, c.seq",
            (station,),
        )

    # the Prometheus metrics (rig/fleet/metrics.py): the same reads as rig/store/metrics.py
    def metric_drives(self) -> list[Row]:
        return self._read(
            "SELECT d.station, k.name AS campaign, d.model, d.serial, d.channel, d.status,"
            " count(c.seq) FILTER (WHERE c.status IN ('ok', 'dead')) AS cuts,"
            " count(c.seq) FILTER (WHERE c.status = 'error') AS rig_errors,"
            " count(c.seq) FILTER (WHERE c.failures > 0) AS failing"
            " FROM fleet.drive d JOIN fleet.campaign k"
            " ON k.station = d.station AND k.uid = d.campaign_uid"
            " LEFT JOIN fleet.cycle c ON c.station = d.station"
            " AND c.campaign_uid = d.campaign_uid AND c.channel = d.channel"
            " GROUP BY d.station, d.campaign_uid, d.channel, k.name"
            " ORDER BY d.station, d.campaign_uid, d.channel"
        )

    def metric_failing_classes(self) -> list[Row]:
        """(station, campaign, serial, channel, class, cuts): cuts with a failure of the class."""
        return self._read(
            "SELECT d.station, k.name AS campaign, d.serial, d.channel, f.class,"
            " count(DISTINCT f.seq) AS cuts FROM fleet.finding f JOIN fleet.drive d"
            " ON d.station = f.station AND d.campaign_uid = f.campaign_uid"
            " AND d.channel = f.channel JOIN fleet.campaign k"
            " ON k.station = d.station AND k.uid = d.campaign_uid WHERE f.failure = 1"
            " GROUP BY d.station, d.campaign_uid, d.channel, k.name, d.serial, f.class"
        )

    def metric_returns(self, bucket_sql: str) -> list[Row]:
        """(station, model, bucket, n, seconds); `bucket_sql`: rig.store.metrics.bucket_case
        over `s`, the return time in seconds."""
        return self._read(
            f"SELECT station, model, {bucket_sql} AS bucket, count(*) AS n, sum(s) AS seconds"
            " FROM (SELECT c.station, d.model, (c.back_ns - c.cut_ns) / 1e9 AS s"
            " FROM fleet.cycle c JOIN fleet.drive d ON d.station = c.station"
            " AND d.campaign_uid = c.campaign_uid AND d.channel = c.channel"
            " WHERE c.back_ns IS NOT NULL AND c.cut_ns IS NOT NULL AND c.back_ns >= c.cut_ns) r"
            " GROUP BY station, model, bucket"
        )
