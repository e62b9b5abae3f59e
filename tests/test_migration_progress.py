"""The v11 migration's backfill says how far it is (rig/store/progress.py), and a migration killed
half-way leaves the older store readable and migrates at the next open (issue 27)."""

from __future__ import annotations

import io
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from rig.store import SCHEMA_VERSION, Store, StoreReader
from rig.store.progress import Progress
from tests.older_stores import TO_V10

REPO = Path(__file__).resolve().parents[1]
PERCENT = re.compile(r"^store: schema v11 backfill: +(\d+) % \(([\d,]+) of ([\d,]+) findings")


def _older_store(path: Path, cycles: int, findings_each: int) -> int:
    """A v10 store (before the summaries) with `cycles` cycles over two drives, each with
    `findings_each` findings (made by SQL: record_cycle would take minutes); their number."""
    store = Store(str(path))
    campaign = store.new_campaign("c", "toml", 1, "simulated")
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    for ch in range(2):
        store.add_drive(campaign, ch, dict(ident, serial=f"s{ch}"), 1 << 30, 4096, (0, 9))
    store.close()
    db = sqlite3.connect(path)
    db.executescript(
        f"""
        WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < {cycles})
        INSERT INTO cycle (id, drive_id, seq, status, cut_delay_ns, failures, started_at,
            ended_at) SELECT i, 1 + i % 2, i, 'ok', 5, {findings_each}, 0, 0 FROM k;
        WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k
            WHERE i < {cycles * findings_each - 1})
        INSERT INTO finding (cycle_id, class, failure, lba_first, lba_count, expected_gen,
            observed_gen, expected_op, observed_op, detail)
            SELECT 1 + i / {findings_each}, 'lost_durable_write', 1, i, 1, 2, 1, 0, 0,
            '{{"ack_to_cut_ns": ' || (i % 977) * 1000 || '}}' FROM k;
        """
        + TO_V10
    )
    db.close()
    return cycles * findings_each


def _open_in_child(path: Path, stall_after_first_line: bool) -> subprocess.Popen[str]:
    """`Store(path)` in a child, stderr a pipe (not a terminal). `stall_after_first_line`: the
    child's stderr stops it after the first progress line, so it is surely mid-backfill, inside
    the migration's transaction, when it is killed."""
    stall = (
        "import time\n"
        "class Stall:\n"
        "    def __init__(self, s): self.s = s\n"
        "    def isatty(self): return False\n"
        "    def flush(self): self.s.flush()\n"
        "    def write(self, t):\n"
        "        self.s.write(t); self.s.flush()\n"
        "        if '%' in t: time.sleep(300)\n"
        "sys.stderr = Stall(sys.stderr)\n"
    )
    code = (
        "import sys\n"
        + (stall if stall_after_first_line else "")
        + "from rig.store import Store\nStore(sys.argv[1]).close()\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _version(path: Path) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def test_the_backfill_prints_a_line_at_each_tenth_off_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    total = _older_store(path, 400, 500)  # 200,000 findings: 13 chunks of the pass
    child = _open_in_child(path, stall_after_first_line=False)
    _, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    lines = [m for m in map(PERCENT.match, err.splitlines()) if m]
    percents = [int(m[1]) for m in lines]
    assert 9 <= len(lines) <= 10, err
    assert percents == sorted(set(percents)) and percents[-1] == 100
    assert all(int(m[3].replace(",", "")) == total for m in lines)
    done = [int(m[2].replace(",", "")) for m in lines]
    assert done == sorted(done) and done[-1] == total
    assert all(" ETA " in line and "/s" in line for line in err.splitlines() if PERCENT.match(line))
    assert _version(path) == SCHEMA_VERSION


def test_a_killed_migration_leaves_the_older_store_readable_and_the_next_open_migrates(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    total = _older_store(path, 400, 500)
    child = _open_in_child(path, stall_after_first_line=True)
    try:
        assert child.stderr is not None
        for line in child.stderr:  # until it is mid-backfill
            if PERCENT.match(line):
                break
        else:
            raise AssertionError("no progress line before the child ended")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert Path(f"{path}-journal").exists() or Path(f"{path}-wal").exists()  # left mid-way
    reader = StoreReader(str(path))  # the reader of older stores: still v10, whole
    try:
        assert not reader.has_summaries
        assert sum(r["n"] for r in reader.finding_totals()) == total
    finally:
        reader.close()
    assert _version(path) == 10
    Store(str(path)).close()  # the next open migrates it
    assert _version(path) == SCHEMA_VERSION
    reader = StoreReader(str(path))
    try:
        assert reader.has_summaries
        assert sum(r["n"] for r in reader.finding_totals()) == total
    finally:
        reader.close()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_one_line_is_rewritten_with_rate_and_eta() -> None:
    now = [100.0]
    out = _Terminal()
    meter = Progress("pass", 1000, "rows", stream=out, clock=lambda: now[0])
    now[0] = 100.2
    meter.update(100)  # under half a second since the last: not shown
    now[0] = 102.0
    meter.update(250)  # 125 rows/s, 750 left: 6 s
    meter.finish()
    shown = out.getvalue().split("\r")[1:]
    assert shown[0] == "pass:  25 % (250 of 1,000 rows, 125/s, 0:00:02 elapsed, ETA 0:00:06)\x1b[K"
    assert shown[1].startswith("pass: 100 % (1,000 of 1,000 rows") and shown[1].endswith("\n")
