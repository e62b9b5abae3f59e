"""The central database's schema, versioned like the station store's (rig/store/): each entry
upgrades by one version, recorded in fleet.schema_version; never edit a released entry.

Every row a station writes carries its station's name, and row-level security lets a station's
role (a member of rig_station) see and write only rows of its own station. rig_reader reads all;
rig_dispatch submits and stops campaigns. procrastinate's queue (schema applied before ours) gets
the same rule: a station's worker sees only the jobs of its own queue, `station:<name>`.

Rows of a cycle (findings, rail sense, ledger) carry no foreign key to `fleet.cycle`: the
replicator writes them in the cycle's own transaction, and a key check per finding row against the
largest table was planned on a fresh database while it was empty (a sequential scan, cached by
the connection): catching up a backlog slowed quadratically until autovacuum analyzed the table.
"""

from __future__ import annotations

# tables that stations write, each with a `station` column
STATION_TABLES = (
    "inventory",
    "campaign",
    "drive",
    "cycle",
    "finding",
    "event",
    "health",
    "rail_sense",
    "endurance_interval",
    "ledger",
)

_ROLES = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rig_reader') THEN
        CREATE ROLE rig_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rig_dispatch') THEN
        CREATE ROLE rig_dispatch NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rig_station') THEN
        CREATE ROLE rig_station NOLOGIN;
    END IF;
END $$;
"""

_V1 = """
CREATE TABLE fleet.station (
    name text PRIMARY KEY,
    role name NOT NULL UNIQUE,              -- the PostgreSQL role the station logs in as
    created_at timestamptz NOT NULL DEFAULT now(),
    last_seen timestamptz,                  -- the agent's last heartbeat
    agent text NOT NULL DEFAULT ''          -- host and pid of the agent, for the dashboard
);
-- the station of the role that logged in (session_user: inside a SECURITY DEFINER function
-- current_user is the owner); NULL for any other role
CREATE FUNCTION fleet.my_station() RETURNS text LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = fleet, pg_temp
    AS $$ SELECT name FROM fleet.station WHERE role = session_user $$;

CREATE TABLE fleet.inventory (              -- the drives a station holds, published by its agent
    station text NOT NULL REFERENCES fleet.station(name),
    drive_key text NOT NULL,                -- 'wwn:<wwn>' or 'sn:<model>|<serial>'
    model text NOT NULL,
    serial text NOT NULL,
    wwn text NOT NULL DEFAULT '',
    firmware text NOT NULL DEFAULT '',
    seen_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (station, drive_key)
);

CREATE TABLE fleet.submission (             -- a campaign submitted centrally
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    config text NOT NULL,                   -- the campaign file as given
    station text NOT NULL REFERENCES fleet.station(name),
    drive_keys text[] NOT NULL,
    cycles_planned bigint NOT NULL,         -- cuts per drive times drives
    status text NOT NULL DEFAULT 'queued',  -- queued | running | done | failed | stopped | error
    job_id bigint,                          -- procrastinate job that hands it to the station
    stop_requested boolean NOT NULL DEFAULT false,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    submitted_by name NOT NULL DEFAULT session_user,
    started_at timestamptz,
    ended_at timestamptz,
    exit_code integer,
    message text NOT NULL DEFAULT ''
);

CREATE TABLE fleet.claim (                  -- a drive is in at most one live campaign
    drive_key text NOT NULL,
    submission_id bigint NOT NULL REFERENCES fleet.submission(id),
    station text NOT NULL REFERENCES fleet.station(name),
    claimed_at timestamptz NOT NULL DEFAULT now(),
    released_at timestamptz,
    PRIMARY KEY (drive_key, submission_id)
);
CREATE UNIQUE INDEX claim_live ON fleet.claim (drive_key) WHERE released_at IS NULL;

-- replicated from the stations' stores (natural keys: station, campaign media id, channel, seq)
CREATE TABLE fleet.campaign (
    station text NOT NULL REFERENCES fleet.station(name),
    uid bigint NOT NULL,                    -- the store's media_id: random, written on the media
    submission_id bigint REFERENCES fleet.submission(id),
    local_id integer NOT NULL,
    name text NOT NULL,
    config text NOT NULL,
    seed bigint NOT NULL,
    board text NOT NULL,                    -- the store's campaign.station: the relay board
    started_at double precision NOT NULL,
    ended_at double precision,
    status text NOT NULL,
    criteria text NOT NULL DEFAULT '{}',
    resumes integer NOT NULL DEFAULT 0,
    PRIMARY KEY (station, uid)
);
CREATE TABLE fleet.drive (
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    model text NOT NULL,
    serial text NOT NULL,
    wwn text NOT NULL,
    firmware text NOT NULL,
    size_bytes bigint NOT NULL,
    block_size integer NOT NULL,
    region_first_lba bigint NOT NULL,
    region_blocks bigint NOT NULL,
    profile text NOT NULL,
    status text NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel),
    FOREIGN KEY (station, campaign_uid) REFERENCES fleet.campaign(station, uid)
);
CREATE TABLE fleet.cycle (
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    seq integer NOT NULL,
    local_id bigint NOT NULL,               -- row id in the station's store: the replication cursor
    status text NOT NULL,
    error text NOT NULL,
    cut_delay_ns bigint NOT NULL,
    write_start_ns bigint, cut_ns bigint, cut_error_ns bigint, gone_ns bigint, back_ns bigint,
    writes bigint NOT NULL, writes_acked bigint NOT NULL, writes_durable bigint NOT NULL,
    flushes bigint NOT NULL, bytes_written bigint NOT NULL, blocks_checked bigint NOT NULL,
    nondurable_writes bigint NOT NULL, nondurable_survived bigint NOT NULL,
    failures integer NOT NULL,
    full_scan integer NOT NULL, unserializable_writes integer NOT NULL,
    last_ack_to_cut_ns bigint, last_flush_to_cut_ns bigint,
    started_at double precision NOT NULL,
    ended_at double precision NOT NULL,
    replicated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (station, campaign_uid, channel, seq),
    FOREIGN KEY (station, campaign_uid, channel)
        REFERENCES fleet.drive(station, campaign_uid, channel)
);
CREATE INDEX cycle_cursor ON fleet.cycle (station, campaign_uid, local_id);
CREATE INDEX cycle_recent ON fleet.cycle (ended_at);
CREATE TABLE fleet.finding (
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    seq integer NOT NULL,
    ordinal integer NOT NULL,               -- order within the cycle
    class text NOT NULL,
    failure integer NOT NULL,
    lba_first bigint NOT NULL, lba_count bigint NOT NULL,
    expected_gen bigint NOT NULL, observed_gen bigint NOT NULL,
    expected_op bigint NOT NULL, observed_op bigint NOT NULL,
    detail text NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel, seq, ordinal)
);
CREATE TABLE fleet.event (
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    local_id bigint NOT NULL,
    channel integer,                        -- NULL: station-wide
    seq integer,                            -- NULL: between cycles
    host_ns bigint NOT NULL,
    kind text NOT NULL,
    detail text NOT NULL,
    PRIMARY KEY (station, campaign_uid, local_id),
    FOREIGN KEY (station, campaign_uid) REFERENCES fleet.campaign(station, uid)
);
CREATE INDEX event_loose ON fleet.event (station, campaign_uid, local_id) WHERE seq IS NULL;
CREATE TABLE fleet.health (
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    after_seq integer NOT NULL,
    local_id bigint NOT NULL,
    host_ns bigint NOT NULL,
    source text NOT NULL,
    fields text NOT NULL,
    raw bytea NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel, after_seq),
    FOREIGN KEY (station, campaign_uid, channel)
        REFERENCES fleet.drive(station, campaign_uid, channel)
);
CREATE TABLE fleet.rail_sense (
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    seq integer NOT NULL,
    edge_mcu_us bigint NOT NULL, edge_ns bigint, edge_error_ns bigint,
    hi_threshold integer NOT NULL, lo_threshold integer NOT NULL, window_ms integer NOT NULL,
    v0 integer, hi_us bigint, lo_us bigint, min_v integer,
    end_reason text NOT NULL, sample_dt_us integer, samples text NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel, seq)
);
CREATE TABLE fleet.endurance_interval (
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    seq integer NOT NULL,
    local_id bigint NOT NULL,
    row jsonb NOT NULL,                     -- the store's endurance_interval row, as it is
    PRIMARY KEY (station, campaign_uid, channel, seq),
    FOREIGN KEY (station, campaign_uid, channel)
        REFERENCES fleet.drive(station, campaign_uid, channel)
);
CREATE TABLE fleet.ledger (                 -- optional: replicated when the station asks
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    seq integer NOT NULL,
    writes bytea NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel, seq)
);
"""


def _grants_and_policies() -> str:
    parts = [
        "GRANT USAGE ON SCHEMA fleet TO rig_reader, rig_dispatch, rig_station;",
        "GRANT SELECT ON ALL TABLES IN SCHEMA fleet TO rig_reader, rig_dispatch, rig_station;",
        "GRANT EXECUTE ON FUNCTION fleet.my_station() TO rig_station;",
        "GRANT INSERT, UPDATE ON fleet.submission, fleet.claim TO rig_dispatch;",
        "GRANT USAGE ON SEQUENCE fleet.submission_id_seq TO rig_dispatch;",
        "GRANT UPDATE ON fleet.submission, fleet.claim TO rig_station;",
        "GRANT UPDATE (last_seen, agent) ON fleet.station TO rig_station;",
        "GRANT DELETE ON fleet.inventory TO rig_station;",
    ]
    # readers and dispatchers see every row; a station only its own
    for table in (*STATION_TABLES, "station", "submission", "claim"):
        own = "name" if table == "station" else "station"
        parts += [
            f"ALTER TABLE fleet.{table} ENABLE ROW LEVEL SECURITY;",
            f"CREATE POLICY read_all ON fleet.{table} FOR SELECT TO rig_reader, rig_dispatch"
            " USING (true);",
            # (SELECT ...): evaluated once per statement (an InitPlan), not once per row
            f"CREATE POLICY own_rows ON fleet.{table} TO rig_station"
            f" USING ({own} = (SELECT fleet.my_station()))"
            f" WITH CHECK ({own} = (SELECT fleet.my_station()));",
        ]
    parts += [
        "CREATE POLICY dispatch ON fleet.submission FOR INSERT TO rig_dispatch WITH CHECK (true);",
        "CREATE POLICY dispatch_update ON fleet.submission FOR UPDATE TO rig_dispatch"
        " USING (true);",
        "CREATE POLICY dispatch ON fleet.claim FOR INSERT TO rig_dispatch WITH CHECK (true);",
        "CREATE POLICY dispatch_update ON fleet.claim FOR UPDATE TO rig_dispatch USING (true);",
    ]
    station_writes = ", ".join(f"fleet.{t}" for t in STATION_TABLES)
    parts.append(f"GRANT INSERT, UPDATE ON {station_writes} TO rig_station;")
    # procrastinate's queue: stations and dispatchers use its tables and functions; a station's
    # worker sees only its own queue's jobs
    parts += [
        "GRANT USAGE ON SCHEMA public TO rig_dispatch, rig_station, rig_reader;",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public"
        " TO rig_dispatch, rig_station;",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO rig_reader;",
        "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO rig_dispatch, rig_station;",
        "ALTER TABLE public.procrastinate_jobs ENABLE ROW LEVEL SECURITY;",
        "CREATE POLICY all_jobs ON public.procrastinate_jobs TO rig_dispatch, rig_reader"
        " USING (true) WITH CHECK (true);",
        "CREATE POLICY own_queue ON public.procrastinate_jobs TO rig_station"
        " USING (queue_name = 'station:' || (SELECT fleet.my_station()))"
        " WITH CHECK (queue_name = 'station:' || (SELECT fleet.my_station()));",
    ]
    return "\n".join(parts)


# v2: a cycle's blocks left unread by a read budget (the station store's v9), so a fleet report
# says "unchecked" where a station's report does
_V2 = "ALTER TABLE fleet.cycle ADD COLUMN blocks_unchecked bigint NOT NULL DEFAULT 0;"

# v3: the view states its own age. A station publishes its heartbeat interval (stale
# after STALE_AFTER_BEATS missed ones) and its station kind (in-process drives: a campaign there
# cannot survive its rig process); with each heartbeat it reports how many cycle rows each live
# campaign's store holds, and at the end the final count, so the centre shows `done` only when it
# holds them all.
_V3 = """
ALTER TABLE fleet.station ADD COLUMN heartbeat_s real NOT NULL DEFAULT 5,
    ADD COLUMN kind text NOT NULL DEFAULT '';
ALTER TABLE fleet.submission ADD COLUMN recorded_rows bigint,
    ADD COLUMN recorded_cycles bigint,
    ADD COLUMN recorded_at timestamptz,
    ADD COLUMN final_rows bigint;
GRANT UPDATE (last_seen, agent, heartbeat_s, kind) ON fleet.station TO rig_station;
"""

# v4: the stations' summaries travel with their cycles. Each cycle keeps the station's
# `failure_classes` (its store's v11 per-cycle class table); the findings per class, the cuts
# with each class and the lost durable writes' times (ms, 3 significant digits, as the station
# rounds them) are kept per model, day (of the cycle's end, UTC), station, campaign and drive,
# added by the transaction that inserts the cycle, for the cycles it inserted only (a cycle
# shipped twice adds nothing: rig/interface/fleet/central/summaries.py). The keys lead with the
# model, so a model's figures over a year read that model's rows of one index and nothing else. An
# older database is backfilled from its finding rows (SUMMARY_BACKFILL, after this SQL).
SUMMARY_TABLES = ("day_cycles", "day_class", "day_lost_after")
_V4 = """
ALTER TABLE fleet.cycle ADD COLUMN failure_classes text;
CREATE TABLE fleet.day_cycles (             -- cycle counts per drive and day
    model text NOT NULL,
    day date NOT NULL,
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    rows bigint NOT NULL,                   -- cycle rows
    cycles bigint NOT NULL,                 -- less interrupted ones (run again on resume)
    cuts bigint NOT NULL,                   -- status ok or dead
    rig_errors bigint NOT NULL,
    failing bigint NOT NULL,                -- cycles with a failure finding
    blocks_checked bigint NOT NULL,
    blocks_unchecked bigint NOT NULL,
    last_ended double precision NOT NULL,
    PRIMARY KEY (model, day, station, campaign_uid, channel)
);
CREATE TABLE fleet.day_class (              -- findings per class per drive and day
    model text NOT NULL,
    day date NOT NULL,
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    class text NOT NULL,
    failure integer NOT NULL,
    findings bigint NOT NULL,
    blocks bigint NOT NULL,                 -- their lba_count, summed
    cuts bigint NOT NULL,                   -- cycles whose failure_classes hold the class
    PRIMARY KEY (model, day, station, campaign_uid, channel, class, failure)
);
CREATE TABLE fleet.day_lost_after (         -- lost durable writes per time since ack / flush
    model text NOT NULL,
    day date NOT NULL,
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    since text NOT NULL,                    -- ack | flush
    ms double precision NOT NULL,           -- rounded to 3 significant digits
    n bigint NOT NULL,
    PRIMARY KEY (model, day, station, campaign_uid, channel, since, ms)
);
-- a drive's (or a campaign's) rows, for the report and the dashboard's overview
CREATE INDEX day_cycles_drive ON fleet.day_cycles (station, campaign_uid, channel);
CREATE INDEX day_class_drive ON fleet.day_class (station, campaign_uid, channel);
CREATE INDEX day_lost_after_drive ON fleet.day_lost_after (station, campaign_uid, channel);
"""


def _summary_grants(tables: tuple[str, ...] = SUMMARY_TABLES) -> str:
    parts = []
    for table in tables:
        parts += [
            f"GRANT SELECT ON fleet.{table} TO rig_reader, rig_dispatch, rig_station;",
            f"GRANT INSERT, UPDATE ON fleet.{table} TO rig_station;",
            f"ALTER TABLE fleet.{table} ENABLE ROW LEVEL SECURITY;",
            f"CREATE POLICY read_all ON fleet.{table} FOR SELECT TO rig_reader, rig_dispatch"
            " USING (true);",
            f"CREATE POLICY own_rows ON fleet.{table} TO rig_station"
            " USING (station = (SELECT fleet.my_station()))"
            " WITH CHECK (station = (SELECT fleet.my_station()));",
        ]
    return "\n".join(parts)


# v5: per-drive running totals beside the day tables, added to by the same
# transaction: the overview sums a row per drive, not one per drive and day, and a model's
# verdict reads its drives' rows (`drive_failing`: cuts per set of failure classes, exact for any
# criteria's classes). Backfilled from the cycle rows and `day_class` (DRIVE_BACKFILL).
DRIVE_TABLES = ("drive_cycles", "drive_class", "drive_failing")
_V5 = """
CREATE TABLE fleet.drive_cycles (           -- cycle counts per drive (campaign and channel)
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    model text NOT NULL,
    rows bigint NOT NULL,
    cycles bigint NOT NULL,                 -- less interrupted ones
    cuts bigint NOT NULL,                   -- status ok or dead
    dead bigint NOT NULL,                   -- cuts with status dead
    rig_errors bigint NOT NULL,
    interrupted bigint NOT NULL,
    failing bigint NOT NULL,                -- cycles with a failure finding
    last_ended double precision NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel)
);
CREATE TABLE fleet.drive_class (            -- findings per class per drive
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    model text NOT NULL,
    class text NOT NULL,
    failure integer NOT NULL,
    findings bigint NOT NULL,
    blocks bigint NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel, class, failure)
);
CREATE TABLE fleet.drive_failing (          -- cuts per set of failure classes per drive
    station text NOT NULL,
    campaign_uid bigint NOT NULL,
    channel integer NOT NULL,
    model text NOT NULL,
    classes text NOT NULL,                  -- the cycle's failure_classes
    cuts bigint NOT NULL,
    PRIMARY KEY (station, campaign_uid, channel, classes)
);
CREATE INDEX drive_cycles_model ON fleet.drive_cycles (model);
CREATE INDEX drive_class_model ON fleet.drive_class (model);
CREATE INDEX drive_failing_model ON fleet.drive_failing (model);
"""

# migration of expo: each cut's exposure (the station store's `cycle.exposed`), so the central
# report counts per class the cuts that could have failed it
_EXPOSED = "ALTER TABLE fleet.cycle ADD COLUMN exposed text;"

# migration of views2: the notifications a station could not deliver (rig/notify/failures.py),
# replicated as its station-wide events, found per campaign without a pass over every event,
# as the station store's `event_notify` finds them; the WHERE is repeated by each read of them
NOTIFY_KINDS = "('notify_failed', 'notify_gave_up', 'notify_dropped')"
_EVENT_NOTIFY = (
    "CREATE INDEX IF NOT EXISTS event_notify ON fleet.event (station, campaign_uid, local_id)"
    f" WHERE kind IN {NOTIFY_KINDS};"
)

# migration of timing: where each cut fell against its plan (the station store's v14 columns,
# rig/campaign/cutcycle/cuts.py `fidelity`), so the central cut rows carry the realized delay
_TIMING = (
    "ALTER TABLE fleet.cycle ADD COLUMN realized_delay_ns bigint,"
    " ADD COLUMN timed_from text NOT NULL DEFAULT '', ADD COLUMN delay_error_ns bigint,"
    " ADD COLUMN delay_in_range integer;"
)

MIGRATIONS: tuple[str, ...] = (
    _ROLES + _V1 + _grants_and_policies(),
    _V2,
    _V3,
    _V4 + _summary_grants(),
    _V5 + _summary_grants(DRIVE_TABLES),
    _EXPOSED,
    _EVENT_NOTIFY,
    _TIMING,
)
# versions whose SQL is followed, in the same transaction, by a backfill from the rows already
# there (rig/interface/fleet/central/summaries.py: rebuild_days, rebuild_drives)
SUMMARY_BACKFILL = 4
DRIVE_BACKFILL = 5
SCHEMA_VERSION = len(MIGRATIONS)
