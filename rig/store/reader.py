"""A read-only reader of a store of any schema version up to this rig's, for reports: it never
migrates or writes, and looks tables and columns up before use, so a store from another station or
an older rig still reads (rig.store.Store refuses a store that is not at this rig's version)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator

from rig.check.failures import LOST_DURABLE
from rig.errors import UserError
from rig.store import creation
from rig.store.schema import SCHEMA_VERSION
from rig.store.totals import DETAIL_NUMBER, lost_after_ms

Rows = Iterator[sqlite3.Row]


class StoreReader:
    """One store file opened read-only; rows are `sqlite3.Row` (by column name)."""

    def __init__(self, path: str) -> None:
        self.db = creation.connect_read_only(path)  # (refuses a missing file by its cause)
        try:
            self.db.row_factory = sqlite3.Row
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            tables = self.tables()
            # v11 keeps summaries of the findings (rig/store/totals.py)
            self.has_summaries = {"finding_total", "lost_after"} <= tables
        except sqlite3.DatabaseError as error:
            self.db.close()
            raise UserError(f"{path}: not a rig store ({error})") from error
        if version > SCHEMA_VERSION:
            self.db.close()
            raise UserError(f"{path}: store has schema v{version}, newer than this rig")
        if not {"campaign", "drive", "cycle"} <= tables:
            self.db.close()
            raise UserError(f"{path}: not a rig store (no campaign, drive and cycle tables)")

    def close(self) -> None:
        self.db.close()

    def tables(self) -> set[str]:
        return {
            r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }

    def columns(self, table: str) -> set[str]:
        return {r[1] for r in self.db.execute(f'PRAGMA table_info("{table}")')}

    def timing_of_campaign(self, campaign_id: int) -> dict[str, float | int | None] | None:
        """How the campaign's cuts fell against their plan (store v14; None before it): cuts
        with a realized delay, those outside the requested range, and the lateness (realized
        minus planned, ms) at p50 / p99 / max, each taken by SQLite's own sort (one value read
        per quantile: bounded memory at any size)."""
        if "realized_delay_ns" not in self.columns("cycle"):
            return None
        where = (
            " FROM cycle c JOIN drive d ON d.id = c.drive_id"
            " WHERE d.campaign_id = ? AND c.realized_delay_ns IS NOT NULL"
        )
        n, outside = self.db.execute(
            f"SELECT COUNT(*), IFNULL(SUM(c.delay_in_range = 0), 0){where}", (campaign_id,)
        ).fetchone()
        late: dict[str, float | int | None] = {"cuts": int(n), "outside_range": int(outside)}
        for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("max_ms", 1.0)):
            row = self.db.execute(
                f"SELECT (c.realized_delay_ns - c.cut_delay_ns) / 1e6 AS late{where}"
                " ORDER BY late LIMIT 1 OFFSET ?",
                (campaign_id, max(0, min(int(n) - 1, int(q * int(n))))),
            ).fetchone()
            late[name] = None if row is None else round(float(row[0]), 3)
        return late

    def campaigns(self) -> Rows:
        return self.db.execute("SELECT * FROM campaign ORDER BY id")

    def drives(self) -> Rows:
        return self.db.execute("SELECT * FROM drive ORDER BY campaign_id, channel")

    def finding_totals(self) -> Rows:
        """(drive_id, class, failure, n, blocks) of every drive's findings, in one pass."""
        if self.has_summaries:
            return self.db.execute(
                "SELECT drive_id, class, failure, n, blocks FROM finding_total ORDER BY 1, 2, 3"
            )
        return self.db.execute(
            "SELECT c.drive_id, f.class, f.failure, COUNT(*) AS n, SUM(f.lba_count) AS blocks"
            " FROM finding f JOIN cycle c ON c.id = f.cycle_id"
            " GROUP BY c.drive_id, f.class, f.failure"
        )

    def failure_examples(self, drive_id: int, limit: int) -> list[sqlite3.Row]:
        """The drive's first `limit` failure findings, with their cycle's seq as `cycle`."""
        if not self.has_summaries:
            return self.db.execute(
                "SELECT c.seq AS cycle, f.* FROM finding f JOIN cycle c ON c.id = f.cycle_id"
                " WHERE c.drive_id = ? AND f.failure = 1 ORDER BY f.id LIMIT ?",
                (drive_id, limit),
            ).fetchall()
        # the cycles with a failure, in the order they were recorded (their findings' ids
        # follow it: record_cycle writes a cycle and its findings in one transaction), read
        # until there are enough: not a scan of every finding for a drive with few or none
        found: list[sqlite3.Row] = []
        cycles = self.db.execute(
            "SELECT id, seq FROM cycle WHERE drive_id = ? AND failure_classes IS NOT NULL"
            " ORDER BY id",
            (drive_id,),
        )
        for cycle_id, seq in cycles:
            if len(found) >= limit:
                break
            found += self.db.execute(
                "SELECT ? AS cycle, f.* FROM finding f WHERE f.cycle_id = ? AND f.failure = 1"
                " ORDER BY f.id LIMIT ?",
                (seq, cycle_id, limit - len(found)),
            )
        return found

    def lost_after_counts(self) -> list[tuple[int, str, float, int]]:
        """(drive_id, since, ms, n) of every drive's lost durable writes: how many had each
        time since their ack (`since` 'ack') and since their flush ('flush') at the cut, in ms
        rounded as `totals.lost_after_ms` rounds (the numbers ack_to_cut_ns and
        flush_to_cut_ns, >= 0, of their findings' detail; JSON true/false are not numbers)."""
        if self.has_summaries:
            return [tuple(r) for r in self.db.execute("SELECT * FROM lost_after ORDER BY 1, 2, 3")]
        ns = DETAIL_NUMBER
        counts: Counter[tuple[int, str, float]] = Counter()
        for drive_id, ack, flush, n in self.db.execute(
            f"SELECT c.drive_id, {ns.format('ack_to_cut_ns')} AS ack,"
            f" {ns.format('flush_to_cut_ns')} AS flush, COUNT(*) AS n"
            " FROM finding f JOIN cycle c ON c.id = f.cycle_id"
            " WHERE f.class = ? AND f.failure = 1 GROUP BY c.drive_id, ack, flush",
            (LOST_DURABLE,),
        ):
            for since, value in (("ack", ack), ("flush", flush)):
                ms = lost_after_ms(value)
                if ms is not None:
                    counts[drive_id, since, ms] += n
        return [(*key, n) for key, n in sorted(counts.items())]

    def findings_of_class(self, drive_id: int, cls: str) -> Rows:
        """(seq, detail) of the drive's findings of class `cls`, in cycle order."""
        if self.has_summaries:
            kinds = {
                r[0]
                for r in self.db.execute(
                    "SELECT failure FROM finding_total WHERE drive_id = ? AND class = ?",
                    (drive_id, cls),
                )
            }
            if kinds == {1}:  # only in the cycles whose row names the class
                return self.db.execute(
                    "SELECT c.seq, f.detail FROM cycle c CROSS JOIN finding f"
                    " ON f.cycle_id = c.id WHERE c.drive_id = ?"
                    " AND instr(',' || c.failure_classes || ',', ',' || ? || ',') > 0"
                    " AND f.class = ? ORDER BY c.seq, f.id",
                    (drive_id, cls, cls),
                )
            if not kinds:
                return iter(())
        return self.db.execute(
            "SELECT c.seq, f.detail FROM finding f JOIN cycle c ON c.id = f.cycle_id"
            " WHERE c.drive_id = ? AND f.class = ? ORDER BY c.seq, f.id",
            (drive_id, cls),
        )

    def cut_columns(self, drive_id: int, has_finding: bool) -> sqlite3.Cursor:
        """The drive's cycles in order as the report's per-cut figures (reports/load/cuts.py), ms
        computed here as the report computed them (ns / 1e6; NULL where absent): id, seq, status,
        cut_delay_ms, return_ms, gone_ms, ack_to_cut_ms, flush_to_cut_ms, started_at,
        bytes_written, blocks_checked, full_scan, blocks_unchecked, cut_ns, `no_delays`: 1 where
        the row lacks the v8 delay columns (an older rig's cycle: see `ledger_blob`), and
        `classes`: its failure findings' classes, comma-separated (NULL: none; v11 keeps them in
        the row, an older store's are read from its findings), and `exposed`: the classes the cut
        was a trial of (NULL: not known), cut_error_ns, and where the cut fell (v14; NULL in an
        older store, or without an edge): realized_delay_ms, delay_error_ms."""
        cols = self.columns("cycle")
        has_delays = "last_ack_to_cut_ns" in cols
        delays = (
            "CASE WHEN c.last_ack_to_cut_ns >= 0 THEN c.last_ack_to_cut_ns / 1e6 END,"
            " CASE WHEN c.last_ack_to_cut_ns IS NOT NULL AND c.last_flush_to_cut_ns >= 0"
            " THEN c.last_flush_to_cut_ns / 1e6 END"
            if has_delays
            else "NULL, NULL"
        )
        full_scan = "c.full_scan" if "full_scan" in cols else "0"
        unchecked = "c.blocks_unchecked" if "blocks_unchecked" in cols else "0"
        no_delays = "c.last_ack_to_cut_ns IS NULL" if has_delays else "1"
        classes = (
            "c.failure_classes"
            if "failure_classes" in cols
            else "(SELECT group_concat(DISTINCT f.class) FROM finding f"
            " WHERE f.cycle_id = c.id AND f.failure = 1)"
            if has_finding
            else "NULL"
        )
        exposed = "c.exposed" if "exposed" in cols else "NULL"  # (NULL: exposure not known)
        timing = (
            "c.realized_delay_ns / 1e6, c.delay_error_ns / 1e6"
            if "realized_delay_ns" in cols
            else "NULL, NULL"
        )
        return self.db.execute(
            "SELECT c.id, c.seq, c.status, c.cut_delay_ns / 1e6,"
            " CASE WHEN c.back_ns >= c.cut_ns THEN (c.back_ns - c.cut_ns) / 1e6 END,"
            f" CASE WHEN c.gone_ns >= c.cut_ns THEN (c.gone_ns - c.cut_ns) / 1e6 END, {delays},"
            f" c.started_at, c.bytes_written, c.blocks_checked, {full_scan}, {unchecked},"
            f" c.cut_ns, {no_delays}, {classes}, {exposed}, c.cut_error_ns, {timing} FROM cycle c"
            " WHERE c.drive_id = ?"
            " ORDER BY c.seq",
            (drive_id,),
        )

    def ledger_blob(self, cycle_id: int) -> bytes | None:
        """A cycle's write log (table ledger), None where it has none."""
        row = self.db.execute("SELECT writes FROM ledger WHERE cycle_id = ?", (cycle_id,))
        found = row.fetchone()
        return None if found is None else bytes(found[0])

    def health_of(self, drive_id: int) -> Rows:
        return self.db.execute(
            "SELECT after_seq, source, fields FROM health WHERE drive_id = ? ORDER BY after_seq",
            (drive_id,),
        )

    def rail_sense(self) -> Rows:
        """Every rail-sense capture with its cycle's drive_id and seq."""
        return self.db.execute(
            "SELECT c.drive_id, c.seq, r.* FROM rail_sense r JOIN cycle c ON c.id = r.cycle_id"
            " ORDER BY c.drive_id, c.seq"
        )

    def cut_shapes(self) -> Rows:
        """Every shaped cut's drawn shape (`cut_shape` event: kind, depth, unit, duration_ms,
        slew_v_per_ms as JSON) with its cycle's drive_id and seq."""
        return self.db.execute(
            "SELECT c.drive_id, c.seq, e.detail FROM event e JOIN cycle c ON c.id = e.cycle_id"
            " WHERE e.kind = 'cut_shape' ORDER BY c.drive_id, c.seq"
        )

    def rows_of(self, table: str) -> Rows:
        """Every row of `table` (one found by `tables`), in insertion order."""
        return self.db.execute(f'SELECT * FROM "{table}" ORDER BY rowid')
