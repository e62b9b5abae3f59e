"""Wiring of a real station: power backend, udev presence, interlocked O_DIRECT targets."""

from __future__ import annotations

from rig import safety
from rig.blockio import BlockTarget, DirectTarget
from rig.bus.base import DriveNode
from rig.bus.udev import UdevPresence
from rig.campaign import Station
from rig.config import Campaign, DriveSpec
from rig.errors import UserError
from rig.power.base import PowerSwitch
from rig.power.manual import ManualSwitch


def open_checked(node: DriveNode, spec: DriveSpec) -> BlockTarget:
    """Interlocks first, then O_DIRECT (and O_EXCL) on the node found by identity."""
    if not spec.identity.matches(node.identity):
        raise UserError(f"{node.devnode} is not {spec.identity.label()}")
    safety.check(node.devnode, spec.identity.label(), spec.allow_wipe)
    return DirectTarget(node.devnode, node.logical_block)


def _power(campaign: Campaign) -> PowerSwitch:
    channels = max(d.channel for d in campaign.drives) + 1
    if campaign.station.kind == "manual":
        return ManualSwitch(channels)
    raise UserError(f"station kind '{campaign.station.kind}' has no power backend in this build")


def build(campaign: Campaign) -> Station:
    return Station(campaign.station.kind, _power(campaign), UdevPresence(), open_checked)
