"""Replication into the central database: how far a station's campaign has reached it, and one
batch of rows shipped in one transaction.

Stations write only what their own SQLite store already holds (the store stays the source of
truth); rows are keyed by natural keys (station, campaign media id, channel, seq), so shipping the
same cycle twice changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from rig.interface.fleet.central import summaries
from rig.interface.fleet.central.connection import CentralConnection, Row

CYCLE_COLUMNS = (
    *("status", "error", "cut_delay_ns", "write_start_ns", "cut_ns", "cut_error_ns", "gone_ns"),
    *("back_ns", "writes", "writes_acked", "writes_durable", "flushes", "bytes_written"),
    *("blocks_checked", "nondurable_writes", "nondurable_survived", "failures", "full_scan"),
    *("unserializable_writes", "last_ack_to_cut_ns", "last_flush_to_cut_ns", "started_at"),
    *("ended_at", "blocks_unchecked", "failure_classes", "exposed"),
    *("realized_delay_ns", "timed_from", "delay_error_ns", "delay_in_range"),
)
FINDING_COLUMNS = (
    *("class", "failure", "lba_first", "lba_count", "expected_gen", "observed_gen"),
    *("expected_op", "observed_op", "detail"),
)
RAIL_COLUMNS = (
    *("edge_mcu_us", "edge_ns", "edge_error_ns", "hi_threshold", "lo_threshold", "window_ms"),
    *("v0", "hi_us", "lo_us", "min_v", "end_reason", "sample_dt_us", "samples"),
)
HEALTH_COLUMNS = (
    *("campaign_uid", "channel", "after_seq", "local_id", "host_ns", "source", "fields"),
    "raw",
)


@dataclass(frozen=True)
class Cursors:
    """How far a station's campaign has reached the central database (its store's row ids)."""

    cycle: int
    health: int
    endurance: int


@dataclass
class ReplicationBatch:
    """What one replication step ships: rows in the central tables' column order (without the
    leading station column, which the station's role adds)."""

    campaigns: list[dict[str, Any]]
    drives: list[dict[str, Any]]
    cycles: list[tuple[Any, ...]]
    findings: list[tuple[Any, ...]]
    events: list[tuple[Any, ...]]
    rail: list[tuple[Any, ...]]
    health: list[tuple[Any, ...]]
    endurance: list[tuple[Any, ...]]
    ledgers: list[tuple[Any, ...]]
    # the station's summaries of each cycle (rig.store.CycleTotals): (uid, channel, seq, class,
    # failure, findings, blocks) and (uid, channel, seq, since, ms, lost writes)
    totals: list[tuple[Any, ...]] = field(default_factory=list)
    lost: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(
            len(x)
            for x in (
                self.cycles,
                self.findings,
                self.events,
                self.rail,
                self.health,
                self.endurance,
                self.ledgers,
            )
        )


def as_json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def appended_tables(
    batch: ReplicationBatch,
) -> list[tuple[str, tuple[str, ...], list[tuple[Any, ...]]]]:
    """(table, columns, rows) of the insert-once tables, in the order they are shipped."""
    return [
        ("cycle", ("campaign_uid", "channel", "seq", "local_id", *CYCLE_COLUMNS), batch.cycles),
        (
            "finding",
            ("campaign_uid", "channel", "seq", "ordinal", *FINDING_COLUMNS),
            batch.findings,
        ),
        (
            "event",
            ("campaign_uid", "local_id", "channel", "seq", "host_ns", "kind", "detail"),
            batch.events,
        ),
        ("rail_sense", ("campaign_uid", "channel", "seq", *RAIL_COLUMNS), batch.rail),
        ("health", HEALTH_COLUMNS, batch.health),
        (
            "endurance_interval",
            ("campaign_uid", "channel", "seq", "local_id", "row"),
            batch.endurance,
        ),
        ("ledger", ("campaign_uid", "channel", "seq", "writes"), batch.ledgers),
    ]


class ReplicationQueries(CentralConnection):
    """The replicator's side of the central database."""

    def cursors(self, station: str, uid: int) -> Cursors:
        row = self._one(
            "SELECT (SELECT max(local_id) FROM fleet.cycle WHERE station = %(s)s"
            "   AND campaign_uid = %(u)s) AS cycle,"
            " (SELECT max(local_id) FROM fleet.health WHERE station = %(s)s"
            "   AND campaign_uid = %(u)s) AS health,"
            " (SELECT max(local_id) FROM fleet.endurance_interval WHERE station = %(s)s"
            "   AND campaign_uid = %(u)s) AS endurance",
            {"s": station, "u": uid},
        )
        self._commit()
        assert row is not None
        return Cursors(int(row["cycle"] or 0), int(row["health"] or 0), int(row["endurance"] or 0))

    def loose_event_cursor(self, station: str, uids: Sequence[int]) -> int:
        row = self._one(
            "SELECT max(local_id) AS n FROM fleet.event WHERE station = %s"
            " AND campaign_uid = ANY(%s) AND seq IS NULL",
            (station, list(uids)),
        )
        self._commit()
        return int(row["n"] or 0) if row else 0

    def ship(self, station: str, batch: ReplicationBatch) -> None:
        """One batch in one transaction: campaign and drive rows (upserted: their status
        changes), then cycles with their findings, events, rail sense and ledgers, health and
        endurance rows (inserted once: a row already there is kept as it is)."""
        with self.transaction() as db, db.cursor() as cur:
            upsert_campaigns(cur, station, batch.campaigns)
            upsert_drives(cur, station, batch.drives)
            summaries.prepare(cur)
            for table, columns, rows in appended_tables(batch):
                insert_once(cur, table, columns, station, rows)
            # the summaries grow by the cycles this transaction inserted, and no others
            summaries.add_new(cur, station, batch.totals, batch.lost)
        self._commit()


def upsert_campaigns(
    cur: psycopg.Cursor[Row], station: str, campaigns: Sequence[dict[str, Any]]
) -> None:
    """Campaign rows: new ones inserted, known ones' end, status and resumes brought up to date."""
    for c in campaigns:
        cur.execute(
            "INSERT INTO fleet.campaign (station, uid, submission_id, local_id, name,"
            " config, seed, board, started_at, ended_at, status, criteria, resumes)"
            " VALUES (%(station)s, %(uid)s, %(submission_id)s, %(local_id)s, %(name)s,"
            " %(config)s, %(seed)s, %(board)s, %(started_at)s, %(ended_at)s, %(status)s,"
            " %(criteria)s, %(resumes)s)"
            " ON CONFLICT (station, uid) DO UPDATE SET ended_at = EXCLUDED.ended_at,"
            " status = EXCLUDED.status, resumes = EXCLUDED.resumes,"
            " submission_id = coalesce(EXCLUDED.submission_id,"
            " fleet.campaign.submission_id)",
            dict(c, station=station),
        )


def upsert_drives(cur: psycopg.Cursor[Row], station: str, drives: Sequence[dict[str, Any]]) -> None:
    """Drive rows: new ones inserted, known ones' status brought up to date."""
    if not drives:
        return
    cur.executemany(
        "INSERT INTO fleet.drive (station, campaign_uid, channel, model, serial, wwn,"
        " firmware, size_bytes, block_size, region_first_lba, region_blocks, profile,"
        " status) VALUES (%(station)s, %(campaign_uid)s, %(channel)s, %(model)s,"
        " %(serial)s, %(wwn)s, %(firmware)s, %(size_bytes)s, %(block_size)s,"
        " %(region_first_lba)s, %(region_blocks)s, %(profile)s, %(status)s)"
        " ON CONFLICT (station, campaign_uid, channel)"
        " DO UPDATE SET status = EXCLUDED.status",
        [dict(d, station=station) for d in drives],
    )


def insert_once(
    cur: psycopg.Cursor[Row],
    table: str,
    columns: Sequence[str],
    station: str,
    rows: Sequence[Sequence[Any]],
) -> None:
    """Rows in bulk: COPY into a temporary table of the same shape, then one INSERT ...
    SELECT that keeps rows already there (the natural keys) and checks the row-level
    policy once per statement rather than once per row."""
    if not rows:
        return
    stage = sql.Identifier(f"stage_{table}")
    names = sql.SQL(", ").join(sql.Identifier(c) for c in ("station", *columns))
    cur.execute(
        sql.SQL(
            "CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        ).format(stage, sql.Identifier("fleet", table))
    )
    with cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(stage, names)) as copy:
        for row in rows:
            copy.write_row((station, *row))
    if table == "cycle":
        summaries.insert_cycles(cur, columns)  # and keeps which were new
        return
    cur.execute(
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT DO NOTHING").format(
            sql.Identifier("fleet", table), names, names, stage
        )
    )
