"""Every block device's departures and arrivals while a station check cuts one channel.

The campaign's own watch (rig/bus/udev.py) follows one drive and ignores the rest of the bus.
A wiring check must see the rest: cutting a channel must make exactly its drive leave, and a
disk that leaves the bus is one that either sends `remove` or loses its medium (a `change` after
which sysfs shows size 0: a loop device detached). Disks are named by what they were before
the cut (the bus as it was when recording began): a removed device's own record may already
be gone.
"""

from __future__ import annotations

import os
import select
import time
from dataclasses import dataclass

import pyudev

from rig.bus import proof
from rig.bus.udev import identity_of
from rig.drive.identity import DriveIdentity


@dataclass(frozen=True)
class BusDevice:
    """A whole disk on the bus: its kernel name, node and identity (as udev described it)."""

    name: str
    devnode: str
    identity: DriveIdentity
    diskseq: int = 0

    def label(self) -> str:
        who = self.identity.label() or "unidentified disk"
        return f"{who} ({self.devnode or self.name})"


@dataclass(frozen=True)
class BusChange:
    host_ns: int  # when the recorder read it (the event itself may be older)
    action: str  # "left" or "arrived"
    device: BusDevice


def _device(device: pyudev.Device) -> BusDevice:
    return BusDevice(
        device.sys_name,
        device.device_node or f"/dev/{device.sys_name}",
        identity_of(device),
        proof.diskseq(device.sys_name),
    )


def _sectors(name: str) -> int:
    try:
        with open(f"/sys/class/block/{name}/size") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


class BusRecorder:
    """Armed at construction: a udev monitor of the block subsystem and a snapshot of every
    whole disk with a medium. `changes()` returns what happened since the last call."""

    def __init__(self) -> None:
        self._context = pyudev.Context()
        self._monitor = pyudev.Monitor.from_netlink(self._context)
        self._monitor.filter_by("block")
        self._monitor.start()
        self.before: dict[str, BusDevice] = {}
        for device in self._context.list_devices(subsystem="block", DEVTYPE="disk"):
            if _sectors(device.sys_name) > 0:
                self.before[device.sys_name] = _device(device)
        self._present = dict(self.before)

    def changes(self, timeout_s: float = 0.0) -> list[BusChange]:
        """Departures and arrivals of whole disks read from the monitor, waiting up to
        `timeout_s` for the first."""
        found: list[BusChange] = []
        deadline = time.monotonic() + timeout_s
        while True:
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._monitor], [], [], left if not found else 0)
            if not ready:
                return found
            device = self._monitor.poll(timeout=0)
            if device is not None and device.device_type == "disk":
                change = self._note(device)
                if change is not None:
                    found.append(change)

    def _note(self, device: pyudev.Device) -> BusChange | None:
        name = device.sys_name
        now = time.monotonic_ns()
        gone = device.action == "remove" or (
            device.action == "change" and _sectors(name) == 0 and os.path.exists(device.sys_path)
        )
        if gone:
            was = self._present.pop(name, None)
            if was is None:
                return None  # it had no medium before: it did not leave now
            return BusChange(now, "left", was)
        if device.action in ("add", "change") and name not in self._present:
            if _sectors(name) == 0:
                return None
            arrived = _device(device)
            self._present[name] = arrived
            return BusChange(now, "arrived", arrived)
        return None

    def close(self) -> None:
        self._monitor = None  # pyudev: the socket closes with its last reference
