"""A station: the hardware a campaign runs on, as the station's builders (build.py, the kinds)
wire it and the campaign uses it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from rig.config.campaign import DriveSpec
from rig.drive.node import DriveNode, Presence
from rig.health.maintenance import Maintenance
from rig.health.tracker import HealthReader
from rig.io.blockio import BlockTarget
from rig.power.base import Edge, PowerSwitch
from rig.station.purge import DrivePurge

TargetOpener = Callable[[DriveNode, DriveSpec], BlockTarget]
ReadyProbe = Callable[[DriveNode, float], int]  # (node, timeout) -> host ns ready; NotReady
WriteCacheControl = Callable[[DriveNode, bool | None], bool | None]  # set (unless None), read
DriveClaim = Callable[[DriveNode, str], AbstractContextManager[object]]  # (node, campaign)


@dataclass
class Station:
    """The hardware a campaign runs on, wired explicitly (real or simulated)."""

    name: str
    power: PowerSwitch
    presence: Presence
    open_target: TargetOpener  # runs the safety interlocks, then opens the drive for I/O
    # Capabilities a station's drives may lack (None: not available, e.g. in-process drives).
    health: HealthReader | None = None  # a HealthSnapshot; raises HealthToolError
    ready: ReadyProbe | None = None  # after a return: waits until the drive answers I/O
    write_cache: WriteCacheControl | None = None
    claim: DriveClaim | None = None  # holds the drive against other campaigns
    purge: DrivePurge | None = None  # PTS purge before an endurance run (rig/station/purge.py)
    maintenance: Maintenance | None = None  # format, sanitize, firmware (rig/health/maintenance.py)


@dataclass(frozen=True)
class Wiring:
    """What the rig hands a station constructor besides the campaign."""

    on_edge: Callable[[Edge], None] | None = None  # every switching edge, for the store
    store_path: str = ""  # the campaign's store; a station may keep its own files beside it
