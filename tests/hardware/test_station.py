"""Hardware tier: runs only on a real station (relay board and drives), skipped elsewhere.

Set RIG_STATION_CAMPAIGN to a campaign file naming the station's board and drives (a few cycles
are enough); the tests run `rig station check` and the campaign through the production CLI and
check what they report and what the store recorded.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from rig.power.relay import PROTOCOL_VERSION
from tests.cli_runner import rig

CAMPAIGN = os.environ.get("RIG_STATION_CAMPAIGN", "")

pytestmark = [
    pytest.mark.hardware,
    pytest.mark.skipif(not CAMPAIGN, reason="no real station: set RIG_STATION_CAMPAIGN to run"),
]


def test_campaign_on_the_real_station_records_every_cut(tmp_path: Path) -> None:
    db = tmp_path / "station.sqlite"
    result = rig("run", CAMPAIGN, "--db", str(db), cwd=Path.cwd(), timeout_s=3600)
    assert result.returncode in (0, 1), result.stderr  # 1: a drive failed, which is a finding
    store = sqlite3.connect(db)
    statuses = [row[0] for row in store.execute("SELECT status FROM cycle")]
    assert statuses and "error" not in statuses
    cuts = store.execute("SELECT COUNT(*) FROM event WHERE kind = 'power_off'").fetchone()[0]
    assert cuts == len(statuses)


def test_station_check_on_the_real_station_passes(tmp_path: Path) -> None:
    """Day one: the board answers with the firmware and protocol the driver speaks, every
    channel's cut takes exactly its drive off the bus and brings it back, rail sense (where
    configured) reads on and off on the right side of its thresholds."""
    result = rig("station", "check", CAMPAIGN, "--json", cwd=tmp_path, timeout_s=1800)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and report["board"] is not None
    assert report["board"]["protocol"] == PROTOCOL_VERSION
    assert report["board"]["board"] != "host"  # a real MCU, not the host build of the firmware
    for channel in report["channels"]:
        assert channel["problems"] == [] and len(channel["left"]) == 1, channel
        assert channel["departure_s"] is not None and channel["return_s"] is not None
