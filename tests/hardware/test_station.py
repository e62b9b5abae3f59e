"""Hardware tier: runs only on a real station (relay board and drives), skipped elsewhere.

Set RIG_STATION_CAMPAIGN to a campaign file naming the station's board and drives (a few cycles
are enough); the test runs it through the production CLI and checks what the store recorded.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

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
