"""What dashboards and reports read from the central database."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from psycopg.rows import tuple_row

from rig.interface.fleet.central.connection import CentralConnection, Row
from rig.interface.fleet.migrations import NOTIFY_KINDS

MS = "::double precision / 1000000.0::double precision"
CUT_COLUMNS = (
    f"SELECT seq, status, cut_delay_ns{MS},"
    f" CASE WHEN back_ns >= cut_ns THEN (back_ns - cut_ns){MS} END,"
    f" CASE WHEN gone_ns >= cut_ns THEN (gone_ns - cut_ns){MS} END,"
    f" CASE WHEN last_ack_to_cut_ns >= 0 THEN last_ack_to_cut_ns{MS} END,"
    f" CASE WHEN last_flush_to_cut_ns >= 0 THEN last_flush_to_cut_ns{MS} END,"
    " started_at, bytes_written, blocks_checked, full_scan <> 0, blocks_unchecked,"
    f" failure_classes, realized_delay_ns{MS}, delay_error_ns{MS}"
    " FROM fleet.cycle WHERE station = %s AND campaign_uid = %s"
    " AND channel = %s ORDER BY seq"
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
        campaign runs them again), cuts, rig errors, failing cycles (from the summaries), and
        cycles ended within the last `recent_s` seconds (for the rate: the recent end of the
        cycle table's `ended_at` index). A row per drive (`drive_cycles`, schema v5)."""
        return self._read(
            "SELECT s.station, s.campaign_uid, s.channel, s.rows, s.cycles, s.cuts,"
            " s.rig_errors, s.failing, s.last_ended, coalesce(r.recent, 0) AS recent"
            " FROM fleet.drive_cycles s"
            " LEFT JOIN (SELECT station, campaign_uid, channel, count(*) AS recent"
            " FROM fleet.cycle WHERE ended_at > %s GROUP BY station, campaign_uid, channel) r"
            " USING (station, campaign_uid, channel)",
            (time.time() - recent_s,),
        )

    def finding_counts(self) -> list[Row]:
        """Failure findings per class, per campaign (from the summaries)."""
        return self._read(
            "SELECT station, campaign_uid, class, sum(findings)::bigint AS n FROM fleet.drive_class"
            " WHERE failure = 1 GROUP BY station, campaign_uid, class"
        )

    def notify_failure_kinds(self) -> list[Row]:
        """(station, campaign_uid, kind, n, last): per campaign the notifications its station
        could not deliver, per kind, with the newest one's detail (JSON), through the partial
        index `event_notify` (migration 7)."""
        return self._read(
            "SELECT DISTINCT ON (station, campaign_uid, kind) station, campaign_uid, kind,"
            " count(*) OVER (PARTITION BY station, campaign_uid, kind) AS n, detail AS last"
            f" FROM fleet.event WHERE kind IN {NOTIFY_KINDS}"
            " ORDER BY station, campaign_uid, kind, local_id DESC"
        )

    def notify_failures_last(self, limit: int) -> list[Row]:
        """(station, campaign_uid, kind, detail): per campaign the newest `limit` of them,
        newest first."""
        return self._read(
            "SELECT station, campaign_uid, kind, detail FROM (SELECT station, campaign_uid,"
            " local_id, kind, detail, row_number() OVER (PARTITION BY station, campaign_uid"
            f" ORDER BY local_id DESC) AS r FROM fleet.event WHERE kind IN {NOTIFY_KINDS}) e"
            " WHERE r <= %s ORDER BY station, campaign_uid, local_id DESC",
            (limit,),
        )

    def model_drive_totals(self, model: str | None = None) -> list[Row]:
        """Per drive of a model (or of every model): its identity and cycle counts (from the
        per-drive totals: a row per drive)."""
        return self._read(
            "SELECT d.station, d.campaign_uid, d.channel, d.model, d.serial, d.wwn,"
            " coalesce(s.cuts, 0) AS cuts, coalesce(s.dead, 0) AS dead,"
            " coalesce(s.rig_errors, 0) AS rig_errors,"
            " coalesce(s.interrupted, 0) AS interrupted FROM fleet.drive d"
            " LEFT JOIN fleet.drive_cycles s USING (station, campaign_uid, channel)"
            " WHERE %(model)s::text IS NULL OR d.model = %(model)s",
            {"model": model},
        )

    def model_failing_sets(self, model: str | None = None) -> list[Row]:
        """Per drive of a model (or of every model): cuts per set of failure classes."""
        return self._read(
            "SELECT station, campaign_uid, channel, model, classes, cuts FROM fleet.drive_failing"
            " WHERE %(model)s::text IS NULL OR model = %(model)s",
            {"model": model},
        )

    def model_exposure_sets(self, model: str) -> list[Row]:
        """Per drive of a model: its cuts (status ok or dead) per set of failure classes
        (`failure_classes`, NULL none) and of classes exposed to (`exposed`, NULL not known),
        as reports/load/central.py counts them; from the cycle table (a model's page only)."""
        return self._read(
            "SELECT c.station, c.campaign_uid, c.channel, c.failure_classes, c.exposed,"
            " count(*) AS cuts FROM fleet.cycle c JOIN fleet.drive d"
            " USING (station, campaign_uid, channel)"
            " WHERE d.model = %s AND c.status IN ('ok', 'dead')"
            " GROUP BY c.station, c.campaign_uid, c.channel, c.failure_classes, c.exposed",
            (model,),
        )

    def model_class_totals(self, model: str) -> list[Row]:
        """A model's findings and blocks per class (from the per-drive totals)."""
        return self._read(
            "SELECT class, failure, sum(findings)::bigint AS findings,"
            " sum(blocks)::bigint AS blocks FROM fleet.drive_class WHERE model = %s"
            " GROUP BY class, failure",
            (model,),
        )

    def cycles_of(self, station: str, uid: int, channel: int) -> list[Row]:
        return self._read(
            "SELECT * FROM fleet.cycle WHERE station = %s AND campaign_uid = %s AND channel = %s"
            " ORDER BY seq",
            (station, uid, channel),
        )

    def timing_of_campaign(self, station: str, uid: int) -> dict[str, float | int | None]:
        """How the campaign's cuts fell against their plan, as the station store's
        `timing_of_campaign` states it (the same ranks): cuts with a realized delay (fleet v8),
        those outside the requested range, the lateness (realized minus planned, ms) at p50,
        p99 and max; a quantile read as one row through the drive's primary key."""
        where = (
            " FROM fleet.cycle WHERE station = %s AND campaign_uid = %s"
            " AND realized_delay_ns IS NOT NULL"
        )
        row = self._one(
            "SELECT count(*) AS n, count(*) FILTER (WHERE delay_in_range = 0) AS outside" + where,
            (station, uid),
        )
        n = int(row["n"]) if row else 0
        found: dict[str, float | int | None] = {
            "cuts": n,
            "outside_range": int(row["outside"]) if row else 0,
        }
        for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("max_ms", 1.0)):
            late = self._one(
                f"SELECT (realized_delay_ns - cut_delay_ns){MS} AS late{where}"
                " ORDER BY late LIMIT 1 OFFSET %s",
                (station, uid, max(0, min(n - 1, int(q * n)))),
            )
            found[name] = None if late is None else round(float(late["late"]), 3)
        return found

    def cut_columns(
        self, station: str, uid: int, channel: int, chunk: int
    ) -> Iterator[list[tuple[Any, ...]]]:
        """A drive's cycles in order as the report's per-cut figures, `chunk` rows at a time
        (a server-side cursor): seq, status, cut_delay_ms, return_ms, gone_ms, ack_to_cut_ms,
        flush_to_cut_ms, started_at, bytes_written, blocks_checked, full_scan,
        blocks_unchecked, failure_classes, realized_delay_ms, delay_error_ms; ms computed here
        as reports/load/dataset.py computes them from a row (ns as a double / 1e6; NULL where absent
        or negative)."""
        with self._db.cursor(name="cut_columns", row_factory=tuple_row) as cur:
            cur.execute(CUT_COLUMNS, (station, uid, channel))
            while rows := cur.fetchmany(chunk):
                yield rows
        self._commit()

    # the summaries (schema v4, rig/interface/fleet/central/summaries.py), read through each
    # drive's index
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

    # the Prometheus metrics (rig/interface/fleet/metrics.py): the same reads as
    # rig/store/metrics.py
    def metric_drives(self) -> list[Row]:
        return self._read(
            "SELECT d.station, k.name AS campaign, d.model, d.serial, d.channel, d.status,"
            " CASE WHEN k.ended_at IS NULL THEN '' ELSE k.status END AS campaign_end,"
            " coalesce(sum(s.cuts), 0)::bigint AS cuts,"
            " coalesce(sum(s.rig_errors), 0)::bigint AS rig_errors,"
            " coalesce(sum(s.failing), 0)::bigint AS failing"
            " FROM fleet.drive d JOIN fleet.campaign k"
            " ON k.station = d.station AND k.uid = d.campaign_uid"
            " LEFT JOIN fleet.day_cycles s ON s.station = d.station"
            " AND s.campaign_uid = d.campaign_uid AND s.channel = d.channel"
            " GROUP BY d.station, d.campaign_uid, d.channel, k.name, k.status, k.ended_at"
            " ORDER BY d.station, d.campaign_uid, d.channel"
        )

    def metric_failing_classes(self) -> list[Row]:
        """(station, campaign, serial, channel, class, cuts): cuts with a failure of the class."""
        return self._read(
            "SELECT d.station, k.name AS campaign, d.serial, d.channel, s.class,"
            " sum(s.cuts)::bigint AS cuts FROM fleet.day_class s JOIN fleet.drive d"
            " ON d.station = s.station AND d.campaign_uid = s.campaign_uid"
            " AND d.channel = s.channel JOIN fleet.campaign k"
            " ON k.station = d.station AND k.uid = d.campaign_uid"
            " WHERE s.failure = 1 AND s.cuts > 0"
            " GROUP BY d.station, d.campaign_uid, d.channel, k.name, d.serial, s.class"
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
