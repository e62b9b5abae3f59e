"""The presence capability: find a drive by identity and watch it leave and come back.

A watch is armed before the cut, so no event between arming and waiting is missed. Times are
host monotonic nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from rig.drive.identity import DriveIdentity


@dataclass(frozen=True)
class DriveNode:
    """A drive as it is present on the bus right now."""

    identity: DriveIdentity
    devnode: str  # e.g. /dev/sdb; changes across re-enumerations, never used to name a drive
    size_bytes: int
    logical_block: int = 512
    physical_block: int = 4096
    transport: str = ""  # sata, sas, nvme, usb, virtio, loop, ... (for people; never for matching)
    read_only: bool = False  # the kernel reports the device write-protected (sysfs `ro`)
    # Which attachment this is (rig/bus/proof.py): the kernel's disk sequence number (0: none
    # known), and for a loop device the backing file the kernel holds ("": not a loop device)
    diskseq: int = 0
    backing: str = ""


class PresenceWatch(Protocol):
    def wait_gone(self, timeout_s: float) -> int | None:
        """Host ns when the drive was seen leaving the bus, or None on timeout."""
        ...

    def wait_back(self, timeout_s: float) -> DriveNode | None:
        """The drive once it is back, or None on timeout. Proven on fresh state, never on an
        event's payload: the node's identity read again now, a new attachment, the same backing
        file for a loop device, no second node with the identity. A node that claims the
        identity and fails the proof raises UnsafeDeviceError (the channel stops)."""
        ...

    def bus_events(self) -> list[tuple[int, str, dict[str, Any]]]:
        """(host ns, kind, detail) of every bus event about this drive since the last call."""
        ...

    def close(self) -> None: ...


class Presence(Protocol):
    def find(self, identity: DriveIdentity) -> DriveNode | None:
        """The drive with this identity if it is on the bus now (read fresh); two nodes with it
        raise UnsafeDeviceError."""
        ...

    def watch(self, identity: DriveIdentity) -> PresenceWatch:
        """Start watching this drive's departures and returns from now on."""
        ...
