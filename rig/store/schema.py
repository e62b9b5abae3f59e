"""The store's schema: versioned migrations tracked in `PRAGMA user_version` (docs/schema.md)."""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import Callable

from rig.errors import UserError
from rig.store import cycle_sums, exposure_fill, totals

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
    # v5: campaigns that resume: the pass criteria stored with the campaign, a row per
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
    # v6: endurance mode: one row per measured interval of sustained writes
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
    # v10: the number of latency samples behind an interval's percentiles (a percentile the samples
    # cannot support is NULL beside its count, rig/campaign/endurance/endurance.py); the write
    # interval's own number, which retention rows (sharing `seq`) do not take
    """
    ALTER TABLE endurance_interval ADD COLUMN lat_samples INTEGER;
    ALTER TABLE endurance_interval ADD COLUMN interval_no INTEGER;
    UPDATE endurance_interval SET interval_no = (SELECT COUNT(*) FROM endurance_interval o
        WHERE o.drive_id = endurance_interval.drive_id AND o.kind = 'write'
        AND o.seq <= endurance_interval.seq) WHERE kind = 'write';
    """,
    # v11: summaries of the findings kept as cycles are recorded, so a report over
    # millions of cuts reads no finding row for them (rig/store/totals.py): each cycle's failure
    # classes (NULL: none), and per drive the findings per class and the lost durable writes'
    # times since their ack and flush (ms, 3 significant digits) with their counts. Backfilled
    # from the findings by `totals.rebuild` (BACKFILLS).
    """
    ALTER TABLE cycle ADD COLUMN failure_classes TEXT;
    CREATE TABLE finding_total (
        drive_id INTEGER NOT NULL REFERENCES drive(id),
        class TEXT NOT NULL,
        failure INTEGER NOT NULL,
        n INTEGER NOT NULL,              -- findings
        blocks INTEGER NOT NULL,         -- their lba_count, summed
        PRIMARY KEY (drive_id, class, failure)
    ) WITHOUT ROWID;
    CREATE TABLE lost_after (
        drive_id INTEGER NOT NULL REFERENCES drive(id),
        since TEXT NOT NULL,             -- ack | flush
        ms REAL NOT NULL,                -- rounded to 3 significant digits
        n INTEGER NOT NULL,              -- lost durable writes with that time
        PRIMARY KEY (drive_id, since, ms)
    ) WITHOUT ROWID;
    """,
    # v12: each drive's cycle counts and sums kept as cycles are recorded
    # (rig/store/cycle_sums.py; backfilled by `cycle_sums.rebuild`), and the returned cycles'
    # times from the cut to the drive back in order per drive, so `rig status` takes a drive's
    # exact median return time by walking half an index instead of sorting its cycles
    """
    CREATE TABLE cycle_total (
        drive_id INTEGER PRIMARY KEY REFERENCES drive(id),
        cycles INTEGER NOT NULL,
        ok INTEGER NOT NULL,             -- status ok
        error INTEGER NOT NULL,          -- status error (the rig's)
        with_failure INTEGER NOT NULL,   -- failures > 0
        nondurable_writes INTEGER NOT NULL,
        nondurable_survived INTEGER NOT NULL,
        writes INTEGER NOT NULL,
        bytes_written INTEGER NOT NULL,
        blocks_unchecked INTEGER NOT NULL,
        returned INTEGER NOT NULL        -- back_ns and cut_ns both known and non-zero
    );
    CREATE INDEX cycle_return ON cycle (drive_id, (back_ns - cut_ns))
        WHERE IFNULL(back_ns, 0) != 0 AND IFNULL(cut_ns, 0) != 0;
    """,
    # migration of states: every power-on of a cycle with its return and ready times (n = 0:
    # the restore after the cycle's cut; 1..: after each cut of a recovery burst, with where
    # that cut fell), written by the record phase (rig/campaign/cutcycle/recovery.py)
    """
    CREATE TABLE power_on (
        cycle_id INTEGER NOT NULL REFERENCES cycle(id),
        n INTEGER NOT NULL,
        on_ns INTEGER NOT NULL,          -- the power-on edge, host CLOCK_MONOTONIC
        back_ns INTEGER,                 -- back on the bus (NULL: not before the next cut)
        ready_ns INTEGER,                -- answering I/O (NULL: not seen ready)
        cut_ns INTEGER,                  -- the recovery cut that ended it (NULL: the last)
        state_at_cut TEXT NOT NULL DEFAULT '',  -- booting | not_ready | ready | '' (no cut)
        PRIMARY KEY (cycle_id, n)
    ) WITHOUT ROWID;
    """,
    # migration of timing: when each cut fell against its plan (rig/campaign/cutcycle/cuts.py
    # `fidelity`): the realized delay (the edge minus the event the cut was timed from, on the
    # host clock), that event, the clock mapping's bound, and whether the realized delay lies
    # in the range the campaign asked for (NULL: no range, or no edge)
    """
    ALTER TABLE cycle ADD COLUMN realized_delay_ns INTEGER;
    ALTER TABLE cycle ADD COLUMN timed_from TEXT NOT NULL DEFAULT '';
    ALTER TABLE cycle ADD COLUMN delay_error_ns INTEGER;
    ALTER TABLE cycle ADD COLUMN delay_in_range INTEGER;
    CREATE INDEX cycle_off_range ON cycle (drive_id) WHERE delay_in_range = 0;
    """,
    # migration of expo: the failure classes each cut was a trial of (rig/check/exposure.py,
    # comma-separated; '' none; NULL unknown), backfilled from the stored ledgers by
    # `exposure_fill.rebuild` (BACKFILLS[15])
    # `exposure_total` sums them per drive and class as cycles are recorded (rig status)
    """
    ALTER TABLE cycle ADD COLUMN exposed TEXT;
    CREATE TABLE exposure_total (
        drive_id INTEGER NOT NULL REFERENCES drive(id),
        class TEXT NOT NULL,
        exposed INTEGER NOT NULL,        -- cuts exposed to the class
        failing INTEGER NOT NULL,        -- of those, cuts with a failure of the class
        PRIMARY KEY (drive_id, class)
    ) WITHOUT ROWID;
    """,
    # migration of views: the notifications not delivered (rig/notify/failures.py) found by
    # `rig status` and the dashboard without a scan of every event (a few per cut)
    """
    CREATE INDEX IF NOT EXISTS event_notify ON event (kind)
        WHERE kind IN ('notify_failed', 'notify_gave_up', 'notify_dropped');
    """,
)
# Python steps of a migration, run in its transaction after its SQL: version -> step, called
# with the connection and the title of its progress lines (None: show none, a new store)
BACKFILLS: dict[int, Callable[[sqlite3.Connection, str | None], None]] = {
    11: totals.rebuild,
    12: cycle_sums.rebuild,
    15: exposure_fill.rebuild,
}
BACKFILL_WHAT = {
    11: "a pass over every finding",
    12: "a pass over every cycle",
    15: "each cut's exposure from its ledger",
}
SCHEMA_VERSION = len(MIGRATIONS)


def new_media_id() -> int:
    """A random non-zero 63-bit id (fits SQLite's signed INTEGER and the header's u64 word)."""
    return secrets.randbits(63) | 1


def migrate(db: sqlite3.Connection) -> None:
    """Upgrade the store to this rig's schema, one version per transaction. Each takes SQLite's
    write lock first (BEGIN IMMEDIATE) and reads the version again under it, so two openers of
    an older store never run the same step twice: the second waits, then finds it done."""
    created = db.execute("PRAGMA user_version").fetchone()[0] == 0  # (a new store: no rows)
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UserError(
                    f"store has schema v{version}, newer than this rig (v{SCHEMA_VERSION})"
                )
            if version == SCHEMA_VERSION:
                db.execute("COMMIT")
                return
            for statement in statements(MIGRATIONS[version]):
                db.execute(statement)
            if version + 1 in BACKFILLS:  # one pass over the rows: minutes on a large store
                title = None
                if not created:
                    logging.getLogger("rig").warning(
                        "store: upgrading to schema v%d (%s)",
                        version + 1,
                        BACKFILL_WHAT[version + 1],
                    )
                    title = f"store: schema v{version + 1} backfill"  # its progress, on stderr
                BACKFILLS[version + 1](db, title)
            db.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def statements(script: str) -> list[str]:
    """A migration's SQL as single statements (executescript would commit the transaction the
    migration runs in): cut at each semicolon that ends a complete statement."""
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n\t;"):
                found.append(pending.strip())
            pending = ""
    if pending.strip(" \n\t;"):
        found.append(pending.strip())
    return found
