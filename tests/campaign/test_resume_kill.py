"""Acceptance: `kill -9` of `rig run` at random moments, each followed by
`rig run --resume`: no ledger data lost, no cycle counted twice or miscounted, power restored by
the firmware's watchdog.

The station is real all the way down except the drives' insides: the production CLI in a child
process, the production relay board driver, the firmware's host build behind a pty with a short
watchdog, real loop devices over image files that leave and rejoin the bus through udev
(`fixtures/loop_power.py`, a process that outlives the rig, as a board and drives do). The loop
devices keep everything written (no volatile cache, no tears), so any failure finding here would
be a false one made by the resume. Half the kills land while a channel is switched off, so the
board's watchdog, not the next rig, must bring the power back.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cli_runner import rig
from tests.loop_station import LoopStation, campaign_text, loop_station, requirements

REPO = Path(__file__).resolve().parents[2]
WATCHDOG_MS = 1500  # short, yet above the heartbeat gaps of a loaded 2-core host
CHANNELS = 2

Snapshot = dict[tuple[int, int], tuple[str, int, str]]


def _read_store(db: Path) -> Snapshot:
    """Every recorded cycle: status, writes and a digest of its ledger blob."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT c.drive_id, c.seq, c.status, c.writes, l.writes FROM cycle c"
            " LEFT JOIN ledger l ON l.cycle_id = c.id"
        ).fetchall()
    finally:
        con.close()
    return {
        (drive, seq): (status, writes, hashlib.sha1(blob).hexdigest() if blob else "")
        for drive, seq, status, writes, blob in rows
    }


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "rig.interface.cli", *args],
        cwd=REPO,
        stdout=open(cwd / "rig.out", "ab"),
        stderr=subprocess.STDOUT,
    )


def _runs_logged(run_log: Path) -> int:
    """Runs that got past start-up (and resume): their "start" or "resume" line is logged."""
    if not run_log.exists():
        return 0
    whole = run_log.read_text().split("\n")[:-1]  # a line being written has no newline yet
    kinds = [json.loads(line)["kind"] for line in whole if line]
    return sum(1 for kind in kinds if kind in ("start", "resume"))


def _kill_at_random_moment(
    proc: subprocess.Popen[bytes],
    station: LoopStation,
    rng: random.Random,
    while_off: bool,
    run_log: Path,
    runs_before: int,
) -> None:
    # Wait for this run's own start (or resume) line, then its first cut: the rig is past
    # start-up and resume, cycles are running. (An off edge alone may be the dead rig's last
    # cut firing late on a loaded machine.)
    deadline = time.monotonic() + 60
    while _runs_logged(run_log) <= runs_before and time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it started cycles"
        time.sleep(0.02)
    assert _runs_logged(run_log) > runs_before, "the rig did not start within 60 s"
    assert station.wait_off_edge(time.monotonic_ns(), 60), "the rig made no cut within 60 s"
    time.sleep(rng.uniform(0, 1.2))
    if while_off:  # right after the next off edge: the channel is off when the rig dies
        assert station.wait_off_edge(time.monotonic_ns(), 30)
    assert proc.poll() is None, "the run ended by itself: raise its cycles"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _ledger_keys(blob: bytes) -> np.ndarray:
    """(lba << 32 | generation) of every block of every write in one cycle's ledger."""
    cols = np.load(io.BytesIO(blob))
    nblocks = cols["nblocks"]
    within = np.arange(int(nblocks.sum())) - np.repeat(cols["gen_offset"], nblocks)
    lbas = np.repeat(cols["first_lba"], nblocks) + within
    return lbas.astype(np.int64) << 32 | cols["generations"].astype(np.int64)


@pytest.mark.skipif(bool(requirements()), reason=requirements() or "ok")
def test_kill_9_then_resume(tmp_path: Path, udevd: None) -> None:
    kill_and_resume(tmp_path, trials=10, cycles=40)  # the soak below: 100


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("RIG_SLOW"), reason="soak: set RIG_SLOW=1 (-m slow)")
@pytest.mark.skipif(bool(requirements()), reason=requirements() or "ok")
def test_kill_9_then_resume_soak(tmp_path: Path, udevd: None) -> None:
    kill_and_resume(tmp_path, trials=100, cycles=700)


def kill_and_resume(tmp_path: Path, trials: int, cycles: int) -> None:
    rng = random.Random(6)
    with loop_station(tmp_path, CHANNELS) as station:
        campaign = tmp_path / "campaign.toml"
        campaign.write_text(campaign_text(station, cycles, WATCHDOG_MS))
        db = tmp_path / "run.sqlite"
        before: Snapshot = {}
        restored_by_watchdog = 0
        for trial in range(trials):
            first = ["run", str(campaign), "--db", str(db), "--quiet"]
            args = first if trial == 0 else ["run", "--resume", str(db), "--quiet"]
            run_log = tmp_path / "run.log.jsonl"
            runs_before = _runs_logged(run_log)
            proc = _start(args, tmp_path)
            try:
                _kill_at_random_moment(proc, station, rng, trial % 2 == 1, run_log, runs_before)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(30)
            # a cut the dead rig had scheduled still fires (cut delays are under 0.2 s): let it,
            # so the next run's first cut is its own
            time.sleep(0.3)
            off = [ch for ch in range(CHANNELS) if not station.powered(ch)]
            # nobody talks to the board now: only its watchdog can switch the power back on
            for ch in range(CHANNELS):
                assert station.wait_powered(ch, WATCHDOG_MS / 1000 + 5), f"ch{ch} left off"
            restored_by_watchdog += len(off)
            after = _read_store(db)
            lost = {k: v for k, v in before.items() if after.get(k) != v}
            assert not lost, f"trial {trial}: recorded cycles changed or vanished: {lost}"
            before = after

        done = rig("run", "--resume", str(db), "--quiet", cwd=REPO, timeout_s=900)
        assert done.returncode == 0, done.stdout[:3000] + done.stdout[-3000:] + done.stderr[-3000:]
        final = _read_store(db)
        assert all(final[k] == v for k, v in before.items())

    assert restored_by_watchdog >= 1, "no kill landed while a channel was off"
    con = sqlite3.connect(db)
    drives = [row[0] for row in con.execute("SELECT id FROM drive ORDER BY channel")]
    assert len(drives) == CHANNELS
    for drive in drives:
        _check_drive(con, drive, trials, cycles)
    summary = con.execute("SELECT status, COUNT(*) FROM cycle GROUP BY 1 ORDER BY 1").fetchall()
    print(f"kills {trials}, channels off at a kill {restored_by_watchdog}, cycles {summary}")
    failures = con.execute("SELECT class, COUNT(*) FROM finding WHERE failure = 1 GROUP BY 1")
    assert failures.fetchall() == [], "a resume invented drive failures on a perfect drive"
    status, resumes = con.execute("SELECT status, resumes FROM campaign").fetchone()
    assert (status, resumes) == ("done", trials)
    # every kill left the rig's intent log in the page cache (same boot): each resume read back
    # only what the last cycle planned, never the whole region
    scan_rows = con.execute("SELECT detail FROM event WHERE kind = 'resume_scan'").fetchall()
    scans = [json.loads(detail)["scan"] for (detail,) in scan_rows]
    assert len(scans) == trials * CHANNELS
    assert all(scan["scope"] == "intent" for scan in scans), scans
    con.close()
    log = [json.loads(line) for line in (tmp_path / "run.log.jsonl").read_text().splitlines()]
    assert sum(1 for entry in log if entry["kind"] == "resume") == trials
    assert sum(1 for entry in log if entry["kind"] == "end") == 1  # only the run not killed


def _check_drive(con: sqlite3.Connection, drive: int, trials: int, cycles: int) -> None:
    """One drive's cycles after the kills: numbered without gaps, the target counted, a ledger
    per cycle that matches it, and no generation issued twice for a block."""
    rows = con.execute(
        "SELECT seq, status, writes, id FROM cycle WHERE drive_id = ? ORDER BY seq", (drive,)
    ).fetchall()
    seqs = [r[0] for r in rows]
    assert seqs == list(range(1, len(seqs) + 1)), "cycle numbers have gaps or repeats"
    counted = [r for r in rows if r[1] != "interrupted"]
    interrupted = [r for r in rows if r[1] == "interrupted"]
    assert len(counted) == cycles, "cycles counted towards the target"
    assert len(interrupted) <= trials  # at most one per kill, never counted
    assert any(r[1] == "ok" for r in counted)
    keys = []
    for seq, status, writes, cycle_id in rows:
        blob = con.execute("SELECT writes FROM ledger WHERE cycle_id = ?", (cycle_id,))
        found = blob.fetchone()
        if status == "interrupted" and found is None:
            continue  # the crash took this cycle's ledger with it; resume read it back
        assert found is not None, f"cycle {seq} has no ledger"
        cols = np.load(io.BytesIO(found[0]))
        assert len(cols["nblocks"]) == writes, f"cycle {seq}: ledger and count disagree"
        keys.append(_ledger_keys(found[0]))
    every = np.concatenate(keys)
    assert len(np.unique(every)) == len(every), "a generation was issued twice for a block"
