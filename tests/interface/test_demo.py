"""`rig demo --in-process` end to end through the CLI: summary, SQLite store, HTML report; status
and report. (The default demo on the full-system twin is tested in tests/sim.)"""

from __future__ import annotations

import re
import sqlite3
import tomllib
from pathlib import Path

from tests.cli_runner import rig


def test_demo_runs_three_drives_and_reports_what_each_did(tmp_path: Path) -> None:
    result = rig(
        "demo",
        "--in-process",
        "--cycles",
        "50",
        "--out",
        str(tmp_path / "out"),
        "--quiet",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # 50 failure-free cuts do not show p < 1e-3 at 95 %: the end table claims no more than the
    # report does (its per-drive verdict), and says what is still needed
    table = [line for line in out.splitlines() if "allowed losses of unflushed writes" in line]
    plp = next(line for line in table if "RIGSIM Enterprise PLP" in line)
    assert "NOT YET DEMONSTRATED" in plp and "PASS" not in plp
    assert "2945 more failure-free cuts for p < 0.001" in plp  # 2995 needed in all, 50 done
    lying = next(line for line in table if "RIGSIM Lying Flush" in line)
    assert "FAIL: lost_durable_write" in lying
    assert "lost_durable_write" in out and "shorn_write" in out
    report = tmp_path / "out" / "report.html"
    assert out.strip().splitlines()[-1] == f"report: {report}"  # the demo ends with the path
    assert (tmp_path / "out" / "report.json").is_file()

    # the store is one file after the demo (its writer left WAL, the report read it read-only)
    assert not [p.name for p in (tmp_path / "out").glob("demo.sqlite-*")]

    db = sqlite3.connect(tmp_path / "out" / "demo.sqlite")
    # the stored campaign is the one that ran (--cycles, --in-process), not the file's default
    stored = tomllib.loads(db.execute("SELECT config FROM campaign").fetchone()[0])
    assert stored["campaign"]["cycles"] == 50 and stored["station"]["twin"] == "in-process"
    per_drive = dict(
        db.execute(
            "SELECT d.profile, COUNT(DISTINCT c.id) FROM drive d JOIN cycle c ON c.drive_id = d.id"
            " GROUP BY d.profile"
        )
    )
    assert per_drive == {"plp": 50, "lying-flush": 50, "torn": 50}
    failures = dict(
        db.execute(
            "SELECT d.profile || ':' || f.class, COUNT(*) FROM finding f"
            " JOIN cycle c ON c.id = f.cycle_id JOIN drive d ON d.id = c.drive_id"
            " WHERE f.failure = 1 GROUP BY d.profile, f.class"
        )
    )
    assert not any(key.startswith("plp:") for key in failures)
    assert failures.get("lying-flush:lost_durable_write", 0) > 0
    assert failures.get("torn:shorn_write", 0) > 0
    rows = db.execute(
        "SELECT c.seq, f.lba_first, f.lba_count, f.expected_gen, f.observed_gen"
        " FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " WHERE f.class = 'lost_durable_write'"
    ).fetchall()
    assert all(seq >= 1 and count >= 1 and exp > obs for seq, _, count, exp, obs in rows)

    page = report.read_text()
    for name in ("RIGSIM Enterprise PLP", "RIGSIM Lying Flush", "RIGSIM Torn Writer", "<svg"):
        assert name in page

    status = rig("status", str(tmp_path / "out" / "demo.sqlite"), cwd=tmp_path)
    assert status.returncode == 1 and "FAIL" in status.stdout  # a drive failed: exit 1
    # the same per-drive verdict as the end table and the report
    plp_status = next(line for line in status.stdout.splitlines() if "Enterprise PLP" in line)
    assert "NOT YET DEMONSTRATED" in plp_status and "PASS" not in plp_status
    again = rig(
        "report", str(tmp_path / "out" / "demo.sqlite"), "--out", str(tmp_path / "r"), cwd=tmp_path
    )
    assert again.returncode == 0 and again.stdout.strip() == str(tmp_path / "r" / "report.html")
    regenerated = (tmp_path / "r" / "report.html").read_text()
    assert _without_generated_line(regenerated) == _without_generated_line(page)


def _without_generated_line(page: str) -> str:
    """The page without when it was made: its "Generated" line and the certificates' stamp."""
    page = re.sub(r"report generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "report generated", page)
    return "\n".join(line for line in page.splitlines() if "Generated " not in line)


def test_status_of_a_missing_store_is_one_line(tmp_path: Path) -> None:
    result = rig("status", "nothing.sqlite", cwd=tmp_path)
    assert (
        result.returncode == 2
        and result.stderr.strip() == "rig: error: nothing.sqlite: no such store"
    )
