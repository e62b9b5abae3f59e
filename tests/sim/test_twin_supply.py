"""`rig run` with `[station] kind = "scpi-supply"`, end to end: the production command talks SCPI
through PyVISA's socket resource (pyvisa-py) to the simulated supply, whose outputs are the rails
of the full-system twin's drives (FUSE-served loop devices found through udev): sags and ramps
on an honest and a PLP drive, no failure, every cut's shape recorded."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from fixtures.simssd.runtime import TwinDrive
from fixtures.simssd.twin import SHIM_DIR, SimTwin
from tests.cli_runner import rig

DRIVES = [("honest", "SUPPLY HONEST", "SUPH0"), ("plp", "SUPPLY PLP", "SUPP1")]


def campaign(resource: str, cut: str) -> str:
    drives = "".join(
        f'[[drive]]\nchannel = {ch}\nmodel = "{model}"\nserial = "{serial}"\n'
        for ch, (_, model, serial) in enumerate(DRIVES)
    )
    return f"""
[campaign]
name = "supply twin"
cycles = 5
seed = 4
region_mib = 2
[station]
kind = "scpi-supply"
resource = "{resource}"
family = "keysight-e36"
model = "E36312A"
volts = 5.0
[workload]
workers = 2
write_blocks = [1, 4]
flush_every = 4
[cut]
{cut}
delay_ms = [2, 15]
off_ms = 20
gone_timeout_s = 2
return_timeout_s = 20
read_timeout_s = 5
sample_blocks = 16
{drives}"""


def test_rig_run_sags_and_ramps_through_pyvisa_against_the_simulated_supply(
    tmp_path: Path, twin: None
) -> None:
    drives = [
        TwinDrive(ch, model, serial, "", name, 40 + ch)
        for ch, (name, model, serial) in enumerate(DRIVES)
    ]
    sim = SimTwin(
        drives,
        tmp_path / "truth.jsonl",
        {"family": "keysight-e36", "model": "E36312A", "volts": 5.0},
    )
    # the twin's smartctl answers for its loop devices (real smartctl cannot type them)
    path = {"PATH": f"{SHIM_DIR}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
    try:
        assert sim.resource.startswith("TCPIP::127.0.0.1::")
        results = []
        for n, cut in enumerate(
            [
                'kind = "sag"\ndepth_pct = [20, 95]\nduration_ms = [5, 30]',
                'kind = "ramp"\nslew_v_per_ms = [0.5, 2]',
            ]
        ):
            (tmp_path / f"c{n}.toml").write_text(campaign(sim.resource, cut))
            result = rig(
                "run", f"c{n}.toml", "--db", f"s{n}.sqlite", cwd=tmp_path, timeout_s=600, env=path
            )
            results.append(result)
            assert result.returncode == 0, result.stderr[-2000:]
        # bad input through the same command: one line, exit 2, nothing made, nothing switched
        for n, (text, words) in enumerate(
            [
                (campaign(sim.resource, 'kind = "off"').replace('"E36312A"', '"E36313A"'),
                 "the instrument is a E36312A"),
                (campaign(sim.resource, 'kind = "sag"\ndepth_v = 0\nduration_ms = 1'),
                 "deeper than the E36312A can set"),
                (campaign(sim.resource, 'kind = "ramp"\nslew_v_per_ms = 9'),
                 "faster than the E36312A can bring"),
            ]
        ):  # fmt: skip
            (tmp_path / f"bad{n}.toml").write_text(text)
            bad = rig("run", f"bad{n}.toml", "--db", f"bad{n}.sqlite", cwd=tmp_path, env=path)
            lines = bad.stderr.strip().splitlines()
            assert bad.returncode == 2 and len(lines) == 1 and words in lines[0], bad.stderr
            assert not (tmp_path / f"bad{n}.sqlite").exists()
    finally:
        sim.close()
    for n in range(2):
        with sqlite3.connect(tmp_path / f"s{n}.sqlite") as db:
            statuses = [r[0] for r in db.execute("SELECT status FROM cycle")]
            failing = list(db.execute("SELECT class FROM finding WHERE failure = 1"))
            kinds = [json.loads(r[0])["kind"] for r in db.execute(
                "SELECT detail FROM event WHERE kind = 'cut_shape'")]  # fmt: skip
            station = db.execute("SELECT station FROM campaign").fetchone()[0]
        assert statuses == ["ok"] * 10 and failing == []
        assert kinds == [("sag", "ramp")[n]] * 10
        assert station.startswith("scpi-supply E36312A TCPIP::127.0.0.1::")


def test_rig_run_meets_a_supply_that_stops_answering_mid_campaign(
    tmp_path: Path, twin: None
) -> None:
    import signal
    import subprocess
    import sys
    import time

    drives = [TwinDrive(0, "SUPPLY FREEZE", "SUPF0", "", "honest", 7)]
    sim = SimTwin(
        drives,
        tmp_path / "truth.jsonl",
        {"family": "keysight-e36", "model": "E36312A", "volts": 5.0},
    )
    env = {**os.environ, "PATH": f"{SHIM_DIR}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
    text = campaign(sim.resource, 'kind = "off"').replace("cycles = 5", "cycles = 40")
    text = text.replace('\n[[drive]]\nchannel = 1\nmodel = "SUPPLY PLP"\nserial = "SUPP1"\n', "")
    text = text.replace("SUPPLY HONEST", "SUPPLY FREEZE").replace("SUPH0", "SUPF0")
    text = text.replace("volts = 5.0", "volts = 5.0\ntimeout_ms = 500")
    (tmp_path / "c.toml").write_text(text)
    db = tmp_path / "s.sqlite"
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rig.cli", "run", "c.toml", "--db", "s.sqlite"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            try:  # (read-only: never the one who creates the store)
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as store:
                    done = store.execute("SELECT count(*) FROM cycle").fetchone()[0]
            except sqlite3.Error:
                done = 0
            if done >= 2:
                break
            time.sleep(0.1)
        os.kill(sim.proc.pid, signal.SIGUSR1)  # the supply stops answering, its output on
        _, stderr = proc.communicate(timeout=300)
        node_still_there = os.path.exists(sim.nodes["SUPF0"])
    finally:
        sim.close()
    lines = stderr.strip().splitlines()
    assert proc.returncode == 3 and len(lines) == 1, stderr
    assert "the supply did not answer" in lines[0]
    with sqlite3.connect(db) as store:
        statuses = [r[0] for r in store.execute("SELECT status FROM cycle ORDER BY id")]
        ended = store.execute("SELECT status FROM campaign").fetchone()[0]
    assert statuses[:2] == ["ok", "ok"] and statuses.count("error") >= 1 and len(statuses) < 40
    assert ended == "done"  # the campaign's end recorded all the same
    assert node_still_there  # the drive stayed powered: its output was on when it froze
