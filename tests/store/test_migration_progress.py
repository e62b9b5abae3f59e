"""The v11 and v12 migrations' backfills say how far they are (rig/store/progress.py), and a
migration killed half-way leaves the older store readable and migrates at the next open; each
version is its own transaction, so a kill in v12's keeps v11's work."""

from __future__ import annotations

import io
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rig.errors import UserError
from rig.store import SCHEMA_VERSION, Store, StoreReader, open_read_only
from rig.store.cycle_sums import NAMES, SHARES
from rig.store.progress import StoredProgress
from tests.older_stores import TO_V10, TO_V11

REPO = Path(__file__).resolve().parents[2]
PERCENT = re.compile(r"^store: schema v11 backfill: +(\d+) % \(([\d,]+) of ([\d,]+) findings")
PERCENT_V12 = re.compile(r"^store: schema v12 backfill: +(\d+) % \(([\d,]+) of ([\d,]+) cycles")


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


def _store_of_cycles(path: Path, cycles: int, downgrade: str) -> None:
    """A store with `cycles` cycles over two drives (made by SQL; some returned, some not, some
    failed, some rig errors), no findings, taken back by the `downgrade` statements."""
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
        INSERT INTO cycle (id, drive_id, seq, status, cut_delay_ns, cut_ns, back_ns, writes,
            bytes_written, failures, started_at, ended_at)
            SELECT i, 1 + i % 2, i, CASE WHEN i % 97 = 0 THEN 'error' ELSE 'ok' END, 5,
            1000, CASE WHEN i % 5 THEN 1000 + (i * 7919) % 100003 END, i % 13, i * 4096,
            i % 11 = 0, 0, 0 FROM k;
        """
        + downgrade
    )
    db.close()


def _sums_by_group_by(path: Path) -> list[tuple[int, ...]]:
    """Every drive's cycle sums, summed over its cycle rows now (what cycle_total must hold)."""
    db = sqlite3.connect(path)
    try:
        shares = ", ".join(f"SUM({e})" for e in SHARES.values())
        return db.execute(
            f"SELECT drive_id, {shares} FROM cycle GROUP BY drive_id ORDER BY drive_id"
        ).fetchall()
    finally:
        db.close()


def _cycle_totals(path: Path) -> list[tuple[int, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT drive_id, {NAMES} FROM cycle_total ORDER BY drive_id").fetchall()
    finally:
        db.close()


def _open_in_child(path: Path, stall_on: str | None) -> subprocess.Popen[str]:
    """`Store(path)` in a child, stderr a pipe (not a terminal). `stall_on`: the child's stderr
    stops it at the first progress line that holds this text, so it is surely mid-backfill,
    inside the migration's transaction, when it is killed."""
    stall = (
        "import time\n"
        "class Stall:\n"
        "    def __init__(self, s): self.s = s\n"
        "    def isatty(self): return False\n"
        "    def flush(self): self.s.flush()\n"
        "    def write(self, t):\n"
        "        self.s.write(t); self.s.flush()\n"
        f"        if '%' in t and {stall_on!r} in t: time.sleep(300)\n"
        "sys.stderr = Stall(sys.stderr)\n"
    )
    code = (
        "import sys\n"
        + (stall if stall_on is not None else "")
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
    child = _open_in_child(path, stall_on=None)
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
    child = _open_in_child(path, stall_on="schema v11")
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


def test_the_v12_backfill_prints_a_line_at_each_tenth_and_its_sums_are_the_cycles(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v11.sqlite"
    _store_of_cycles(path, 200_000, TO_V11)
    child = _open_in_child(path, stall_on=None)
    _, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    lines = [m for m in map(PERCENT_V12.match, err.splitlines()) if m]
    assert 9 <= len(lines) <= 10, err  # 13 chunks of 16,384 cycle ids
    assert [int(m[1]) for m in lines][-1] == 100
    assert all(int(m[3].replace(",", "")) == 200_000 for m in lines)
    assert _version(path) == SCHEMA_VERSION
    assert _cycle_totals(path) == _sums_by_group_by(path)


def _kill_when(child: subprocess.Popen[str], pattern: re.Pattern[str]) -> None:
    """SIGKILL the child once it has printed a line matching `pattern` (it is stalled there)."""
    try:
        assert child.stderr is not None
        for line in child.stderr:
            if pattern.match(line):
                break
        else:
            raise AssertionError("no such progress line before the child ended")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL


def test_a_migration_killed_in_v12_keeps_v11_and_the_next_open_does_only_v12(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v10.sqlite"
    _store_of_cycles(path, 200_000, TO_V10)
    expected = _sums_by_group_by(path)
    _kill_when(_open_in_child(path, stall_on="schema v12"), PERCENT_V12)
    reader = StoreReader(str(path))  # rig report reads it meanwhile, with v11's summaries
    try:
        assert reader.has_summaries
        assert "cycle_total" not in reader.tables()
    finally:
        reader.close()
    assert _version(path) == 11  # v11's transaction was committed before v12's began
    with pytest.raises(UserError, match="schema v11"):
        open_read_only(str(path))  # rig status: refused in one line, nothing written
    assert _version(path) == 11
    child = _open_in_child(path, stall_on=None)
    _, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    assert "schema v11" not in err and any(map(PERCENT_V12.match, err.splitlines())), err
    assert _version(path) == SCHEMA_VERSION
    assert _cycle_totals(path) == expected


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_one_line_is_rewritten_with_rate_and_eta() -> None:
    now = [100.0]
    out = _Terminal()
    meter = StoredProgress("pass", 1000, "rows", stream=out, clock=lambda: now[0])
    now[0] = 100.2
    meter.update(100)  # under half a second since the last: not shown
    now[0] = 102.0
    meter.update(250)  # 125 rows/s, 750 left: 6 s
    meter.finish()
    shown = out.getvalue().split("\r")[1:]
    assert shown[0] == "pass:  25 % (250 of 1,000 rows, 125/s, 0:00:02 elapsed, ETA 0:00:06)\x1b[K"
    assert shown[1].startswith("pass: 100 % (1,000 of 1,000 rows") and shown[1].endswith("\n")
