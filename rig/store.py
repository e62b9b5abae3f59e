"""SQLite store: everything a report needs, on the host disk (never on a drive under test).

WAL mode, one transaction per cycle's record phase (batched), versioned migrations tracked in
`PRAGMA user_version`. The per-write ledger is stored compactly as columnar numpy blobs per cycle;
campaigns, drives, cycles, findings and events are ordinary rows. Schema: docs/schema.md.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from rig import failures
from rig.errors import UserError

# Each entry upgrades the schema by one version; never edit a released entry, append a new one.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE campaign (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        config TEXT NOT NULL,            -- the campaign file as given
        seed INTEGER NOT NULL,
        station TEXT NOT NULL,           -- 'simulated' or the relay board's identity
        started_at REAL NOT NULL,        -- wall clock, seconds since the epoch
        ended_at REAL,
        status TEXT NOT NULL DEFAULT 'running'  -- running | done | stopped | error
    );
    CREATE TABLE drive (
        id INTEGER PRIMARY KEY,
        campaign_id INTEGER NOT NULL REFERENCES campaign(id),
        channel INTEGER NOT NULL,
        model TEXT NOT NULL,
        serial TEXT NOT NULL,
        wwn TEXT NOT NULL DEFAULT '',
        firmware TEXT NOT NULL DEFAULT '',
        size_bytes INTEGER NOT NULL,
        block_size INTEGER NOT NULL,
        region_first_lba INTEGER NOT NULL,
        region_blocks INTEGER NOT NULL,
        profile TEXT NOT NULL DEFAULT '', -- simulated drives only
        status TEXT NOT NULL DEFAULT 'active'  -- active | dead | stopped
    );
    CREATE TABLE cycle (
        id INTEGER PRIMARY KEY,
        drive_id INTEGER NOT NULL REFERENCES drive(id),
        seq INTEGER NOT NULL,            -- 1-based per drive
        status TEXT NOT NULL,            -- ok | error | dead
        error TEXT NOT NULL DEFAULT '',
        cut_delay_ns INTEGER NOT NULL,   -- requested delay from write start to cut
        write_start_ns INTEGER,          -- host monotonic ns
        cut_ns INTEGER,                  -- cut edge on the host clock
        cut_error_ns INTEGER,            -- bound of the MCU-to-host clock mapping
        gone_ns INTEGER,                 -- drive seen leaving the bus
        back_ns INTEGER,                 -- drive seen back
        writes INTEGER NOT NULL DEFAULT 0,
        writes_acked INTEGER NOT NULL DEFAULT 0,
        writes_durable INTEGER NOT NULL DEFAULT 0,
        flushes INTEGER NOT NULL DEFAULT 0,
        bytes_written INTEGER NOT NULL DEFAULT 0,
        blocks_checked INTEGER NOT NULL DEFAULT 0,
        nondurable_writes INTEGER NOT NULL DEFAULT 0,
        nondurable_survived INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        started_at REAL NOT NULL,
        ended_at REAL NOT NULL,
        UNIQUE (drive_id, seq)
    );
    CREATE TABLE finding (
        id INTEGER PRIMARY KEY,
        cycle_id INTEGER NOT NULL REFERENCES cycle(id),
        class TEXT NOT NULL,
        failure INTEGER NOT NULL,        -- 1 for a drive failure, 0 for an allowed outcome
        lba_first INTEGER NOT NULL,
        lba_count INTEGER NOT NULL,
        expected_gen INTEGER NOT NULL,
        observed_gen INTEGER NOT NULL,
        expected_op INTEGER NOT NULL,
        observed_op INTEGER NOT NULL,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX finding_cycle ON finding(cycle_id);
    CREATE TABLE event (
        id INTEGER PRIMARY KEY,
        drive_id INTEGER REFERENCES drive(id),
        cycle_id INTEGER REFERENCES cycle(id),
        host_ns INTEGER NOT NULL,
        kind TEXT NOT NULL,              -- power_on | power_off | bus_gone | bus_back | ...
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE ledger (
        cycle_id INTEGER PRIMARY KEY REFERENCES cycle(id),
        writes BLOB NOT NULL             -- numpy .npz of the cycle's columnar write/flush log
    );
    CREATE TABLE lba_state (
        drive_id INTEGER PRIMARY KEY REFERENCES drive(id),
        after_cycle INTEGER NOT NULL,    -- seq of the last cycle folded in
        state BLOB NOT NULL              -- numpy .npz of committed/issued generations
    );
    """,
    # v2: health snapshots (smartctl / nvme-cli), read before the first cut and after cuts
    """
    CREATE TABLE health (
        id INTEGER PRIMARY KEY,
        drive_id INTEGER NOT NULL REFERENCES drive(id),
        after_seq INTEGER NOT NULL,      -- cycle seq it was read after; 0 = before the first cut
        host_ns INTEGER NOT NULL,
        source TEXT NOT NULL,            -- smartctl | nvme-cli | ...
        fields TEXT NOT NULL,            -- JSON: the typed HealthSnapshot fields (docs/health.md)
        raw BLOB NOT NULL,               -- zlib-compressed original tool output (JSON text)
        UNIQUE (drive_id, after_seq)
    );
    """,
    # v3: the checker's scope and serializability count per cycle
    """
    ALTER TABLE cycle ADD COLUMN full_scan INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE cycle ADD COLUMN unserializable_writes INTEGER NOT NULL DEFAULT 0;
    """,
    # v4: relay board rail sense: how the drive's supply rail fell after each cut's off edge
    """
    CREATE TABLE rail_sense (
        cycle_id INTEGER PRIMARY KEY REFERENCES cycle(id),
        channel INTEGER NOT NULL,
        edge_mcu_us INTEGER NOT NULL,    -- the off edge on the board's clock
        edge_ns INTEGER,                 -- the off edge on the host clock; NULL: not mapped
        edge_error_ns INTEGER,           -- bound of that mapping
        hi_threshold INTEGER NOT NULL,   -- ADC counts (0..1023 of the divided rail)
        lo_threshold INTEGER NOT NULL,   -- 0 = not used
        window_ms INTEGER NOT NULL,      -- capture window after the edge
        v0 INTEGER,                      -- reading just before the edge; NULL when busy
        hi_us INTEGER,                   -- µs from the edge to the first reading below hi
        lo_us INTEGER,                   -- ... below lo; NULL: it never fell that far
        min_v INTEGER,                   -- lowest reading of the capture
        end_reason TEXT NOT NULL,        -- fell | timeout | on | busy (not measured)
        sample_dt_us INTEGER,            -- spacing of samples; NULL when none were asked
        samples TEXT NOT NULL DEFAULT '[]'  -- JSON array: readings at edge + i * sample_dt_us
    );
    """,
    # v5: campaigns that resume (issue 6): the pass criteria stored with the campaign, a row per
    # cycle started (so a crash mid-cycle is found and recorded as `interrupted`), resume count
    """
    ALTER TABLE campaign ADD COLUMN criteria TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE campaign ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE cycle_start (
        drive_id INTEGER NOT NULL REFERENCES drive(id),
        seq INTEGER NOT NULL,
        started_at REAL NOT NULL,        -- wall clock
        cut_delay_ns INTEGER NOT NULL,
        PRIMARY KEY (drive_id, seq)
    );
    """,
    # v6: endurance mode (issue 6): one row per measured interval of sustained writes
    """
    CREATE TABLE endurance_interval (
        id INTEGER PRIMARY KEY,
        drive_id INTEGER NOT NULL REFERENCES drive(id),
        seq INTEGER NOT NULL,            -- 1-based per drive
        started_at REAL NOT NULL,        -- wall clock
        seconds REAL NOT NULL,           -- measured write time of the interval
        writes INTEGER NOT NULL,
        failed_writes INTEGER NOT NULL,
        bytes_written INTEGER NOT NULL,
        host_bytes_total INTEGER NOT NULL,  -- all host bytes written to the drive so far
        tbw_fraction REAL,               -- host_bytes_total / rated TBW; NULL when not rated
        mb_per_s REAL NOT NULL,          -- 1e6 bytes per second
        iops REAL NOT NULL,
        lat_p50_us REAL, lat_p99_us REAL, lat_p999_us REAL, lat_max_us REAL,
        fill_fraction REAL NOT NULL,     -- share of the region holding data of this campaign
        steady INTEGER NOT NULL,         -- 1 when the steady-state rule holds (docs/campaign.md)
        verified_blocks INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        kind TEXT NOT NULL DEFAULT 'write',  -- write | retention
        detail TEXT NOT NULL DEFAULT '{}',   -- JSON: findings per class, SMART fields, ...
        UNIQUE (drive_id, seq)
    );
    """,
    # v7: the id written on the media is a random nonce, not the store's row id: a fresh store on a
    # drive that an earlier campaign wrote would reuse id 1 and take the old records for its own
    """
    ALTER TABLE campaign ADD COLUMN media_id INTEGER;
    UPDATE campaign SET media_id = id;
    """,
    # v8: time from the last acknowledged write and the last completed flush to the cut, per
    # cycle, so a report over millions of cuts need not decompress every ledger for them
    """
    ALTER TABLE cycle ADD COLUMN last_ack_to_cut_ns INTEGER;
    ALTER TABLE cycle ADD COLUMN last_flush_to_cut_ns INTEGER;
    """,
    # v9: blocks a cut's check meant to read and left unread (a read budget spent): `unchecked`,
    # counted apart from read errors (only a block whose own read failed is a read error)
    """
    ALTER TABLE cycle ADD COLUMN blocks_unchecked INTEGER NOT NULL DEFAULT 0;
    """,
    # v10 (issue 18): the number of latency samples behind an interval's percentiles (a
    # percentile the samples cannot support is NULL beside its count, rig/endurance.py); the
    # write interval's own number, which retention rows (sharing `seq`) do not take
    """
    ALTER TABLE endurance_interval ADD COLUMN lat_samples INTEGER;
    ALTER TABLE endurance_interval ADD COLUMN interval_no INTEGER;
    UPDATE endurance_interval SET interval_no = (SELECT COUNT(*) FROM endurance_interval o
        WHERE o.drive_id = endurance_interval.drive_id AND o.kind = 'write'
        AND o.seq <= endurance_interval.seq) WHERE kind = 'write';
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def new_media_id() -> int:
    """A random non-zero 63-bit id (fits SQLite's signed INTEGER and the header's u64 word)."""
    return secrets.randbits(63) | 1


def migrate(db: sqlite3.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise UserError(f"store has schema v{version}, newer than this rig (v{SCHEMA_VERSION})")
    for number in range(version, SCHEMA_VERSION):
        with db:
            db.executescript(f"BEGIN; {MIGRATIONS[number]} PRAGMA user_version = {number + 1};")


@dataclass(frozen=True)
class RailSenseRow:
    """One cycle's rail-sense capture (table rail_sense, docs/schema.md)."""

    channel: int
    edge_mcu_us: int
    edge_ns: int | None
    edge_error_ns: int | None
    hi_threshold: int
    lo_threshold: int
    window_ms: int
    v0: int | None
    hi_us: int | None
    lo_us: int | None
    min_v: int | None
    end_reason: str
    sample_dt_us: int | None
    samples: tuple[int, ...] = ()


@dataclass(frozen=True)
class CycleRow:
    drive_id: int
    seq: int
    status: str
    cut_delay_ns: int
    started_at: float
    error: str = ""
    write_start_ns: int | None = None
    cut_ns: int | None = None
    cut_error_ns: int | None = None
    gone_ns: int | None = None
    back_ns: int | None = None
    writes: int = 0
    writes_acked: int = 0
    writes_durable: int = 0
    flushes: int = 0
    bytes_written: int = 0
    blocks_checked: int = 0
    blocks_unchecked: int = 0  # meant to be read, left unread by a read budget (not a failure)
    nondurable_writes: int = 0
    nondurable_survived: int = 0
    failures: int = 0
    full_scan: int = 0  # 1: this cycle checked the whole test region
    unserializable_writes: int = 0  # durable writes lost behind a later survivor (FAST'13)
    last_ack_to_cut_ns: int | None = None  # -1: no write acknowledged before the cut
    last_flush_to_cut_ns: int | None = None  # -1: no flush completed before the cut


@dataclass(frozen=True)
class IntervalRow:
    """One `endurance_interval` row (docs/schema.md)."""

    drive_id: int
    seq: int
    started_at: float
    seconds: float
    writes: int
    failed_writes: int
    bytes_written: int
    host_bytes_total: int
    tbw_fraction: float | None
    mb_per_s: float
    iops: float
    lat_p50_us: float | None
    lat_p99_us: float | None
    lat_p999_us: float | None
    lat_max_us: float | None
    lat_samples: int
    fill_fraction: float
    steady: int
    verified_blocks: int
    failures: int
    kind: str
    detail: dict[str, Any]
    interval_no: int | None


class Store:
    """One SQLite file. Thread-safe: one connection guarded by a lock (writes are batched)."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        """`read_only`: a reader beside the rig that writes the store (the dashboard): it never
        migrates or writes, and refuses a store newer than this rig."""
        self.path = path
        self.read_only = read_only
        try:
            if read_only:
                uri = f"file:{os.path.abspath(path)}?mode=ro"
                self._db = sqlite3.connect(
                    uri, uri=True, check_same_thread=False, isolation_level=None
                )
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as error:
            raise UserError(f"{path}: not a rig store ({error})") from error
        self._lock = threading.Lock()
        self._queued_events: list[tuple[int | None, int, str, str]] = []
        self._queue_lock = threading.Lock()  # never held across SQLite work
        if read_only:
            if version != SCHEMA_VERSION:
                self._db.close()
                raise UserError(
                    f"{path}: store has schema v{version}; this rig reads v{SCHEMA_VERSION}"
                )
            return
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        migrate(self._db)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; events queued by `queue_event` are written in it too."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._write_queued_events()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def queue_event(
        self, drive_id: int | None, host_ns: int, kind: str, detail: dict[str, Any]
    ) -> None:
        """Record an event without waiting for SQLite (for callbacks on time-critical threads,
        such as the relay board's heartbeat); it is written with the next transaction."""
        with self._queue_lock:
            self._queued_events.append(
                (drive_id, host_ns, kind, json.dumps(detail, sort_keys=True))
            )

    def _write_queued_events(self) -> None:
        with self._queue_lock:
            queued, self._queued_events = self._queued_events, []
        self._db.executemany(
            "INSERT INTO event (drive_id, host_ns, kind, detail) VALUES (?,?,?,?)", queued
        )

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            self._db.row_factory = sqlite3.Row
            try:
                return list(self._db.execute(sql, args))
            finally:
                self._db.row_factory = None

    def new_campaign(self, name: str, config: str, seed: int, station: str) -> int:
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO campaign (name, config, seed, station, started_at, media_id)"
                " VALUES (?,?,?,?,?,?)",
                (name, config, seed, station, time.time(), new_media_id()),
            )
            return int(cursor.lastrowid or 0)

    def media_id(self, campaign_id: int) -> int:
        """The campaign id stored in every record header (docs/record-format.md)."""
        rows = self.query("SELECT media_id FROM campaign WHERE id = ?", (campaign_id,))
        if not rows or rows[0]["media_id"] is None:
            raise UserError(f"store has no campaign {campaign_id}")
        return int(rows[0]["media_id"])

    def end_campaign(self, campaign_id: int, status: str) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE campaign SET ended_at = ?, status = ? WHERE id = ?",
                (time.time(), status, campaign_id),
            )

    def add_drive(
        self,
        campaign_id: int,
        channel: int,
        identity: dict[str, str],
        size_bytes: int,
        block_size: int,
        region: tuple[int, int],
        profile: str = "",
    ) -> int:
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO drive (campaign_id, channel, model, serial, wwn, firmware, size_bytes,"
                " block_size, region_first_lba, region_blocks, profile)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    campaign_id,
                    channel,
                    identity["model"],
                    identity["serial"],
                    identity["wwn"],
                    identity["firmware"],
                    size_bytes,
                    block_size,
                    region[0],
                    region[1],
                    profile,
                ),
            )
            return int(cursor.lastrowid or 0)

    def set_drive_status(self, drive_id: int, status: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE drive SET status = ? WHERE id = ?", (status, drive_id))

    def record_cycle(
        self,
        row: CycleRow,
        findings: list[dict[str, Any]],
        events: list[tuple[int, str, dict[str, Any]]],
        ledger: bytes | None,
        lba_state: bytes | None,
        rail_sense: RailSenseRow | None = None,
    ) -> int:
        """The record phase: the cycle, its findings, events, ledger, LBA state and rail-sense
        capture, atomically."""
        columns = [name for name in CycleRow.__dataclass_fields__]
        values = [getattr(row, name) for name in columns]
        with self.transaction() as db:
            cursor = db.execute(
                f"INSERT INTO cycle ({', '.join(columns)}, ended_at)"
                f" VALUES ({', '.join('?' * len(columns))}, ?)",
                (*values, time.time()),
            )
            cycle_id = int(cursor.lastrowid or 0)
            db.executemany(
                "INSERT INTO finding (cycle_id, class, failure, lba_first, lba_count, expected_gen,"
                " observed_gen, expected_op, observed_op, detail) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        cycle_id,
                        f["cls"],
                        int(failures.is_failure(f["cls"])),  # KeyError: a class not in the table
                        f["lba_first"],
                        f["lba_count"],
                        f["expected_gen"],
                        f["observed_gen"],
                        f["expected_op"],
                        f["observed_op"],
                        json.dumps(f["detail"], sort_keys=True),
                    )
                    for f in findings
                ],
            )
            db.executemany(
                "INSERT INTO event (drive_id, cycle_id, host_ns, kind, detail) VALUES (?,?,?,?,?)",
                [
                    (row.drive_id, cycle_id, ns, kind, json.dumps(detail, sort_keys=True))
                    for ns, kind, detail in events
                ],
            )
            if ledger is not None:
                db.execute(
                    "INSERT INTO ledger (cycle_id, writes) VALUES (?, ?)", (cycle_id, ledger)
                )
            if lba_state is not None:
                _save_lba_state(db, row.drive_id, row.seq, lba_state)
            if rail_sense is not None:
                rail = asdict(rail_sense)
                rail["samples"] = json.dumps(list(rail_sense.samples))
                db.execute(
                    f"INSERT INTO rail_sense (cycle_id, {', '.join(rail)})"
                    f" VALUES (?, {', '.join('?' * len(rail))})",
                    (cycle_id, *rail.values()),
                )
            return cycle_id

    def add_event(
        self, drive_id: int | None, host_ns: int, kind: str, detail: dict[str, Any]
    ) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO event (drive_id, host_ns, kind, detail) VALUES (?,?,?,?)",
                (drive_id, host_ns, kind, json.dumps(detail, sort_keys=True)),
            )

    def add_health(
        self,
        drive_id: int,
        after_seq: int,
        host_ns: int,
        source: str,
        fields: dict[str, Any],
        raw: str,
    ) -> None:
        """One health snapshot; `raw` is kept compressed (read it with `health_raw`).

        Never fails on what a health parser returns: numbers too wide for JSON are kept as hex
        text, other values as their text, and raw text that is not valid Unicode (a lone
        surrogate) is kept with backslash escapes.
        """
        with self.transaction() as db:
            db.execute(
                "INSERT INTO health (drive_id, after_seq, host_ns, source, fields, raw)"
                " VALUES (?,?,?,?,?,?)",
                (
                    drive_id,
                    after_seq,
                    host_ns,
                    source,
                    json.dumps(_json_safe(fields), sort_keys=True, default=str),
                    zlib.compress(raw.encode("utf-8", errors="backslashreplace"), 6),
                ),
            )

    # -- the campaign's own writes and reads beside the record phase (rig/campaign/recording.py,
    # rig/endurance.py, rig/resume.py)

    def set_criteria(self, campaign_id: int, criteria: dict[str, Any]) -> None:
        """The campaign's pass/fail criteria, as the report judges them."""
        with self.transaction() as db:
            db.execute(
                "UPDATE campaign SET criteria = ? WHERE id = ?",
                (json.dumps(criteria, sort_keys=True), campaign_id),
            )

    def begin_cycle(self, drive_id: int, seq: int, started_at: float, cut_delay_ns: int) -> None:
        """Written before any I/O of a cycle: a resume finds a cycle begun and never recorded."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO cycle_start (drive_id, seq, started_at, cut_delay_ns)"
                " VALUES (?,?,?,?)",
                (drive_id, seq, started_at, cut_delay_ns),
            )

    def has_health(self, drive_id: int, after_seq: int) -> bool:
        """Whether a health snapshot taken after cycle `after_seq` is stored."""
        rows = self.query(
            "SELECT 1 FROM health WHERE drive_id = ? AND after_seq = ?", (drive_id, after_seq)
        )
        return bool(rows)

    def endurance_so_far(self, drive_id: int) -> tuple[int, int, list[float]]:
        """A drive's last endurance interval number, its host bytes written so far, and the
        throughput of every write interval in order (an endurance run continues from them)."""
        last = self.query(
            "SELECT COALESCE(MAX(seq), 0) AS seq, COALESCE(MAX(host_bytes_total), 0) AS bytes"
            " FROM endurance_interval WHERE drive_id = ?",
            (drive_id,),
        )[0]
        rows = self.query(
            "SELECT mb_per_s FROM endurance_interval WHERE drive_id = ? AND kind = 'write'"
            " ORDER BY seq",
            (drive_id,),
        )
        return int(last["seq"]), int(last["bytes"]), [float(r["mb_per_s"]) for r in rows]

    def endurance_details(self, drive_id: int) -> list[dict[str, Any]]:
        """The `detail` of every write interval of a drive, in order (its PTS round figures:
        a resumed endurance run rebuilds its steady-state bookkeeping from them)."""
        rows = self.query(
            "SELECT detail FROM endurance_interval WHERE drive_id = ? AND kind = 'write'"
            " ORDER BY seq",
            (drive_id,),
        )
        return [json.loads(r["detail"]) for r in rows]

    def record_interval(self, row: IntervalRow, after_cycle: int, lba_state: bytes) -> None:
        """One endurance interval and the expected state after it, atomically (a resume
        continues from that state)."""
        values = asdict(row)
        values["detail"] = json.dumps(row.detail, sort_keys=True)
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO endurance_interval ({', '.join(values)})"
                f" VALUES ({', '.join('?' * len(values))})",
                tuple(values.values()),
            )
            _save_lba_state(db, row.drive_id, after_cycle, lba_state)

    def record_resume_scan(
        self, drive_id: int, host_ns: int, detail: dict[str, Any], after_cycle: int, state: bytes
    ) -> None:
        """A resume's read-back of a drive with no interrupted cycle: its event and the state
        rebuilt from it, atomically."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO event (drive_id, host_ns, kind, detail) VALUES (?,?,?,?)",
                (drive_id, host_ns, "resume_scan", json.dumps(detail, sort_keys=True)),
            )
            _save_lba_state(db, drive_id, after_cycle, state)

    def mark_resumed(self, campaign_id: int) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE campaign SET status = 'running', ended_at = NULL, resumes = resumes + 1"
                " WHERE id = ?",
                (campaign_id,),
            )

    def drive_on_channel(self, campaign_id: int, channel: int) -> sqlite3.Row | None:
        rows = self.query(
            "SELECT * FROM drive WHERE campaign_id = ? AND channel = ?", (campaign_id, channel)
        )
        return rows[0] if rows else None

    def lba_state_of(self, drive_id: int) -> bytes | None:
        """The drive's expected state as last stored, if any."""
        rows = self.query("SELECT state FROM lba_state WHERE drive_id = ?", (drive_id,))
        return bytes(rows[0]["state"]) if rows else None

    def cycle_totals(self, drive_id: int) -> sqlite3.Row:
        """Per drive: the last recorded seq, the most writes of a cycle, cycles that count
        (all but interrupted ones), rig errors, cycles with failures, time spent in cycles."""
        return self.query(
            "SELECT COALESCE(MAX(seq), 0) AS last, COALESCE(MAX(writes), 0) AS most,"
            " SUM(status != 'interrupted') AS counted, SUM(status = 'error') AS errors,"
            " SUM(status != 'interrupted' AND failures > 0) AS failing,"
            " COALESCE(SUM(CASE WHEN status != 'interrupted' THEN ended_at - started_at END), 0)"
            " AS elapsed FROM cycle WHERE drive_id = ?",
            (drive_id,),
        )[0]

    def finding_counts_of_drive(self, drive_id: int) -> list[sqlite3.Row]:
        """(class, failure, n) of every finding of the drive's cycles."""
        return self.query(
            "SELECT f.class, f.failure, COUNT(*) AS n FROM finding f"
            " JOIN cycle c ON c.id = f.cycle_id WHERE c.drive_id = ? GROUP BY f.class, f.failure",
            (drive_id,),
        )

    def last_begun_after(self, drive_id: int, seq: int) -> sqlite3.Row | None:
        """(seq, started_at, cut_delay_ns) of the last cycle begun after `seq`, if any."""
        rows = self.query(
            "SELECT seq, started_at, cut_delay_ns FROM cycle_start WHERE drive_id = ? AND seq > ?"
            " ORDER BY seq DESC LIMIT 1",
            (drive_id, seq),
        )
        return rows[0] if rows else None

    def health_raw(self, health_id: int) -> str:
        row = self.query("SELECT raw FROM health WHERE id = ?", (health_id,))
        return zlib.decompress(row[0]["raw"]).decode() if row else ""

    # -- reads for the fleet's replicator (rig/fleet/replicator.py): everything a finished cycle
    # left, in the order it was recorded (row ids only grow: one writer, one transaction at a time)

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

    def close(self) -> None:
        if not self.read_only:
            with self.transaction():
                pass  # writes what is still queued
        with self._lock:
            self._db.close()


def _save_lba_state(db: sqlite3.Connection, drive_id: int, after_cycle: int, state: bytes) -> None:
    db.execute(
        "INSERT OR REPLACE INTO lba_state (drive_id, after_cycle, state) VALUES (?,?,?)",
        (drive_id, after_cycle, state),
    )


def _json_safe(value: Any) -> Any:
    """`value` with every int that JSON text cannot carry safely (beyond 128 bits: Python
    refuses to print ints over 4,300 digits) as hex text."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >> 128:
        return hex(value)
    return value


def open_existing(path: str) -> Store:
    """Open a store that must already exist (status, report)."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such store")
    return Store(path)
