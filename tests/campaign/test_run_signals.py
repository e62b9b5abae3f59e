"""`rig run` stopped by SIGINT or SIGTERM: the cycle in flight is recorded as `interrupted` with
its ledger, the campaign is `stopped`, every channel is left powered (the safe state), the exit
status says which signal; `--resume` then finishes the campaign with exact counts."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cli_runner import rig
from tests.loop_station import campaign_text, loop_station, requirements

REPO = Path(__file__).resolve().parents[2]
CYCLES = 12


@pytest.mark.skipif(bool(requirements()), reason=requirements() or "ok")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_safely_and_resume_finishes(
    tmp_path: Path, udevd: None, sig: signal.Signals
) -> None:
    with loop_station(tmp_path, 1) as station:
        campaign = tmp_path / "campaign.toml"
        campaign.write_text(campaign_text(station, CYCLES, watchdog_ms=60_000))
        db = tmp_path / "run.sqlite"
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
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started = time.monotonic_ns()
        assert station.wait_off_edge(started, 60), "no cut within 60 s"
        time.sleep(0.3)
        # right after a cut: the cycle is mid-way (before its verify), so it is the one stopped
        assert station.wait_off_edge(time.monotonic_ns(), 30)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 128 + sig, out
        assert f"stopped by {sig.name}" in out and "--resume" in out
        # the watchdog is a minute: the power is on because the rig put it there on its way
        # out; its switch lines reach this test through a reader thread, so give it a moment
        assert station.wait_powered(0, 5), (out, station.switches)

        con = sqlite3.connect(db)
        assert con.execute("SELECT status FROM campaign").fetchone() == ("stopped",)
        rows = con.execute("SELECT seq, status, writes, id FROM cycle ORDER BY seq").fetchall()
        assert rows and rows[-1][1] == "interrupted", rows
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
        # a stop by signal keeps the interrupted cycle's ledger
        blob = con.execute("SELECT writes FROM ledger WHERE cycle_id = ?", (rows[-1][3],))
        cols = np.load(io.BytesIO(blob.fetchone()[0]))
        assert len(cols["nblocks"]) == rows[-1][2]
        con.close()
        log = [json.loads(x) for x in (tmp_path / "run.log.jsonl").read_text().splitlines()]
        assert any(e["kind"] == "signal" and e["signal"] == sig.name for e in log)
        assert log[-1]["kind"] == "end" and log[-1]["status"] == "stopped"

        done = rig("run", "--resume", str(db), "--quiet", cwd=REPO, timeout_s=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    con = sqlite3.connect(db)
    counted = con.execute("SELECT COUNT(*) FROM cycle WHERE status != 'interrupted'").fetchone()
    assert counted == (CYCLES,)
    assert con.execute("SELECT COUNT(*) FROM finding WHERE failure = 1").fetchone() == (0,)
    assert con.execute("SELECT status, resumes FROM campaign").fetchone() == ("done", 1)
    # the resume read back the interrupted cycle's ranges from its intent log, not the region
    (detail,) = con.execute("SELECT detail FROM event WHERE kind = 'resume_scan'").fetchone()
    scan = json.loads(detail)["scan"]
    written = _written_blocks(cols)
    assert scan["scope"] == "intent" and scan["blocks"] >= len(written) > 0, scan
    con.close()
    assert not list(tmp_path.glob("run.sqlite.intent-*")), "a finished drive keeps no intent log"


def _written_blocks(cols: np.lib.npyio.NpzFile) -> np.ndarray:
    nblocks = cols["nblocks"].astype(np.int64)
    within = np.arange(int(nblocks.sum())) - np.repeat(np.cumsum(nblocks) - nblocks, nblocks)
    return np.unique(np.repeat(cols["first_lba"], nblocks) + within)
