"""The central store: the fleet's PostgreSQL database (schema `fleet`), and all of its SQL.

Stations write only what their own SQLite store already holds (the store stays the source of
truth); rows are keyed by natural keys (station, campaign media id, channel, seq), so shipping the
same cycle twice changes nothing. Connections carry TCP keepalives and a user timeout, so a cut
network link ends a statement with an error within seconds instead of hanging it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from rig.errors import UserError
from rig.fleet.migrations import MIGRATIONS, SCHEMA_VERSION

Row = dict[str, Any]

# a link that stops answering ends the statement in seconds (libpq keepalives, TCP_USER_TIMEOUT)
LINK_OPTIONS = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}
STATION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
CYCLE_COLUMNS = (
    *("status", "error", "cut_delay_ns", "write_start_ns", "cut_ns", "cut_error_ns", "gone_ns"),
    *("back_ns", "writes", "writes_acked", "writes_durable", "flushes", "bytes_written"),
    *("blocks_checked", "nondurable_writes", "nondurable_survived", "failures", "full_scan"),
    *("unserializable_writes", "last_ack_to_cut_ns", "last_flush_to_cut_ns", "started_at"),
    "ended_at",
)
FINDING_COLUMNS = (
    *("class", "failure", "lba_first", "lba_count", "expected_gen", "observed_gen"),
    *("expected_op", "observed_op", "detail"),
)
RAIL_COLUMNS = (
    *("edge_mcu_us", "edge_ns", "edge_error_ns", "hi_threshold", "lo_threshold", "window_ms"),
    *("v0", "hi_us", "lo_us", "min_v", "end_reason", "sample_dt_us", "samples"),
)
LIVE = ("queued", "running")  # submission states that hold their drives' claims


def drive_key(model: str, serial: str, wwn: str) -> str:
    """A physical drive across the fleet: its WWN where it has one, else model and serial."""
    from rig.identity import normalise_wwn

    return f"wwn:{normalise_wwn(wwn)}" if wwn else f"sn:{model}|{serial}"


def with_link_options(dsn: str) -> str:
    """The DSN with the link options it does not set itself."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as error:
        raise UserError(f"central database: not a libpq DSN ({error})") from error
    return make_conninfo("", **{**LINK_OPTIONS, **given})


def station_role(station: str) -> str:
    return f"rig_station_{station}"


@dataclass(frozen=True)
class Cursors:
    """How far a station's campaign has reached the central database (its store's row ids)."""

    cycle: int
    health: int
    endurance: int


class CentralStore:
    """One connection to the central database."""

    def __init__(self, dsn: str, *, autocommit: bool = False) -> None:
        self.dsn = dsn
        try:
            self._db = psycopg.connect(
                with_link_options(dsn), row_factory=dict_row, autocommit=autocommit
            )
        except psycopg.OperationalError as error:
            raise CentralUnavailable(str(error).strip().splitlines()[0]) from error

    def close(self) -> None:
        self._db.close()

    @property
    def closed(self) -> bool:
        """Closed, or broken by a lost link: open a new one."""
        return bool(self._db.closed or self._db.broken)

    def __enter__(self) -> CentralStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Row]]:
        with self._db.transaction():
            yield self._db

    def _all(
        self, query: str | sql.Composed, args: Sequence[Any] | dict[str, Any] = ()
    ) -> list[Row]:
        with self._db.cursor() as cur:
            cur.execute(query, args)
            return cur.fetchall() if cur.description else []

    def _one(self, query: str, args: Sequence[Any] | dict[str, Any] = ()) -> Row | None:
        rows = self._all(query, args)
        return rows[0] if rows else None

    def _commit(self) -> None:
        if not self._db.autocommit:
            self._db.commit()

    # -- schema --------------------------------------------------------------------------------

    def schema_version(self) -> int:
        row = self._one("SELECT to_regclass('fleet.schema_version') IS NOT NULL AS present")
        if not row or not row["present"]:
            return 0
        found = self._one("SELECT max(version) AS v FROM fleet.schema_version")
        return int(found["v"] or 0) if found else 0

    def queue_schema_present(self) -> bool:
        """procrastinate's tables (rig.fleet.dispatch) are in the database."""
        row = self._one("SELECT to_regclass('public.procrastinate_jobs') IS NOT NULL AS present")
        self._commit()
        return bool(row and row["present"])

    def migrate(self) -> int:
        """Bring the schema to this rig's version (one transaction per step, serialized by an
        advisory lock so two callers cannot both apply a step). Returns the version."""
        with self.transaction() as db:
            db.execute("SELECT pg_advisory_xact_lock(816001)")
            db.execute("CREATE SCHEMA IF NOT EXISTS fleet")
            db.execute(
                "CREATE TABLE IF NOT EXISTS fleet.schema_version"
                " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise UserError(
                f"central database has schema v{version}, newer than this rig (v{SCHEMA_VERSION})"
            )
        for number in range(version, SCHEMA_VERSION):
            with self.transaction() as db:
                db.execute("SELECT pg_advisory_xact_lock(816001)")
                if self.schema_version() > number:
                    continue
                db.execute(MIGRATIONS[number])
                db.execute("INSERT INTO fleet.schema_version (version) VALUES (%s)", (number + 1,))
        self._commit()
        return self.schema_version()

    # -- administration (the database owner) ----------------------------------------------------

    def add_station(self, name: str, password: str) -> str:
        """A station and its login role (member of rig_station). Returns the role."""
        if not STATION_NAME.match(name):
            raise UserError(f"station name {name!r}: use a-z, 0-9 and _ (a letter first)")
        role = station_role(name)
        with self.transaction() as db:
            if self._one("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)):
                db.execute(
                    sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(password)
                    )
                )
            else:
                db.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE rig_station").format(
                        sql.Identifier(role), sql.Literal(password)
                    )
                )
            db.execute(
                "INSERT INTO fleet.station (name, role) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (name, role),
            )
        self._commit()
        return role

    def add_user(self, name: str, password: str, kind: str) -> None:
        """A login role for people and tools: kind 'reader' (dashboard, reports) or 'dispatch'
        (submit and stop campaigns)."""
        if kind not in ("reader", "dispatch"):
            raise UserError(f"user kind {kind!r}: reader or dispatch")
        if not STATION_NAME.match(name):
            raise UserError(f"user name {name!r}: use a-z, 0-9 and _ (a letter first)")
        with self.transaction() as db:
            verb = (
                "ALTER"
                if self._one("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
                else "CREATE"
            )
            db.execute(
                sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )
            db.execute(
                sql.SQL("GRANT {} TO {}").format(
                    sql.Identifier(f"rig_{kind}"), sql.Identifier(name)
                )
            )
        self._commit()

    # -- the station's agent --------------------------------------------------------------------

    def my_station(self) -> str:
        row = self._one("SELECT fleet.my_station() AS name")
        if not row or not row["name"]:
            raise UserError("this database role is no station's (rig fleet add-station)")
        return str(row["name"])

    def heartbeat(self, station: str, agent: str) -> None:
        self._all(
            "UPDATE fleet.station SET last_seen = now(), agent = %s WHERE name = %s",
            (agent, station),
        )
        self._commit()

    def publish_inventory(self, station: str, drives: Sequence[dict[str, str]]) -> None:
        """The drives this station holds now (replaces what it published before)."""
        with self.transaction() as db:
            db.execute("DELETE FROM fleet.inventory WHERE station = %s", (station,))
            with db.cursor() as cur:
                cur.executemany(
                    "INSERT INTO fleet.inventory (station, drive_key, model, serial, wwn, firmware)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [
                        (
                            station,
                            drive_key(d["model"], d["serial"], d.get("wwn", "")),
                            d["model"],
                            d["serial"],
                            d.get("wwn", ""),
                            d.get("firmware", ""),
                        )
                        for d in drives
                    ],
                )
        self._commit()

    def submission(self, submission_id: int) -> Row | None:
        row = self._one("SELECT * FROM fleet.submission WHERE id = %s", (submission_id,))
        self._commit()
        return row

    def submission_started(self, submission_id: int) -> None:
        self._all(
            "UPDATE fleet.submission SET status = 'running', started_at = coalesce(started_at,"
            " now()) WHERE id = %s AND status = 'queued'",
            (submission_id,),
        )
        self._commit()

    def finish_submission(
        self, submission_id: int, status: str, exit_code: int | None, message: str
    ) -> None:
        """The campaign ended (or never ran): its state, and its drives are free again."""
        with self.transaction() as db:
            db.execute(
                "UPDATE fleet.submission SET status = %s, exit_code = %s, message = %s,"
                " ended_at = now() WHERE id = %s",
                (status, exit_code, message, submission_id),
            )
            db.execute(
                "UPDATE fleet.claim SET released_at = now() WHERE submission_id = %s"
                " AND released_at IS NULL",
                (submission_id,),
            )
        self._commit()

    # -- replication ----------------------------------------------------------------------------

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
            for c in batch.campaigns:
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
            if batch.drives:
                cur.executemany(
                    "INSERT INTO fleet.drive (station, campaign_uid, channel, model, serial, wwn,"
                    " firmware, size_bytes, block_size, region_first_lba, region_blocks, profile,"
                    " status) VALUES (%(station)s, %(campaign_uid)s, %(channel)s, %(model)s,"
                    " %(serial)s, %(wwn)s, %(firmware)s, %(size_bytes)s, %(block_size)s,"
                    " %(region_first_lba)s, %(region_blocks)s, %(profile)s, %(status)s)"
                    " ON CONFLICT (station, campaign_uid, channel)"
                    " DO UPDATE SET status = EXCLUDED.status",
                    [dict(d, station=station) for d in batch.drives],
                )
            self._insert(
                cur,
                "cycle",
                ("campaign_uid", "channel", "seq", "local_id", *CYCLE_COLUMNS),
                station,
                batch.cycles,
            )
            self._insert(
                cur,
                "finding",
                ("campaign_uid", "channel", "seq", "ordinal", *FINDING_COLUMNS),
                station,
                batch.findings,
            )
            self._insert(
                cur,
                "event",
                ("campaign_uid", "local_id", "channel", "seq", "host_ns", "kind", "detail"),
                station,
                batch.events,
            )
            self._insert(
                cur,
                "rail_sense",
                ("campaign_uid", "channel", "seq", *RAIL_COLUMNS),
                station,
                batch.rail,
            )
            self._insert(
                cur,
                "health",
                (
                    "campaign_uid",
                    "channel",
                    "after_seq",
                    "local_id",
                    "host_ns",
                    "source",
                    "fields",
                    "raw",
                ),
                station,
                batch.health,
            )
            self._insert(
                cur,
                "endurance_interval",
                ("campaign_uid", "channel", "seq", "local_id", "row"),
                station,
                batch.endurance,
            )
            self._insert(
                cur, "ledger", ("campaign_uid", "channel", "seq", "writes"), station, batch.ledgers
            )
        self._commit()

    @staticmethod
    def _insert(
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
                "CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS)"
                " ON COMMIT DELETE ROWS"
            ).format(stage, sql.Identifier("fleet", table))
        )
        with cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(stage, names)) as copy:
            for row in rows:
                copy.write_row((station, *row))
        cur.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT DO NOTHING").format(
                sql.Identifier("fleet", table), names, names, stage
            )
        )

    # -- dispatch -------------------------------------------------------------------------------

    def station_holding(self, keys: Sequence[str]) -> str:
        """The one station whose inventory holds every drive named."""
        rows = self._all(
            "SELECT station, array_agg(drive_key) AS keys FROM fleet.inventory"
            " WHERE drive_key = ANY(%s) GROUP BY station",
            (list(keys),),
        )
        self._commit()
        whole = [r["station"] for r in rows if set(r["keys"]) >= set(keys)]
        if len(whole) == 1:
            return str(whole[0])
        if len(whole) > 1:
            raise UserError(f"the drives are in the inventory of several stations: {whole}")
        held = {k for r in rows for k in r["keys"]}
        missing = [k for k in keys if k not in held]
        if missing:
            raise UserError(f"no station holds {', '.join(missing)}")
        raise UserError(
            "the campaign's drives are on different stations; one campaign, one station"
        )

    def create_submission(
        self, name: str, config: str, station: str, keys: Sequence[str], planned: int
    ) -> int:
        """A submission and its drive claims, atomically: refused if any drive is claimed by a
        campaign still queued or running anywhere in the fleet."""
        try:
            with self.transaction() as db:
                row = db.execute(
                    "INSERT INTO fleet.submission (name, config, station, drive_keys,"
                    " cycles_planned) VALUES (%s, %s, %s, %s, %s) RETURNING id",
                    (name, config, station, list(keys), planned),
                ).fetchone()
                assert row is not None
                submission_id = int(row["id"])
                with db.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO fleet.claim (drive_key, submission_id, station)"
                        " VALUES (%s, %s, %s)",
                        [(k, submission_id, station) for k in keys],
                    )
        except psycopg.errors.UniqueViolation as error:
            self._db.rollback()
            holders = self.claim_holders(keys)
            raise UserError(
                "drive already claimed by a live campaign: "
                + ", ".join(f"{k} (submission {s})" for k, s in holders.items())
            ) from error
        self._commit()
        return submission_id

    def claim_holders(self, keys: Sequence[str]) -> dict[str, int]:
        rows = self._all(
            "SELECT drive_key, submission_id FROM fleet.claim WHERE drive_key = ANY(%s)"
            " AND released_at IS NULL",
            (list(keys),),
        )
        self._commit()
        return {r["drive_key"]: int(r["submission_id"]) for r in rows}

    def set_job(self, submission_id: int, job_id: int) -> None:
        self._all("UPDATE fleet.submission SET job_id = %s WHERE id = %s", (job_id, submission_id))
        self._commit()

    def request_stop(self, submission_id: int) -> Row:
        row = self._one(
            "UPDATE fleet.submission SET stop_requested = true WHERE id = %s RETURNING *",
            (submission_id,),
        )
        self._commit()
        if row is None:
            raise UserError(f"no submission {submission_id}")
        return row

    # -- what dashboards and reports read -------------------------------------------------------

    def stations(self) -> list[Row]:
        rows = self._all(
            "SELECT s.name, s.last_seen, s.agent,"
            " extract(epoch FROM now() - s.last_seen) AS silent_s,"
            " (SELECT count(*) FROM fleet.inventory i WHERE i.station = s.name) AS drives"
            " FROM fleet.station s ORDER BY s.name"
        )
        self._commit()
        return rows

    def submissions(self) -> list[Row]:
        rows = self._all("SELECT * FROM fleet.submission ORDER BY id")
        self._commit()
        return rows

    def campaign_rows(self) -> list[Row]:
        rows = self._all("SELECT * FROM fleet.campaign ORDER BY started_at, station, uid")
        self._commit()
        return rows

    def drive_rows(self) -> list[Row]:
        rows = self._all("SELECT * FROM fleet.drive ORDER BY station, campaign_uid, channel")
        self._commit()
        return rows

    def progress_rows(self, recent_s: float) -> list[Row]:
        """Per drive of every campaign: cycles (less those a crash cut short: the campaign runs
        them again), cuts, rig errors, failing cycles, and cycles ended within the last
        `recent_s` seconds (for the rate)."""
        rows = self._all(
            "SELECT station, campaign_uid, channel,"
            " count(*) FILTER (WHERE status <> 'interrupted') AS cycles,"
            " count(*) FILTER (WHERE status IN ('ok', 'dead')) AS cuts,"
            " count(*) FILTER (WHERE status = 'error') AS rig_errors,"
            " count(*) FILTER (WHERE failures > 0) AS failing,"
            " count(*) FILTER (WHERE ended_at > %s) AS recent,"
            " max(ended_at) AS last_ended"
            " FROM fleet.cycle GROUP BY station, campaign_uid, channel",
            (time.time() - recent_s,),
        )
        self._commit()
        return rows

    def finding_counts(self) -> list[Row]:
        """Failure findings per class, per campaign."""
        rows = self._all(
            "SELECT station, campaign_uid, class, count(*) AS n FROM fleet.finding"
            " WHERE failure = 1 GROUP BY station, campaign_uid, class"
        )
        self._commit()
        return rows

    def cycles_of(self, station: str, uid: int, channel: int) -> list[Row]:
        rows = self._all(
            "SELECT * FROM fleet.cycle WHERE station = %s AND campaign_uid = %s AND channel = %s"
            " ORDER BY seq",
            (station, uid, channel),
        )
        self._commit()
        return rows

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
        rows = self._all(query, args)
        self._commit()
        return rows

    def finding_groups(self, station: str, uid: int, channel: int) -> list[Row]:
        """Findings per cycle, class and failure flag: count and blocks."""
        rows = self._all(
            "SELECT seq, class, failure, count(*) AS n, sum(lba_count) AS blocks"
            " FROM fleet.finding WHERE station = %s AND campaign_uid = %s AND channel = %s"
            " GROUP BY seq, class, failure",
            (station, uid, channel),
        )
        self._commit()
        return rows

    def health_of(self, station: str, uid: int, channel: int) -> list[Row]:
        rows = self._all(
            "SELECT after_seq, source, fields FROM fleet.health WHERE station = %s"
            " AND campaign_uid = %s AND channel = %s ORDER BY after_seq",
            (station, uid, channel),
        )
        self._commit()
        return rows

    def rail_of(self, station: str, uid: int, channel: int) -> list[Row]:
        rows = self._all(
            "SELECT * FROM fleet.rail_sense WHERE station = %s AND campaign_uid = %s"
            " AND channel = %s ORDER BY seq",
            (station, uid, channel),
        )
        self._commit()
        return rows

    def endurance_of(self, station: str, uid: int, channel: int) -> list[Row]:
        rows = self._all(
            "SELECT row FROM fleet.endurance_interval WHERE station = %s AND campaign_uid = %s"
            " AND channel = %s ORDER BY seq",
            (station, uid, channel),
        )
        self._commit()
        return rows

    def replication_lags(self, station: str) -> list[float]:
        """Seconds from each cycle's end on the station to its arrival here (same clock only
        when the station and the server share a host: the replication bench)."""
        rows = self._all(
            "SELECT extract(epoch FROM replicated_at) - ended_at AS lag FROM fleet.cycle"
            " WHERE station = %s ORDER BY local_id",
            (station,),
        )
        self._commit()
        return [float(r["lag"]) for r in rows]

    def cycle_keys(self, station: str) -> list[Row]:
        """(campaign, channel, seq, status, failures, findings) of every cycle of a station: the
        same shape as rig.store.Store.cycle_keys, to compare the two."""
        rows = self._all(
            "SELECT c.campaign_uid AS media_id, c.channel, c.seq, c.status, c.failures,"
            " (SELECT count(*) FROM fleet.finding f WHERE f.station = c.station"
            "  AND f.campaign_uid = c.campaign_uid AND f.channel = c.channel AND f.seq = c.seq)"
            " AS findings FROM fleet.cycle c WHERE c.station = %s"
            " ORDER BY c.campaign_uid, c.channel, c.seq",
            (station,),
        )
        self._commit()
        return rows


class CentralUnavailable(UserError):
    """The central database cannot be reached (link down, server stopped, wrong address)."""


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
