"""The central database's summaries (schema v4, rig/interface/fleet/migrations.py): per model, day,
station, campaign and drive, the cycle counts, the findings and cuts per class and the lost durable
writes' times, so the fleet report and the dashboard read thousands of summary rows, not millions of
cycles and findings.

They are added to in the transaction that inserts the cycles, from the cycles that transaction
inserted (`new_cycle`, filled from the cycle insert's RETURNING) and the per-cycle shares the
station made with its own code (rig.store.CycleTotals, the same that adds each cycle to the
station's `finding_total` and `lost_after`): a cycle shipped again, or by two replicators at
once, is not inserted again and adds nothing; a ship that dies mid-way rolls back whole.
`rebuild` makes them again from the cycle and finding rows (the v4 migration's backfill of an
older database, and the scale bench after copying rows by SQL).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from rig.check import failures
from rig.interface.fleet.central.connection import Row
from rig.store import lost_after_ms

# the day a cycle counts for: its end, in UTC
DAY = "(to_timestamp(c.ended_at) AT TIME ZONE 'UTC')::date"
KEY = ("station", "campaign_uid", "channel", "seq")

# temporary tables of one ship (emptied at commit)
STAGING = (
    "CREATE TEMP TABLE IF NOT EXISTS new_cycle (station text, campaign_uid bigint,"
    " channel integer, seq integer, status text, failures integer, ended_at double precision,"
    " failure_classes text, blocks_checked bigint, blocks_unchecked bigint)"
    " ON COMMIT DELETE ROWS",
    "CREATE TEMP TABLE IF NOT EXISTS stage_cycle_total (station text, campaign_uid bigint,"
    " channel integer, seq integer, class text, failure integer, n bigint, blocks bigint)"
    " ON COMMIT DELETE ROWS",
    "CREATE TEMP TABLE IF NOT EXISTS stage_cycle_lost (station text, campaign_uid bigint,"
    " channel integer, seq integer, since text, ms double precision, n bigint)"
    " ON COMMIT DELETE ROWS",
)
NEW_CYCLE_COLUMNS = (
    *KEY,
    *("status", "failures", "ended_at", "failure_classes", "blocks_checked", "blocks_unchecked"),
)

_DAY_CYCLES = """
INSERT INTO fleet.day_cycles AS t (model, day, station, campaign_uid, channel, rows, cycles, cuts,
    rig_errors, failing, blocks_checked, blocks_unchecked, last_ended)
SELECT d.model, {day}, c.station, c.campaign_uid, c.channel, count(*),
    count(*) FILTER (WHERE c.status <> 'interrupted'),
    count(*) FILTER (WHERE c.status IN ('ok', 'dead')),
    count(*) FILTER (WHERE c.status = 'error'),
    count(*) FILTER (WHERE c.failures > 0),
    sum(c.blocks_checked), sum(c.blocks_unchecked), max(c.ended_at)
FROM {cycles} c JOIN fleet.drive d USING (station, campaign_uid, channel)
GROUP BY 1, 2, 3, 4, 5
ON CONFLICT (model, day, station, campaign_uid, channel) DO UPDATE SET
    rows = t.rows + excluded.rows, cycles = t.cycles + excluded.cycles,
    cuts = t.cuts + excluded.cuts, rig_errors = t.rig_errors + excluded.rig_errors,
    failing = t.failing + excluded.failing,
    blocks_checked = t.blocks_checked + excluded.blocks_checked,
    blocks_unchecked = t.blocks_unchecked + excluded.blocks_unchecked,
    last_ended = greatest(t.last_ended, excluded.last_ended)
"""
_DAY_CLASS = """
INSERT INTO fleet.day_class AS t (model, day, station, campaign_uid, channel, class, failure,
    findings, blocks, cuts)
SELECT model, day, station, campaign_uid, channel, class, failure,
    sum(findings), sum(blocks), sum(cuts)
FROM (
    SELECT d.model, {day} AS day, c.station, c.campaign_uid, c.channel, s.class, s.failure,
        s.n AS findings, s.blocks, 0 AS cuts
    FROM {totals} s JOIN {cycles} c USING (station, campaign_uid, channel, seq)
    JOIN fleet.drive d USING (station, campaign_uid, channel)
    UNION ALL
    SELECT d.model, {day}, c.station, c.campaign_uid, c.channel, k.class, 1, 0, 0, 1
    FROM {cycles} c CROSS JOIN LATERAL unnest(string_to_array(c.failure_classes, ',')) k(class)
    JOIN fleet.drive d USING (station, campaign_uid, channel)
    WHERE c.failure_classes IS NOT NULL
) x
GROUP BY 1, 2, 3, 4, 5, 6, 7
ON CONFLICT (model, day, station, campaign_uid, channel, class, failure) DO UPDATE SET
    findings = t.findings + excluded.findings, blocks = t.blocks + excluded.blocks,
    cuts = t.cuts + excluded.cuts
"""
_DAY_LOST = """
INSERT INTO fleet.day_lost_after AS t (model, day, station, campaign_uid, channel, since, ms, n)
SELECT d.model, {day}, c.station, c.campaign_uid, c.channel, l.since, l.ms, sum(l.n)
FROM stage_cycle_lost l JOIN {cycles} c USING (station, campaign_uid, channel, seq)
JOIN fleet.drive d USING (station, campaign_uid, channel)
GROUP BY 1, 2, 3, 4, 5, 6, 7
ON CONFLICT (model, day, station, campaign_uid, channel, since, ms) DO UPDATE SET
    n = t.n + excluded.n
"""
_DRIVE_CYCLES = """
INSERT INTO fleet.drive_cycles AS t (station, campaign_uid, channel, model, rows, cycles, cuts,
    dead, rig_errors, interrupted, failing, last_ended)
SELECT c.station, c.campaign_uid, c.channel, d.model, count(*),
    count(*) FILTER (WHERE c.status <> 'interrupted'),
    count(*) FILTER (WHERE c.status IN ('ok', 'dead')),
    count(*) FILTER (WHERE c.status = 'dead'),
    count(*) FILTER (WHERE c.status = 'error'),
    count(*) FILTER (WHERE c.status = 'interrupted'),
    count(*) FILTER (WHERE c.failures > 0), max(c.ended_at)
FROM {cycles} c JOIN fleet.drive d USING (station, campaign_uid, channel)
GROUP BY 1, 2, 3, 4
ON CONFLICT (station, campaign_uid, channel) DO UPDATE SET
    rows = t.rows + excluded.rows, cycles = t.cycles + excluded.cycles,
    cuts = t.cuts + excluded.cuts, dead = t.dead + excluded.dead,
    rig_errors = t.rig_errors + excluded.rig_errors,
    interrupted = t.interrupted + excluded.interrupted, failing = t.failing + excluded.failing,
    last_ended = greatest(t.last_ended, excluded.last_ended)
"""
_DRIVE_FAILING = """
INSERT INTO fleet.drive_failing AS t (station, campaign_uid, channel, model, classes, cuts)
SELECT c.station, c.campaign_uid, c.channel, d.model, c.failure_classes, count(*)
FROM {cycles} c JOIN fleet.drive d USING (station, campaign_uid, channel)
WHERE c.failure_classes IS NOT NULL AND c.status IN ('ok', 'dead')
GROUP BY 1, 2, 3, 4, 5
ON CONFLICT (station, campaign_uid, channel, classes) DO UPDATE SET cuts = t.cuts + excluded.cuts
"""
_DRIVE_CLASS = """
INSERT INTO fleet.drive_class AS t (station, campaign_uid, channel, model, class, failure,
    findings, blocks)
SELECT c.station, c.campaign_uid, c.channel, d.model, s.class, s.failure, sum(s.n), sum(s.blocks)
FROM {totals} s JOIN {cycles} c USING (station, campaign_uid, channel, seq)
JOIN fleet.drive d USING (station, campaign_uid, channel)
GROUP BY 1, 2, 3, 4, 5, 6
ON CONFLICT (station, campaign_uid, channel, class, failure) DO UPDATE SET
    findings = t.findings + excluded.findings, blocks = t.blocks + excluded.blocks
"""


def _sql(template: str, cycles: str, totals: str = "stage_cycle_total") -> sql.SQL:
    return sql.SQL(template.format(day=DAY, cycles=cycles, totals=totals))  # (our own text)


def prepare(cur: psycopg.Cursor[Row]) -> None:
    """The temporary tables of a ship (made once per session, emptied at each commit)."""
    for statement in STAGING:
        cur.execute(sql.SQL(statement))  # (constant text)


def insert_cycles(cur: psycopg.Cursor[Row], columns: Sequence[str]) -> None:
    """The staged cycles (`stage_cycle`, filled by the caller) that the central database does
    not hold yet, inserted, and their keys and counts kept in `new_cycle` for `add_new`."""
    names = sql.SQL(", ").join(sql.Identifier(c) for c in ("station", *columns))
    kept = sql.SQL(", ").join(sql.Identifier(c) for c in NEW_CYCLE_COLUMNS)
    cur.execute(
        sql.SQL(
            "WITH added AS (INSERT INTO fleet.cycle ({}) SELECT {} FROM stage_cycle"
            " ON CONFLICT DO NOTHING RETURNING {}) INSERT INTO new_cycle ({}) SELECT {} FROM added"
        ).format(names, names, kept, kept, kept)
    )


def add_new(
    cur: psycopg.Cursor[Row],
    station: str,
    totals: Sequence[Sequence[Any]],
    lost: Sequence[Sequence[Any]],
) -> None:
    """Add the new cycles (`new_cycle`) to the summaries, with the station's per-cycle shares:
    `totals` (campaign_uid, channel, seq, class, failure, findings, blocks) and `lost`
    (campaign_uid, channel, seq, since, ms, lost writes); shares of cycles that were not new
    are staged and dropped."""
    _stage(cur, "stage_cycle_total", station, totals)
    _stage(cur, "stage_cycle_lost", station, lost)
    cur.execute(_sql(_DAY_CYCLES, "new_cycle"))
    cur.execute(_sql(_DAY_CLASS, "new_cycle"))
    for drive_totals in (_DRIVE_CYCLES, _DRIVE_FAILING, _DRIVE_CLASS):
        cur.execute(_sql(drive_totals, "new_cycle"))
    if lost:
        cur.execute(_sql(_DAY_LOST, "new_cycle"))


def _stage(
    cur: psycopg.Cursor[Row], table: str, station: str, rows: Sequence[Sequence[Any]]
) -> None:
    if not rows:
        return
    with cur.copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(table))) as copy:
        for row in rows:
            copy.write_row((station, *row))


def rebuild(cur: psycopg.Cursor[Row]) -> None:
    """Every summary made again from the cycle and finding rows: the day tables, then the
    per-drive totals."""
    rebuild_days(cur)
    rebuild_drives(cur)


def rebuild_drives(cur: psycopg.Cursor[Row]) -> None:
    """The per-drive totals made again (the v5 migration's backfill): the counts from the cycle
    rows, the findings per class from `day_class` (the same sums, a row per drive and day)."""
    for table in ("drive_cycles", "drive_class", "drive_failing"):
        cur.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier("fleet", table)))
    cur.execute(_sql(_DRIVE_CYCLES, "fleet.cycle"))
    cur.execute(_sql(_DRIVE_FAILING, "fleet.cycle"))
    cur.execute(
        "INSERT INTO fleet.drive_class (station, campaign_uid, channel, model, class, failure,"
        " findings, blocks) SELECT station, campaign_uid, channel, model, class, failure,"
        " sum(findings), sum(blocks) FROM fleet.day_class WHERE findings > 0"
        " GROUP BY 1, 2, 3, 4, 5, 6"
    )
    cur.execute("ANALYZE fleet.drive_cycles, fleet.drive_class, fleet.drive_failing")


def rebuild_days(cur: psycopg.Cursor[Row]) -> None:
    """Every day summary made again from the cycle and finding rows (inside the caller's
    transaction, as the database owner): the cycles' classes where a cycle has none (shipped by
    an older rig), the counts in SQL, the lost-after times rounded by the station's own rounding
    (rig.store.lost_after_ms) in one pass over the lost durable writes."""
    prepare(cur)
    for table in ("day_cycles", "day_class", "day_lost_after"):
        cur.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier("fleet", table)))
    order = list(failures.names())
    cur.execute(
        "UPDATE fleet.cycle c SET failure_classes = x.classes FROM ("
        " SELECT station, campaign_uid, channel, seq, string_agg(class, ','"
        "  ORDER BY coalesce(array_position(%s::text[], class), 1000), class) AS classes"
        " FROM (SELECT DISTINCT station, campaign_uid, channel, seq, class FROM fleet.finding"
        "  WHERE failure = 1) f GROUP BY 1, 2, 3, 4) x"
        " WHERE c.failure_classes IS NULL AND (c.station, c.campaign_uid, c.channel, c.seq)"
        " = (x.station, x.campaign_uid, x.channel, x.seq)",
        (order,),
    )
    cur.execute(
        "INSERT INTO stage_cycle_total SELECT station, campaign_uid, channel, seq, class,"
        " failure, count(*), sum(lba_count) FROM fleet.finding GROUP BY 1, 2, 3, 4, 5, 6"
    )
    cur.execute(_sql(_DAY_CYCLES, "fleet.cycle"))
    cur.execute(_sql(_DAY_CLASS, "fleet.cycle"))
    cur.execute("TRUNCATE stage_cycle_total")
    _rebuild_lost(cur)
    # the tables were made again whole: the planner's statistics of them are stale (a model's
    # year then planned as a scan of every model's rows)
    cur.execute("ANALYZE fleet.day_cycles, fleet.day_class, fleet.day_lost_after")


def _rebuild_lost(cur: psycopg.Cursor[Row]) -> None:
    """The lost-after counts per drive and day, from each lost durable write's detail: the
    distinct times with their counts, fetched a chunk at a time, each rounded once by the
    station's rounding."""

    def number(key: str) -> str:  # the detail's field where it is a JSON number, else NULL
        return (
            f"CASE WHEN jsonb_typeof(detail::jsonb -> %({key})s) = 'number'"
            f" THEN (detail::jsonb ->> %({key})s)::double precision END"
        )

    query = (
        f"SELECT c.station, c.campaign_uid, c.channel, {DAY} AS day, a.since, a.ns, count(*)"
        f" FROM (SELECT station, campaign_uid, channel, seq, {number('ack')} AS ack,"
        f" {number('flush')} AS flush FROM fleet.finding"
        " WHERE class = %(cls)s AND failure = 1 AND detail LIKE '{%%') f"
        " JOIN fleet.cycle c USING (station, campaign_uid, channel, seq)"
        " CROSS JOIN LATERAL (VALUES ('ack', f.ack), ('flush', f.flush)) a(since, ns)"
        " WHERE a.ns IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6"
    )
    args = {"ack": "ack_to_cut_ns", "flush": "flush_to_cut_ns", "cls": failures.LOST_DURABLE}
    counts: Counter[tuple[Any, ...]] = Counter()
    with cur.connection.cursor(name="rebuild_lost", row_factory=tuple_row) as rows:
        rows.execute(query, args)
        while chunk := rows.fetchmany(1 << 14):
            for station, uid, channel, day, since, ns, n in chunk:
                ms = lost_after_ms(int(ns) if float(ns).is_integer() else ns)
                if ms is not None:
                    counts[station, uid, channel, day, since, ms] += n
    if not counts:
        return
    cur.execute(
        "CREATE TEMP TABLE stage_day_lost (station text, campaign_uid bigint, channel integer,"
        " day date, since text, ms double precision, n bigint) ON COMMIT DROP"
    )
    with cur.copy("COPY stage_day_lost FROM STDIN") as copy:
        for key, n in counts.items():
            copy.write_row((*key, n))
    cur.execute(
        "INSERT INTO fleet.day_lost_after (model, day, station, campaign_uid, channel, since,"
        " ms, n) SELECT d.model, l.day, l.station, l.campaign_uid, l.channel, l.since, l.ms, l.n"
        " FROM stage_day_lost l JOIN fleet.drive d USING (station, campaign_uid, channel)"
    )
