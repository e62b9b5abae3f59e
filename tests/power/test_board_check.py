"""`rig station check` on a station of several relay boards (fixtures/board_station.py): every
board's identity, each channel shown with its board, and a cable on the wrong board found."""

from __future__ import annotations

import pytest

from fixtures.board_station import HOST_BINARY, BoardStation, drive_toml
from rig.config import campaign_file
from rig.interface.station_check import table
from rig.station.check import run_check

pytestmark = pytest.mark.skipif(not HOST_BINARY.exists(), reason="firmware host build missing")


def _check(rig: BoardStation) -> list[str]:
    drives = "".join(drive_toml(b, ch, f"K{b}{ch}") for b in ("a", "b") for ch in (0, 1))
    campaign = campaign_file.parse(f"""
[campaign]
name = "check"
cycles = 1
{rig.station_toml()}
[cut]
gone_timeout_s = 1.5
return_timeout_s = 5
{drives}""")
    station = rig.station(campaign, None)
    try:
        result = run_check(campaign, station)
    finally:
        station.power.close()
    facts = result.as_json()
    assert sorted(facts["boards"]) == ["a", "b"] and facts["board"] is None
    assert all(f["channels"] == 4 for f in facts["boards"].values())
    assert [c["wiring"] for c in facts["channels"]] == [
        "board a ch0 (ch0)",
        "board a ch1 (ch1)",
        "board b ch0 (ch16)",
        "board b ch1 (ch17)",
    ]
    return table(result)


def test_station_check_shows_every_board_and_channel() -> None:
    rig = BoardStation(("a", "b"))
    try:
        lines = _check(rig)
    finally:
        rig.close()
    assert [line.split(":")[0] for line in lines[1:3]] == ["board a", "board b"]
    # another program's disks that happen to move meanwhile are notes, not wiring
    assert "every channel is wired as the campaign says" in lines, lines


def test_station_check_finds_a_cable_on_the_wrong_board() -> None:
    # board a's pin 1 powers the drive named on board b channel 1, and the other way round
    rig = BoardStation(("a", "b"), miswired={("a", 1): ("b", 1), ("b", 1): ("a", 1)})
    try:
        lines = _check(rig)
    finally:
        rig.close()
    wrong = [line.split()[:3] for line in lines if line.endswith("WRONG")]
    assert wrong == [["board", "a", "ch1"], ["board", "b", "ch1"]], lines
    said = [line.split(":")[0] for line in lines if "made no disk leave the bus" in line]
    assert said == ["channel 1 of board a (ch1)", "channel 1 of board b (ch17)"], lines
