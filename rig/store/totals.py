"""The store's summaries of its findings (v11, docs/schema.md): each cycle's failure classes in
its row, and per drive the findings per class and the lost durable writes' times since their ack
and flush, as counts per value. `record_cycle` adds each cycle's share in its own transaction;
`rebuild_summaries` (the v11 migration, and the scale bench after copying rows by SQL) makes them
again from every finding row, in one pass. A report over millions of cuts reads these instead of
tens of millions of findings."""

from __future__ import annotations

import math
import sqlite3
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from rig.check import failures
from rig.store.progress import StoredProgress

# a finding's detail field `{0}` where it is a JSON number (true/false are not), else NULL
DETAIL_NUMBER = (
    "CASE WHEN json_valid(f.detail) AND json_type(f.detail, '$.{0}') IN ('integer', 'real')"
    " THEN json_extract(f.detail, '$.{0}') END"
)


def lost_after_ms(ns: object) -> float | None:
    """A lost durable write's time since its ack or flush (a number of ns >= 0 in its finding's
    detail) in ms, rounded to 3 significant digits: the one rounding of the store's and the
    fleet report's lost-after distribution (docs/decisions.md, "The store keeps summaries beside
    its rows"). None where it is no such number."""
    if not isinstance(ns, int | float) or isinstance(ns, bool) or not ns >= 0:
        return None
    ms = float(ns) / 1e6
    return float(f"{ms:.3g}") if math.isfinite(ms) else ms


def classes_text(classes: Iterable[str]) -> str | None:
    """A cycle's failure classes as `cycle.failure_classes` holds them: comma-separated in the
    class table's order (rig/check/failures.py); None where there is none."""
    present = failures.ordered(classes)
    return ",".join(present) if present else None


class CycleTotals:
    """What a set of findings adds to its drive's summaries."""

    def __init__(self) -> None:
        self.totals: Counter[tuple[str, int]] = Counter()  # (class, failure) -> findings
        self.blocks: Counter[tuple[str, int]] = Counter()
        self.lost: Counter[tuple[str, float]] = Counter()  # (since, ms) -> lost writes

    def add(self, cls: str, failure: int, blocks: int, ack: object, flush: object) -> None:
        """One finding; `ack`, `flush`: its detail's ack_to_cut_ns and flush_to_cut_ns."""
        key = (cls, failure)
        self.totals[key] += 1
        self.blocks[key] += blocks
        if failure and cls == failures.LOST_DURABLE:
            if (ms := lost_after_ms(ack)) is not None:
                self.lost["ack", ms] += 1
            if (ms := lost_after_ms(flush)) is not None:
                self.lost["flush", ms] += 1

    def add_finding(self, finding: Mapping[str, Any], failure: int) -> None:
        """A finding as `record_cycle` takes it (detail a dict)."""
        detail = finding["detail"] if isinstance(finding["detail"], dict) else {}
        self.add(
            finding["cls"],
            failure,
            finding["lba_count"],
            detail.get("ack_to_cut_ns"),
            detail.get("flush_to_cut_ns"),
        )

    def write(self, db: sqlite3.Connection, drive_id: int) -> None:
        """Add these counts to the drive's rows, inside the caller's transaction."""
        db.executemany(
            "INSERT INTO finding_total (drive_id, class, failure, n, blocks) VALUES (?,?,?,?,?)"
            " ON CONFLICT (drive_id, class, failure)"
            " DO UPDATE SET n = n + excluded.n, blocks = blocks + excluded.blocks",
            [(drive_id, c, f, n, self.blocks[c, f]) for (c, f), n in self.totals.items()],
        )
        db.executemany(
            "INSERT INTO lost_after (drive_id, since, ms, n) VALUES (?,?,?,?)"
            " ON CONFLICT (drive_id, since, ms) DO UPDATE SET n = n + excluded.n",
            [(drive_id, since, ms, n) for (since, ms), n in self.lost.items()],
        )


def rebuild(db: sqlite3.Connection, title: str | None = None) -> None:
    """Every summary made again from the finding rows, in one pass over them in cycle order
    (inside the caller's transaction): the v11 migration's backfill. With a `title`, how far the
    pass is goes to stderr (rig/store/progress.py)."""
    db.execute("DELETE FROM finding_total")
    db.execute("DELETE FROM lost_after")
    db.execute("UPDATE cycle SET failure_classes = NULL WHERE failure_classes IS NOT NULL")
    number = f"CASE WHEN f.class = ? AND f.failure = 1 THEN {DETAIL_NUMBER} END"
    rows = db.execute(
        "SELECT c.id, c.drive_id, f.class, f.failure, f.lba_count,"
        f" {number.format('ack_to_cut_ns')}, {number.format('flush_to_cut_ns')}"
        " FROM cycle c CROSS JOIN finding f ON f.cycle_id = c.id ORDER BY c.id",
        (failures.LOST_DURABLE, failures.LOST_DURABLE),
    )
    # findings are only ever inserted (record_cycle), so their ids are dense: the largest is
    # their number, without the long count of a large table
    total = db.execute("SELECT IFNULL(MAX(id), 0) FROM finding").fetchone()[0]
    meter = StoredProgress(title, total, "findings") if title else None
    # per row only dict updates (54 million rows in the scale bench): counts by (drive, class,
    # failure) and by (drive, since, ms), the rounding remembered per distinct ns value
    n: Counter[tuple[int, str, int]] = Counter()
    blocks: Counter[tuple[int, str, int]] = Counter()
    lost: Counter[tuple[int, str, float]] = Counter()
    rounded: dict[object, float | None] = {}
    # the cycles' classes are written after the pass (a row changed while its scan runs is
    # undefined in SQLite): as ids and codes into the distinct texts, 10 bytes a cycle
    ids, codes, texts = array("q"), array("h"), dict[frozenset[str], int]()
    cycle_id, cycle_classes = 0, frozenset[str]()
    done = 0
    while chunk := rows.fetchmany(1 << 14):  # (in chunks: nothing added per row for the meter)
        for cid, drive_id, cls, failure, count, ack, flush in chunk:
            if cid != cycle_id:
                if cycle_classes:
                    ids.append(cycle_id)
                    codes.append(texts.setdefault(cycle_classes, len(texts)))
                cycle_id, cycle_classes = cid, frozenset()
                if len(rounded) > 1 << 16:
                    rounded.clear()  # real drives' times are all distinct: keep it small
            key = (drive_id, cls, failure)
            n[key] += 1
            blocks[key] += count
            if failure and cls not in cycle_classes:
                cycle_classes = cycle_classes | {cls}
            for since, ns in (("ack", ack), ("flush", flush)):
                if ns is not None:
                    ms = rounded[ns] if ns in rounded else rounded.setdefault(ns, lost_after_ms(ns))
                    if ms is not None:
                        lost[drive_id, since, ms] += 1
        done += len(chunk)
        if meter:
            meter.update(done)
    if cycle_classes:
        ids.append(cycle_id)
        codes.append(texts.setdefault(cycle_classes, len(texts)))
    text_of = [classes_text(c) for c in texts]  # dicts keep insertion order: index = code
    db.executemany(
        "UPDATE cycle SET failure_classes = ? WHERE id = ?",
        ((text_of[code], cid) for cid, code in zip(ids, codes, strict=True)),
    )
    by_drive: dict[int, CycleTotals] = {}
    for (drive_id, cls, failure), found in n.items():
        totals = by_drive.setdefault(drive_id, CycleTotals())
        totals.totals[cls, failure] = found
        totals.blocks[cls, failure] = blocks[drive_id, cls, failure]
    for (drive_id, since, ms), found in lost.items():
        by_drive.setdefault(drive_id, CycleTotals()).lost[since, ms] = found
    for drive_id, totals in by_drive.items():
        totals.write(db, drive_id)
    if meter:
        meter.finish()
