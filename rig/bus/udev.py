"""Presence through udev (pyudev): drives found by identity properties, waits driven by events.

Identity comes from udev properties (ID_WWN, ID_SERIAL_SHORT, ID_MODEL, ID_REVISION), from sysfs
for NVMe, and from RIG_* properties that a udev rule may set (the simulated drives use that).
A loop device without RIG_* properties is named by its backing file.

An event only says where to look, never what is there: a queued event may describe a node that
another drive has taken since (events arrive late, duplicated, out of order). Every decision
reads the device again from the udev database and sysfs as they are now (`fresh`), checks that
the database record is about the attachment sysfs shows (its by-diskseq link), and proves which
attachment it is (rig/bus/proof.py: disk sequence number, a loop device's backing file).
"""

from __future__ import annotations

import dataclasses
import os
import select
import time
from typing import Any

import pyudev

from rig.bus import proof
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.errors import UnsafeDeviceError

SKIPPED_PREFIXES = ("ram", "zram", "dm-", "md", "sr", "fd", "nbd")
POLL_S = 0.05  # wait_gone: fresh look at the node at least this often, event or not
SCAN_S = 0.5  # wait_back: fresh scan of every disk at least this often (a late or lost event)


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
        proof.diskseq(device.sys_name),
    )


def fresh(context: pyudev.Context, sys_path: str) -> pyudev.Device | None:
    """The device at `sys_path` as the udev database and sysfs describe it now, or None if it
    is gone. (What an event carries is the database as it was when udev sent it.)"""
    try:
        return pyudev.Devices.from_sys_path(context, sys_path)
    except pyudev.DeviceNotFoundError:
        return None


def record_is_current(device: pyudev.Device, node: DriveNode) -> bool:
    """Whether the udev database record (the identity properties) was made for the attachment
    that sysfs shows now: udev (250+) links every disk as /dev/disk/by-diskseq/<diskseq>. A
    record of the node's previous occupant, not yet replaced, names another number. Without the
    link (older udev) this cannot be told, and the other proofs stand alone. A loop device
    without RIG_* properties is named from sysfs, not from its record: nothing to check."""
    if device.sys_name.startswith("loop") and not device.properties.get("RIG_SERIAL"):
        return True
    links = str(device.properties.get("DEVLINKS", "")).split()
    seqs = [link.rsplit("/", 1)[1] for link in links if "/disk/by-diskseq/" in link]
    return not seqs or not node.diskseq or str(node.diskseq) in seqs


def proven(device: pyudev.Device | None, identity: DriveIdentity) -> DriveNode | None:
    """The node of a freshly read device if it answers to `identity` on a current udev record,
    with its attachment read from the kernel (the descriptor's disk sequence number must be the
    one sysfs showed, and for a loop device the backing file it holds); None otherwise."""
    node = node_of(device) if device is not None else None
    if device is None or node is None or not identity.matches(node.identity):
        return None
    if not record_is_current(device, node):
        return None
    seq, backing = proof.attachment(node.devnode)
    if node.diskseq and seq != node.diskseq:
        return None  # the node changed under us (or cannot be opened now): not this one
    if device.sys_name.startswith("loop") and not backing:
        return None  # a loop device without a backing file is no drive
    return dataclasses.replace(node, backing=backing)


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
    """An armed udev monitor for one drive: departures and returns from the moment of arming.

    The monitor's events wake the waits up; what they decide is read fresh each time."""

    def __init__(
        self, presence: UdevPresence, identity: DriveIdentity, present: DriveNode | None
    ) -> None:
        self._presence = presence
        self._context = presence.context
        self._identity = identity
        self._monitor = pyudev.Monitor.from_netlink(self._context)
        self._monitor.filter_by("block")
        self._monitor.start()
        self._present = present  # the attachment the drive had when the watch was armed
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
        worth a line in the store); other devices' events are not this drive's business. (The
        record of what the events said: nothing is decided on it.)"""
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

    def _left(self) -> bool:
        """Whether the attachment armed on is gone, from sysfs now: its node removed, its medium
        gone, or the node holding another attachment (a new disk sequence number)."""
        if self._present is None:
            return self._presence.find(self._identity) is None
        name = os.path.basename(self._present.devnode)
        try:
            with open(f"/sys/class/block/{name}/size") as handle:
                sectors = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            return True
        seq = proof.diskseq(name)
        return sectors == 0 or bool(self._present.diskseq and seq != self._present.diskseq)

    def wait_gone(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if self._left():
                return time.monotonic_ns()
            self._events(min(left, POLL_S))  # an event, or the poll interval: look again
        return None

    def wait_back(self, timeout_s: float) -> DriveNode | None:
        deadline = time.monotonic() + timeout_s
        next_scan = time.monotonic() + SCAN_S
        while (left := deadline - time.monotonic()) > 0:
            device = self._events(min(left, SCAN_S))
            if device is not None and device.action != "remove":
                node = self._returned(fresh(self._context, device.sys_path))
                if node is not None:
                    return node
            if time.monotonic() >= next_scan:  # a return whose event is late or was lost
                next_scan = time.monotonic() + SCAN_S
                node = self._presence.find(self._identity)
                if node is not None and self._is_return(node):
                    return node
        return None

    def _returned(self, device: pyudev.Device | None) -> DriveNode | None:
        node = proven(device, self._identity)
        if node is None or not self._is_return(node):
            return None
        # the identity must name one device on the bus now (a clone, a second path: refused)
        if self._presence.find(self._identity) is None:
            return None  # gone again already
        return node

    def _is_return(self, node: DriveNode) -> bool:
        """A node that answers to the identity is the drive back when it is a new attachment;
        the same attachment as before the cut never left. One backed by another file than the
        drive's is not the drive: doubt (UnsafeDeviceError)."""
        before = self._present
        if before is None:
            return True
        if before.backing and node.backing != before.backing:
            raise UnsafeDeviceError(
                f"{node.devnode} answers to {self._identity.label()} but is backed by"
                f" {node.backing or 'no file'}, not by the drive's {before.backing}"
            )
        return not (node.diskseq and node.diskseq == before.diskseq)

    def close(self) -> None:
        # pyudev has no explicit stop: dropping the last reference closes the netlink socket
        self._monitor = None


class UdevPresence:
    def __init__(self) -> None:
        self.context = pyudev.Context()

    def candidates(self) -> list[DriveNode]:
        nodes = (node_of(d) for d in self.context.list_devices(subsystem="block", DEVTYPE="disk"))
        return sorted((n for n in nodes if n is not None), key=lambda n: n.devnode)

    def find(self, identity: DriveIdentity) -> DriveNode | None:
        """The one drive with this identity, read fresh from the udev database and sysfs, with
        its attachment proven (`proven`); two nodes with it (a second path to a multipath SAS
        drive, cloned serials, one image attached twice, a foreign image given the identity) are
        refused, never guessed."""
        claims = []
        for device in self.context.list_devices(subsystem="block", DEVTYPE="disk"):
            node = node_of(device)
            # a record older than the node's attachment says nothing about what is there now
            if node and identity.matches(node.identity) and record_is_current(device, node):
                claims.append(device)
        if len(claims) > 1:
            nodes = ", ".join(sorted(str(d.device_node) for d in claims))
            raise UnsafeDeviceError(
                f"{len(claims)} devices answer to {identity.label()} ({nodes}): refusing to guess"
            )
        return proven(claims[0], identity) if claims else None

    def watch(self, identity: DriveIdentity) -> UdevWatch:
        return UdevWatch(self, identity, self.find(identity))
