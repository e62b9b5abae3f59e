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
