"""`rig status` reads per-drive sums made by SQLite: its output equals the full scan of
every cycle row it replaced, and the rows it takes into Python do not grow with the cycles."""

from __future__ import annotations

import sqlite3
import statistics
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reports.load import summary
from rig.interface import cli_json
from rig.store import CycleRow, Store

NS = st.one_of(st.none(), st.just(0), st.integers(1, 10**12))
CYCLE = st.fixed_dictionaries(
    {
        "drive": st.integers(0, 3),
        "status": st.sampled_from(["ok", "error", "dead", "interrupted"]),
        "cut_ns": NS,
        "back_ns": NS,
        "failures": st.integers(0, 3),
        "writes": st.integers(0, 10**6),
        "bytes_written": st.integers(0, 10**12),
        "blocks_unchecked": st.integers(0, 50),
        "nondurable_writes": st.integers(0, 9),
        "nondurable_survived": st.integers(0, 9),
    }
)


def _build(path: Path, cycles: list[dict[str, Any]], dead: int) -> None:
    """Four drives over two campaigns (drive 3 of the second), one of them dead; drives may
    have no cycle at all."""
    store = Store(str(path))
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    first = store.new_campaign("a", "toml", 1, "simulated")
    second = store.new_campaign("b", "toml", 2, "simulated")
    drives = [
        store.add_drive(
            first if i < 3 else second, i % 3, dict(ident, serial=f"s{i}"), 1 << 30, 4096, (0, 9)
        )
        for i in range(4)
    ]
    seqs = [0] * 4
    for c in cycles:
        seqs[c["drive"]] += 1
        fields = {k: v for k, v in c.items() if k != "drive"}
        row = CycleRow(drives[c["drive"]], seqs[c["drive"]], cut_delay_ns=5, started_at=0, **fields)
        store.record_cycle(row, [], [], None, None)
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE drive SET status = 'dead' WHERE id = ?", (drives[dead],))
    db.commit()
    db.close()


def _full_scan(path: Path) -> summary.CampaignReport:
    """The report as `rig status` made it before: every cycle row summed in Python."""
    store = Store(str(path))
    try:
        report = summary.load(store)
        db = sqlite3.connect(path)
        db.row_factory = sqlite3.Row
        for drive in report.drives:
            for name in ("cycles", "cycles_ok", "cycles_error", "cycles_with_failure"):
                setattr(drive, name, 0)
            for name in ("nondurable_writes", "nondurable_survived", "writes"):
                setattr(drive, name, 0)
            drive.bytes_written = drive.blocks_unchecked = 0
            drive.return_ms = []
            for c in db.execute("SELECT * FROM cycle WHERE drive_id = ?", (drive.drive_id,)):
                drive.cycles += 1
                drive.cycles_ok += c["status"] == "ok"
                drive.cycles_error += c["status"] == "error"
                drive.cycles_with_failure += c["failures"] > 0
                drive.nondurable_writes += c["nondurable_writes"]
                drive.nondurable_survived += c["nondurable_survived"]
                drive.writes += c["writes"]
                drive.bytes_written += c["bytes_written"]
                drive.blocks_unchecked += c["blocks_unchecked"]
                if c["back_ns"] and c["cut_ns"]:
                    drive.return_ms.append((c["back_ns"] - c["cut_ns"]) / 1e6)
        db.close()
        return report
    finally:
        store.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cycles=st.lists(CYCLE, max_size=40), dead=st.integers(0, 3))
def test_status_equals_the_full_scan_of_the_cycles(
    tmp_path: Path, cycles: list[dict[str, Any]], dead: int
) -> None:
    path = tmp_path / "s.sqlite"
    path.unlink(missing_ok=True)
    _build(path, cycles, dead)
    old = _full_scan(path)
    store = Store(str(path))
    new = summary.load(store)
    store.close()
    assert summary.text(new) == summary.text(old)
    assert cli_json.status("s", new, False) == cli_json.status("s", old, False)
    for n, o in zip(new.drives, old.drives, strict=True):
        assert n.median_return_ms == (statistics.median(o.return_ms) if o.return_ms else None)
        assert n.verdict == o.verdict


def test_status_takes_no_more_rows_for_more_cycles(tmp_path: Path) -> None:
    """The rows `summary.load` takes from SQLite stay the same from 24 to 400 cycles."""
    taken = []
    for n in (24, 400):  # (an even count a drive: two middle values)
        path = tmp_path / f"s{n}.sqlite"
        cycle = {"status": "ok", "cut_ns": 10, "back_ns": 10**8, "failures": 0}
        _build(path, [dict(cycle, drive=i % 4, back_ns=10**8 + i) for i in range(n)], 0)
        store = Store(str(path))
        rows = 0
        query = store.query

        def counting(sql: str, args: tuple[Any, ...] = (), query: Any = query) -> list[sqlite3.Row]:
            nonlocal rows
            found = query(sql, args)
            rows += len(found)
            return found

        store.query = counting  # type: ignore[method-assign]
        report = summary.load(store)
        store.close()
        assert sum(d.cycles for d in report.drives) == n
        taken.append(rows)
    assert taken[0] == taken[1]
