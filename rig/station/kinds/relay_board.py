"""`kind = "relay-board"`: the rig's own relay board (firmware/) on a serial port; drives on the
real bus. Its keys: port or usb_serial, watchdog_ms, [station.rail_sense]."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rig.config import Table
from rig.errors import UserError
from rig.power.base import Edge, PowerSwitch
from rig.power.relay import RelayBoard, find_port
from rig.schema import StationSpec

if TYPE_CHECKING:
    from rig.campaign_spec import Campaign


@dataclass(frozen=True)
class RailSenseSpec:
    """Relay board rail sense, for every campaign channel (ADC counts; see docs/campaign.md)."""

    hi: int
    lo: int
    window_ms: int
    samples: int


@dataclass(frozen=True)
class RelayBoardSpec(StationSpec):
    port: str = ""  # the board by path
    usb_serial: str = ""  # or by its USB serial number (udev)
    watchdog_ms: int = 5000  # host silence after which every channel goes safe
    rail_sense: RailSenseSpec | None = None

    def label(self) -> str:
        return f"relay-board {self.usb_serial or self.port}"


def settings(keys: Table, common: StationSpec) -> RelayBoardSpec:
    spec = RelayBoardSpec(
        **vars(common),
        port=keys.get("port", str, ""),
        usb_serial=keys.get("usb_serial", str, ""),
        # The firmware accepts 50..600000 (0 would disable it: not offered, power must end safe).
        watchdog_ms=keys.integer("watchdog_ms", 5000, 50, 600_000),
        rail_sense=_rail_sense(keys.table("rail_sense")) if "rail_sense" in keys.data else None,
    )
    if not (spec.port or spec.usb_serial):
        raise UserError("campaign: a relay-board station needs [station].port or .usb_serial")
    return spec


def _rail_sense(keys: Table) -> RailSenseSpec:
    rail = RailSenseSpec(
        hi=keys.integer("hi", None, 0, 1023),
        lo=keys.integer("lo", 0, 0, 1023),
        window_ms=keys.integer("window_ms", 50, 1, 60_000),
        samples=keys.integer("samples", 0, 0, 32),
    )
    keys.done()
    if rail.hi == 0 or rail.lo >= rail.hi:
        raise UserError("campaign: [station.rail_sense] needs hi > 0 and lo < hi (ADC counts)")
    return rail


def power(campaign: Campaign, on_edge: Callable[[Edge], None] | None) -> PowerSwitch:
    """Connects to the board, checks it has the campaign's channels, sets up rail sense."""
    spec = campaign.station
    assert isinstance(spec, RelayBoardSpec)
    channels = max(d.channel for d in campaign.drives) + 1
    # The watchdog setting is applied at connect and again after every MCU reset. A stalled
    # link is ridden out for longer than the watchdog period: a request that fails for a stall
    # was either heard by the board or its watchdog made every channel safe.
    stall_s = max(10.0, spec.watchdog_ms / 1000 + 1.0)
    port = find_port(spec.usb_serial) if spec.usb_serial else spec.port
    board = RelayBoard(port, on_edge=on_edge, watchdog_ms=spec.watchdog_ms, stall_timeout_s=stall_s)
    try:
        if board.channels < channels:
            raise UserError(f"relay board has {board.channels} channels; campaign uses {channels}")
        rail = spec.rail_sense
        if rail is not None:
            for drive in campaign.drives:
                board.configure_rail(drive.channel, rail.hi, rail.lo, rail.window_ms, rail.samples)
    except BaseException:
        board.close()
        raise
    return board
