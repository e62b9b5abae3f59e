"""Presence through udev (pyudev): drives found by identity properties, waits driven by events.

Identity comes from udev properties (ID_WWN, ID_SERIAL_SHORT, ID_MODEL, ID_REVISION), from sysfs
for NVMe, and from RIG_* properties that a udev rule may set (the simulated drives use that).
A loop device without RIG_* properties is named by its backing file.
"""

from __future__ import annotations

import os
import select
import time
from typing import Any

import pyudev

from rig.bus.base import DriveNode
from rig.errors import UnsafeDeviceError
from rig.identity import DriveIdentity

SKIPPED_PREFIXES = ("ram", "zram", "dm-", "md", "sr", "fd", "nbd")


def _attr(device: pyudev.Device, name: str) -> str:
    try:
        value = device.attributes.get(name)
    except (KeyError, OSError):
        return ""
    return value.decode(errors="replace").strip() if value else ""


def _decode_enc(text: str) -> str:
    """udev's *_ENC properties escape bytes as \\xNN."""
    return text.encode().decode("unicode_escape", errors="replace").strip()


def identity_of(device: pyudev.Device) -> DriveIdentity:
    props = device.properties
    if props.get("RIG_SERIAL"):
        return DriveIdentity(
            props.get("RIG_MODEL", ""),
            props["RIG_SERIAL"],
            props.get("RIG_WWN", ""),
            props.get("RIG_FIRMWARE", ""),
        )
    name = device.sys_name
    if name.startswith("loop"):
        return DriveIdentity("Linux loop device", _attr(device, "loop/backing_file"))
    model = _decode_enc(props.get("ID_MODEL_ENC", "")) or props.get("ID_MODEL", "")
    model = model or _attr(device, "device/model")
    # SCSI disks: udev's ID_SERIAL_SHORT is the VPD 0x83 designator (the NAA WWN when there is
    # one); the unit serial number the drive reports (VPD 0x80, what sg_inq shows) is
    # ID_SCSI_SERIAL
    serial = props.get("ID_SCSI_SERIAL", "") or props.get("ID_SERIAL_SHORT", "")
    serial = serial or _attr(device, "device/serial")
    wwn = props.get("ID_WWN_WITH_EXTENSION", "") or props.get("ID_WWN", "")
    wwn = wwn or _attr(device, "wwid")
    firmware = props.get("ID_REVISION", "") or _attr(device, "device/firmware_rev")
    return DriveIdentity(model, serial, wwn, firmware)


def node_of(device: pyudev.Device) -> DriveNode | None:
    """A DriveNode for a whole-disk block device with media, else None."""
    if device.subsystem != "block" or device.device_type != "disk" or not device.device_node:
        return None
    if device.sys_name.startswith(SKIPPED_PREFIXES):
        return None
    try:
        sectors = int(_attr(device, "size") or 0)
    except ValueError:
        return None
    if sectors == 0:
        return None
    logical = int(_attr(device, "queue/logical_block_size") or 512)
    physical = int(_attr(device, "queue/physical_block_size") or logical)
    return DriveNode(
        identity_of(device),
        device.device_node,
        sectors * 512,
        logical,
        physical,
        transport_of(device),
        _attr(device, "ro") == "1",
    )


def transport_of(device: pyudev.Device) -> str:
    props = device.properties
    if props.get("RIG_TRANSPORT"):
        return str(props["RIG_TRANSPORT"])
    name = device.sys_name
    for prefix, transport in (("nvme", "nvme"), ("loop", "loop"), ("vd", "virtio")):
        if name.startswith(prefix):
            return transport
    bus = props.get("ID_BUS", "")
    if bus == "ata":
        return "sata"
    if bus == "scsi" and "-sas-" in props.get("ID_PATH", ""):
        return "sas"
    return str(bus) or "unknown"


class UdevWatch:
    """An armed udev monitor for one drive: departures and returns from the moment of arming."""

    def __init__(
        self, context: pyudev.Context, identity: DriveIdentity, present: DriveNode | None
    ) -> None:
        self._context = context
        self._identity = identity
        self._monitor = pyudev.Monitor.from_netlink(context)
        self._monitor.filter_by("block")
        self._monitor.start()
        self._devnode = present.devnode if present else ""
        self._events_seen: list[tuple[int, str, dict[str, Any]]] = []

    def _events(self, timeout_s: float) -> pyudev.Device | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._monitor], [], [], left)
            if ready:
                device = self._monitor.poll(timeout=0)
                if device is not None:
                    self._note(device)
                    return device
        return None

    def _note(self, device: pyudev.Device) -> None:
        """Keep every event about this drive or its last node (another drive appearing there is
        worth a line in the store); other devices' events are not this drive's business."""
        if device.device_type != "disk":
            return
        at_old_node = bool(self._devnode) and device.device_node == self._devnode
        present = None if device.action == "remove" else node_of(device)
        # removed, or without media: only its node can say whose it was
        ours = at_old_node if present is None else self._identity.matches(present.identity)
        if not ours and not at_old_node:
            return
        detail: dict[str, Any] = {
            "action": device.action,
            "devnode": device.device_node or "",
            "seqnum": device.sequence_number,  # the kernel's order of uevents
        }
        if not ours and present is not None:
            detail["other_drive"] = present.identity.label()
        self._events_seen.append((time.monotonic_ns(), "udev", detail))

    def bus_events(self) -> list[tuple[int, str, dict[str, Any]]]:
        """The events seen since the watch was armed (and since the last call)."""
        events, self._events_seen = self._events_seen, []
        return events

    def wait_gone(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if self._devnode and not os.path.exists(self._devnode):
                return time.monotonic_ns()
            device = self._events(min(left, 0.5))
            if device is None:
                continue
            gone = device.action == "remove" or (
                device.action == "change" and node_of(device) is None
            )
            if gone and (
                device.device_node == self._devnode or self._identity.matches(identity_of(device))
            ):
                return time.monotonic_ns()
        return None

    def wait_back(self, timeout_s: float) -> DriveNode | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            device = self._events(left)
            if device is None or device.action not in ("add", "change"):
                continue
            node = node_of(device)
            if node is not None and self._identity.matches(node.identity):
                return node
        return None

    def close(self) -> None:
        # pyudev has no explicit stop: dropping the last reference closes the netlink socket
        self._monitor = None


class UdevPresence:
    def __init__(self) -> None:
        self._context = pyudev.Context()

    def candidates(self) -> list[DriveNode]:
        nodes = (node_of(d) for d in self._context.list_devices(subsystem="block", DEVTYPE="disk"))
        return sorted((n for n in nodes if n is not None), key=lambda n: n.devnode)

    def find(self, identity: DriveIdentity) -> DriveNode | None:
        """The one drive with this identity; two nodes with it (a second path to a multipath
        SAS drive, cloned serials, one image attached twice) are refused, never guessed."""
        found = [n for n in self.candidates() if identity.matches(n.identity)]
        if len(found) > 1:
            nodes = ", ".join(n.devnode for n in found)
            raise UnsafeDeviceError(
                f"{len(found)} devices answer to {identity.label()} ({nodes}): refusing to guess"
            )
        return found[0] if found else None

    def watch(self, identity: DriveIdentity) -> UdevWatch:
        return UdevWatch(self._context, identity, self.find(identity))
