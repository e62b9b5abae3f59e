"""An endurance campaign killed with SIGKILL mid-interval resumes: interval numbers and host
bytes continue from the store, the expected state is rebuilt from the drive (no false failure),
and the board's watchdog has the power on in between."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_runner import rig
from tests.loop_station import campaign_text, loop_station, requirements

REPO = Path(__file__).resolve().parents[2]
ENDURANCE = """
[endurance]
intervals = 6
interval_s = 0.4
verify_every = 1
"""


def _intervals(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return int(con.execute("SELECT COUNT(*) FROM endurance_interval").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.skipif(bool(requirements()), reason=requirements() or "ok")
def test_endurance_killed_mid_interval_resumes(tmp_path: Path, udevd: None) -> None:
    with loop_station(tmp_path, 1) as station:
        campaign = tmp_path / "campaign.toml"
        campaign.write_text(
            campaign_text(station, 5, watchdog_ms=1500).replace("[stop]", ENDURANCE + "[stop]")
        )
        db = tmp_path / "e.sqlite"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rig.interface.cli",
                "run",
                str(campaign),
                "--db",
                str(db),
                "--quiet",
            ],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 120
            while _intervals(db) < 2 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert _intervals(db) >= 2 and proc.poll() is None
            time.sleep(0.2)  # inside the next interval
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        before = _intervals(db)
        assert station.wait_powered(0, 10)
        done = rig("run", "--resume", str(db), "--quiet", cwd=REPO, timeout_s=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT seq, bytes_written, host_bytes_total, failures FROM endurance_interval ORDER BY seq"
    ).fetchall()
    assert [r[0] for r in rows] == list(range(1, 7)) and before < 6
    total = 0
    for _, written, host_total, failures in rows:
        total += written
        assert host_total == total and failures == 0
    scan = con.execute("SELECT detail FROM event WHERE kind = 'resume_scan'").fetchall()
    assert len(scan) == 1 and '"generation_gap": 65536' in scan[0][0]
    # endurance intervals write outside cycles: no intent log, the whole region is read back
    assert '"scope": "region"' in scan[0][0]
    assert con.execute("SELECT status, resumes FROM campaign").fetchone() == ("done", 1)
    con.close()
