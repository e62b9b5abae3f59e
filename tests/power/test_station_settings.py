"""[station] watchdog_ms and [station.rail_sense]: validated in the campaign file and applied to
the relay board when the production wiring (rig/station/build.py) connects to it."""

from __future__ import annotations

import pytest

from rig.config import campaign_file
from rig.errors import UserError
from rig.power.relay import RelayBoard, SerialPendingCut
from rig.station import build as station
from rig.station.kinds.relay_board import RailSenseSpec
from tests.power.raw_session import raw_session
from tests.power.twins import Twin


def campaign_text(station_lines: str, kind: str = "relay-board", port: str = "/dev/null") -> str:
    where = f'port = "{port}"\n' if kind == "relay-board" else ""
    return f"""
[campaign]
name = "s"
cycles = 1
[station]
kind = "{kind}"
{where}{station_lines}
[[drive]]
channel = 2
wwn = "0x5000000000000001"
"""


def test_watchdog_and_rail_sense_are_parsed() -> None:
    spec = campaign_file.parse(
        campaign_text("watchdog_ms = 1500\nrail_sense = {hi = 600, lo = 100}")
    )
    assert spec.station.watchdog_ms == 1500
    rail = spec.station.rail_sense
    assert rail == RailSenseSpec(hi=600, lo=100, window_ms=50, samples=0)
    default = campaign_file.parse(campaign_text(""))
    assert default.station.watchdog_ms == 5000 and default.station.rail_sense is None


@pytest.mark.parametrize(
    ("lines", "kind", "message"),
    [
        ("watchdog_ms = 10", "relay-board", r"watchdog_ms = 10 is outside 50\.\.600000"),
        ("watchdog_ms = 0", "relay-board", "outside"),
        ("watchdog_ms = 700000", "relay-board", "outside"),
        ("watchdog_ms = 1000.5", "relay-board", "watchdog_ms must be a whole number"),
        ('watchdog_ms = "1s"', "relay-board", "wrong type"),
        ("watchdog_ms = 1000", "manual", "applies to relay-board stations only"),
        ("rail_sense = {hi = 600}", "simulated", "applies to relay-board stations only"),
        ("rail_sense = {lo = 100}", "relay-board", r"\[station.rail_sense\] needs 'hi'"),
        ("rail_sense = {hi = 100, lo = 200}", "relay-board", "lo < hi"),
        ("rail_sense = {hi = 2000}", "relay-board", "outside 0..1023"),
        ("rail_sense = {hi = 600, samples = 33}", "relay-board", "outside 0..32"),
        ("rail_sense = {hi = 600, windw_ms = 5}", "relay-board", "unknown key 'windw_ms'"),
    ],
)
def test_bad_station_settings_are_refused(lines: str, kind: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        campaign_file.parse(campaign_text(lines, kind))


def test_station_applies_watchdog_and_rail_sense_at_connect(host_twin: Twin) -> None:
    text = campaign_text(
        "watchdog_ms = 1500\nrail_sense = {hi = 600, lo = 100, window_ms = 30, samples = 6}",
        port=host_twin.pty,
    )
    built = station.build(campaign_file.parse(text))
    board = built.power
    try:
        assert isinstance(board, RelayBoard)
        with raw_session(board) as raw:  # what the board itself says
            raw.send("1 ID")
            assert " wdog_ms=1500" in raw.read_line()
        pending = board.cut(2, 0.001)
        assert isinstance(pending, SerialPendingCut)
        result = pending.rail(2.0)
        assert result is not None and result.channel == 2
        assert (result.hi_threshold, result.lo_threshold, result.window_ms) == (600, 100, 30)
        assert len(result.samples) == 6
        assert board.cut(1, 0.001).rail(2.0) is None  # not a campaign channel: no rail sense
        board.safe()
    finally:
        board.close()
