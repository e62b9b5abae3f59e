"""Wiring of a real station: power backend, udev presence, interlocked O_DIRECT targets."""

from __future__ import annotations

from collections.abc import Callable

from rig import safety
from rig.blockio import BlockTarget, DirectTarget
from rig.bus.base import DriveNode
from rig.bus.udev import UdevPresence
from rig.campaign import Station
from rig.config import Campaign, DriveSpec
from rig.errors import UserError
from rig.power.base import Edge, PowerSwitch
from rig.power.manual import ManualSwitch
from rig.power.serial_board import RelayBoard


def open_checked(node: DriveNode, spec: DriveSpec) -> BlockTarget:
    """Interlocks first, then O_DIRECT (and O_EXCL) on the node found by identity."""
    if not spec.identity.matches(node.identity):
        raise UserError(f"{node.devnode} is not {spec.identity.label()}")
    safety.check(node.devnode, spec.identity.label(), spec.allow_wipe)
    return DirectTarget(node.devnode, node.logical_block)


def _power(campaign: Campaign, on_edge: Callable[[Edge], None] | None) -> PowerSwitch:
    channels = max(d.channel for d in campaign.drives) + 1
    spec = campaign.station
    if spec.kind == "manual":
        return ManualSwitch(channels)
    if spec.kind == "relay-board":
        board = (
            RelayBoard.find(spec.usb_serial, on_edge=on_edge)
            if spec.usb_serial
            else RelayBoard(spec.port, on_edge=on_edge)
        )
        if board.channels < channels:
            board.close()
            raise UserError(f"relay board has {board.channels} channels; campaign uses {channels}")
        return board
    raise UserError(f"station kind '{spec.kind}' is not a real station")


def build(campaign: Campaign, on_edge: Callable[[Edge], None] | None = None) -> Station:
    """`on_edge` receives every switching edge the power backend reports (for the store)."""
    name = campaign.station.kind
    if campaign.station.kind == "relay-board":
        name = f"relay-board {campaign.station.usb_serial or campaign.station.port}"
    return Station(name, _power(campaign, on_edge), UdevPresence(), open_checked)
