"""The exposure of the cuts of a store older than it (the migration that adds `cycle.exposed`):
recomputed from each cut's stored ledger by the checker's own rules (rig/check/exposure.py),
where the store keeps what they need; NULL (unknown) where it does not: a cut without a ledger,
or one whose check left blocks unread (where is not kept per cycle)."""

from __future__ import annotations

import sqlite3

from rig.store.progress import StoredProgress

# numpy and the checker's rules are imported where a cut is made again from its ledger: `rig
# status` opens a store through this module and imports neither (docs/decisions.md, "A command
# imports only what it runs")

CUTS = (
    "SELECT c.id, c.drive_id, c.seq, c.status, c.cut_ns, c.cut_error_ns, c.blocks_checked,"
    " c.blocks_unchecked, d.block_size, l.writes FROM cycle c JOIN drive d ON d.id = c.drive_id"
    " LEFT JOIN ledger l ON l.cycle_id = c.id WHERE c.status IN ('ok', 'dead') AND c.id > ?"
    " ORDER BY c.id LIMIT ?"
)
CHUNK = 1 << 10


def of_row(
    status: str,
    cut_ns: int | None,
    cut_error_ns: int | None,
    checked: int,
    unchecked: int,
    block_size: int,
    ledger: bytes | None,
    health_compared: bool,
) -> frozenset[str] | None:
    import numpy as np

    from rig.check import exposure
    from rig.io.ledger import CycleLog

    if status == "dead":
        return exposure.of_dead_cut()
    if ledger is None or cut_ns is None or unchecked:
        return None
    log = CycleLog.from_bytes(ledger)
    durability = log.durability(cut_ns, cut_error_ns or 0)
    nblocks = log.column("nblocks")
    within = np.arange(int(nblocks.sum())) - np.repeat(log.column("gen_offset"), nblocks)
    written = len(np.unique(np.repeat(log.column("first_lba"), nblocks) + within))
    reading = exposure.Reading(checked, max(0, checked - written))
    return exposure.exposed(log, durability, reading, block_size, health_compared)


def rebuild(db: sqlite3.Connection, title: str | None = None) -> None:
    """Every cut's `exposed` made again from its ledger (inside the caller's transaction)."""
    from rig.check import exposure

    top = db.execute("SELECT IFNULL(MAX(id), 0) FROM cycle").fetchone()[0]
    meter = StoredProgress(title, top, "cycles") if title else None
    healthy = {(d, s) for d, s in db.execute("SELECT drive_id, after_seq FROM health")}
    first: dict[int, int] = {}
    for d, s in healthy:
        first[d] = min(s, first.get(d, s))
    last = 0
    while True:
        rows = db.execute(CUTS, (last, CHUNK)).fetchall()
        if not rows:
            break
        updates = []
        for cid, drive, seq, status, cut_ns, err, checked, unchecked, block, ledger in rows:
            compared = (drive, seq) in healthy and first[drive] < seq  # read before and after
            found = of_row(status, cut_ns, err, checked, unchecked, block, ledger, compared)
            updates.append((exposure.to_text(found), cid))
        db.executemany("UPDATE cycle SET exposed = ? WHERE id = ?", updates)
        last = rows[-1][0]
        if meter:
            meter.update(last)
    if meter:
        meter.finish()
    db.execute("DELETE FROM exposure_total")
    sums = db.execute(
        "SELECT drive_id, exposed, failure_classes, COUNT(*) FROM cycle"
        " WHERE status IN ('ok', 'dead') AND exposed IS NOT NULL"
        " GROUP BY drive_id, exposed, failure_classes"
    ).fetchall()
    for drive_id, exposed, classes, n in sums:
        add(db, drive_id, exposed, classes, n)


def add(db: sqlite3.Connection, drive_id: int, exposed: str, classes: str | None, n: int) -> None:
    """`n` cuts of one exposure and failure classes added to the drive's `exposure_total`
    (inside the caller's transaction)."""
    failed = set((classes or "").split(","))
    db.executemany(
        "INSERT INTO exposure_total (drive_id, class, exposed, failing) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (drive_id, class) DO UPDATE SET exposed = exposed + excluded.exposed,"
        " failing = failing + excluded.failing",
        [(drive_id, c, n, n * (c in failed)) for c in exposed.split(",") if c],
    )
