"""Endurance mode through the production campaign code on the simulated rig: measured intervals
(throughput, latency percentiles, host bytes and TBW), verification on its cadence, interleaved
cuts and retention checks; and the steady-state rule on known series."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures import sim_station
from rig import config, endurance
from rig.campaign import run_campaign
from rig.errors import UserError
from rig.store import Store
from tests.test_sim_campaign import campaign_text

ENDURANCE = """
[endurance]
intervals = 4
interval_s = 0.3
verify_every = 2
cut_every = 2
retention_every = 3
retention_off_s = 0.05
tbw_tb = 1
"""


def run(tmp_path: Path, profile: str) -> Store:
    text = campaign_text([profile], cycles=10, extra="", flush_every=2)
    campaign = config.parse(text.replace("[cut]", ENDURANCE + "[cut]"))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "e.sqlite"))
    run_campaign(campaign, station, store, lambda line: None, drive_loop=endurance.drive_loop)
    return store


def test_intervals_cuts_and_retention_are_recorded(tmp_path: Path) -> None:
    store = run(tmp_path, "plp")
    rows = store.query("SELECT * FROM endurance_interval ORDER BY seq")
    assert [r["kind"] for r in rows] == ["write", "write", "write", "retention", "write"]
    writes = [r for r in rows if r["kind"] == "write"]
    total = 0
    for r in writes:
        total += r["bytes_written"]
        assert r["host_bytes_total"] == total
        assert r["tbw_fraction"] == pytest.approx(total / 1e12)
        assert r["writes"] > 0 and r["mb_per_s"] > 0 and r["iops"] > 0
        assert r["lat_p50_us"] <= r["lat_p99_us"] <= r["lat_p999_us"] <= r["lat_max_us"]
        assert 0 < r["fill_fraction"] <= 1
    # verification on every 2nd write interval; retention reads back every block with data
    assert [r["verified_blocks"] > 0 for r in writes] == [False, True, False, True]
    retention = rows[3]
    assert retention["verified_blocks"] > 0 and retention["failures"] == 0
    assert all(r["failures"] == 0 for r in rows)  # a drive with power-loss protection
    cycles = store.query("SELECT seq, status FROM cycle ORDER BY seq")
    assert [c["seq"] for c in cycles] == [1, 2]  # a cut after write intervals 2 and 4
    store.close()


def test_retention_check_finds_what_a_lying_flush_lost(tmp_path: Path) -> None:
    store = run(tmp_path, "lying-flush")
    retention = store.query("SELECT * FROM endurance_interval WHERE kind = 'retention'")[0]
    detail = json.loads(retention["detail"])
    assert retention["failures"] > 0
    # data flushed before the power-off and not written since: the checker calls its loss
    # collateral damage (retroactive loss of durable data), never an allowed outcome
    assert detail["findings"].get("collateral_damage", 0) > 0
    store.close()


@pytest.mark.parametrize(
    ("series", "steady"),
    [
        ([100, 101, 99, 100, 100], True),
        ([100, 90, 80, 70, 60], False),  # a trend: slope excursion above 10%
        ([100, 130, 100, 130, 100], False),  # range above 20% of the average
        ([500, 100, 101, 99, 100, 100], True),  # only the last window counts
        ([100, 100, 100, 100], False),  # fewer intervals than the window
    ],
)
def test_steady_state_rule(series: list[float], steady: bool) -> None:
    assert endurance.steady_state(series, 5) is steady


def test_endurance_keys_are_checked() -> None:
    base = campaign_text(["plp"], cycles=1)
    with pytest.raises(UserError, match=r"\[endurance\] needs intervals"):
        config.parse(base.replace("[cut]", "[endurance]\ninterval_s = 1\n[cut]"))
    with pytest.raises(UserError, match=r"\[endurance\]\.discard"):
        config.parse(base.replace("[cut]", "[endurance]\nintervals = 1\ndiscard = 'x'\n[cut]"))
    with pytest.raises(UserError, match=r"\[endurance\]\.discard needs a block device"):
        config.parse(
            base.replace("[cut]", "[endurance]\nintervals = 1\ndiscard = 'blkdiscard'\n[cut]")
        )
    with pytest.raises(UserError, match=r"\[endurance\]\.steady_window"):
        config.parse(base.replace("[cut]", "[endurance]\nintervals = 1\nsteady_window = 1\n[cut]"))
