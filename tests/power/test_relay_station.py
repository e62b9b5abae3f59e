"""`rig run` on a relay-board station (the firmware twins behind their pty): the production
wiring opens the board by path, and bad input still leaves every channel untouched."""

from __future__ import annotations

import time
from pathlib import Path

from tests.cli_runner import rig
from tests.power.twins import Twin


def test_unknown_drive_on_a_relay_board_station_switches_nothing(
    tmp_path: Path, twin: Twin
) -> None:
    campaign = tmp_path / "station.toml"
    campaign.write_text(f"""
[campaign]
name = "station"
cycles = 2
[station]
kind = "relay-board"
port = "{twin.pty}"
[[drive]]
channel = 1
wwn = "0x5000000000000bad"
""")
    start = time.monotonic_ns()
    result = rig(
        "run", str(campaign), "--db", str(tmp_path / "s.sqlite"), cwd=tmp_path, timeout_s=120
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "rig: error: drive wwn 0x5000000000000bad not found on the bus"
    ]
    time.sleep(0.3)
    assert [p for p in twin.pins_since(start) if not p.on] == []
