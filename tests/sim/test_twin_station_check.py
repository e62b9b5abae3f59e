"""`rig station check` on the full-system twin (the real firmware in simavr powering FUSE-served
loop devices, found through the production udev presence): a station wired as its campaign
says passes, with the board's identity and each drive's departure and return times; a twin
whose channel 0 and 1 drive cables are swapped (`RIG_SIM_WIRING`) fails with one line per
channel naming the drive that left and the drive that should have; nothing is ever written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.sim_station import WIRING_ENV
from rig.config import campaign_file
from rig.drive.identity import DriveIdentity
from rig.station import build
from rig.station.check import run_check
from tests.cli_runner import rig
from tests.sim.twin_helpers import campaign_text, image_writes

PROFILES = ["honest", "plp", "honest"]


def _campaign(tmp_path: Path, label: str) -> tuple[Path, list[DriveIdentity]]:
    path = tmp_path / "check.toml"
    path.write_text(campaign_text("station-check", PROFILES, 1, 0, label=label))
    campaign = campaign_file.load(str(path))
    return path, [d.identity for d in sorted(campaign.drives, key=lambda d: d.channel)]


def test_a_twin_wired_as_its_campaign_says_passes(twin: None, tmp_path: Path) -> None:
    path, _ = _campaign(tmp_path, "checkok")
    result = rig("station", "check", str(path), "--json", cwd=tmp_path, timeout_s=600)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["schema"] == "rig.station-check/1" and report["ok"] is True
    assert report["board"]["protocol"] == 3 and report["board"]["firmware"] == "0.3.0"
    assert report["board"]["board"] == "nano328p"  # the AVR image in simavr
    assert [c["channel"] for c in report["channels"]] == [0, 1, 2]
    for channel in report["channels"]:
        assert channel["ok"] and channel["problems"] == [], channel
        assert len(channel["left"]) == 1 and channel["drive"] in channel["left"][0]
        assert 0 <= channel["departure_s"] < 10 and 0 <= channel["return_s"] < 15


def test_a_miswired_twin_names_the_channel_and_both_drives(twin: None, tmp_path: Path) -> None:
    path, drives = _campaign(tmp_path, "checkmis")
    env = {WIRING_ENV: "0:1,1:0"}  # channel 0's drive on pin 1, channel 1's on pin 0
    result = rig("station", "check", str(path), cwd=tmp_path, timeout_s=600, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for channel, left, named in ((0, drives[1], drives[0]), (1, drives[0], drives[1])):
        wrong = [line for line in lines if line.startswith(f"channel {channel} ")]
        assert len(wrong) == 1, result.stdout
        assert wrong[0].startswith(
            f"channel {channel} is miswired: cutting it made {left.label()} ("
        ), wrong[0]
        assert wrong[0].endswith(
            f"leave the bus; the campaign names {named.label()} on channel {channel}"
        ), wrong[0]
    assert not [line for line in lines if line.startswith("channel 2")], result.stdout
    row = next(line for line in lines if line.startswith("2 "))
    assert "its drive only" in row and row.rstrip().endswith("right")


def test_the_check_writes_nothing(twin: None, tmp_path: Path) -> None:
    path, _ = _campaign(tmp_path, "checkrw")
    campaign = campaign_file.load(str(path))
    station = build.build(campaign, store_path=str(tmp_path / "twin.sqlite"))
    try:
        result = run_check(campaign, station)
    finally:
        station.power.close()
    assert result.ok, [c.problems for c in result.channels]
    writes = image_writes(tmp_path)
    assert len(writes) == len(PROFILES), writes.keys()  # each image kept its log, empty
    assert all(not received for received in writes.values()), writes


@pytest.mark.parametrize("wiring", ["0:0,1:1,2:2"])
def test_wiring_of_the_twin_is_a_permutation(wiring: str) -> None:
    from fixtures.sim_station import wiring as parse

    assert parse(wiring) == {0: 0, 1: 1, 2: 2}
    with pytest.raises(Exception, match="permutation"):
        parse("0:1,1:1")
