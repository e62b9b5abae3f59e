"""Each drive's cycle counts and sums kept as cycles are recorded (store v12): what
`rig status` shows of a drive without a pass over its cycles. `record_cycle` adds each cycle's
share in its own transaction; the v12 migration (and `Store.rebuild_summaries`) sums every cycle
row again. One list of per-cycle expressions serves both, so the two cannot count differently."""

from __future__ import annotations

import sqlite3

from rig.store.progress import StoredProgress

# a cycle whose drive came back after the cut: both times known and non-zero
RETURNED = "IFNULL(back_ns, 0) != 0 AND IFNULL(cut_ns, 0) != 0"
# cycle_total column -> what one cycle row adds to it
SHARES: dict[str, str] = {
    "cycles": "1",
    "ok": "status = 'ok'",
    "error": "status = 'error'",
    "with_failure": "failures > 0",
    "nondurable_writes": "nondurable_writes",
    "nondurable_survived": "nondurable_survived",
    "writes": "writes",
    "bytes_written": "bytes_written",
    "blocks_unchecked": "blocks_unchecked",
    "returned": RETURNED,
}
NAMES = ", ".join(SHARES)
CHUNK = 1 << 14  # cycle ids summed per statement of the backfill (progress after each)


def add_cycle(db: sqlite3.Connection, cycle_id: int) -> None:
    """The cycle row's share added to its drive's sums, inside the caller's transaction."""
    db.execute(
        f"INSERT INTO cycle_total (drive_id, {NAMES})"
        f" SELECT drive_id, {', '.join(SHARES.values())} FROM cycle WHERE id = ?"
        " ON CONFLICT (drive_id) DO UPDATE SET"
        f" {', '.join(f'{k} = {k} + excluded.{k}' for k in SHARES)}",
        (cycle_id,),
    )


def rebuild(db: sqlite3.Connection, title: str | None = None) -> None:
    """Every drive's sums made again from the cycle rows, a range of cycle ids at a time (inside
    the caller's transaction): the v12 migration's backfill. With a `title`, how far it is goes
    to stderr (rig/store/progress.py), counted in cycle ids."""
    db.execute("DELETE FROM cycle_total")
    top = db.execute("SELECT IFNULL(MAX(id), 0) FROM cycle").fetchone()[0]
    meter = StoredProgress(title, top, "cycles") if title else None
    sums: dict[int, list[int]] = {}
    sql = (
        f"SELECT drive_id, {', '.join(f'SUM({e})' for e in SHARES.values())}"
        " FROM cycle WHERE id > ? AND id <= ? GROUP BY drive_id"
    )
    for low in range(0, top, CHUNK):
        for drive_id, *values in db.execute(sql, (low, low + CHUNK)):
            into = sums.setdefault(drive_id, [0] * len(SHARES))
            for i, v in enumerate(values):
                into[i] += v
        if meter:
            meter.update(min(top, low + CHUNK))
    db.executemany(
        f"INSERT INTO cycle_total (drive_id, {NAMES}) VALUES (?{', ?' * len(SHARES)})",
        [(drive_id, *values) for drive_id, values in sums.items()],
    )
    if meter:
        meter.finish()
