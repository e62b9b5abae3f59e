"""Where a drive sits on the bus, whether its slot can hot-plug, and bus recovery after a cut.

A drive in a hot-plug slot leaves the bus when its power goes and comes back by itself. One in a
slot that cannot hot-plug (many M.2 slots, some SATA controllers) does neither: the host keeps a
stale node that no longer answers, and after power-on nothing tells the host the drive is back.
An operator then removes the stale device and rescans its bus. This module does what the
operator would, for a campaign that asks for it (`[station] recover = "rescan"`):

- `locate(devnode)`: the drive's bus location from sysfs: for NVMe its PCI function and the bridge
  above it; for SATA/SAS/SCSI its SCSI device (H:C:T:L) and host; and whether the slot can
  hot-plug (`hotplug`: True, False, or None when sysfs cannot say) and why;
- `RecoveringPresence` wraps the udev presence of a station:
  - departure: a drive in a slot that cannot hot-plug has left when its node stops answering
    reads (`bus_stale`), not only when the node goes (which such a host may never do);
  - return: a stale node that answers again is back; with `recover = "rescan"`, a drive not back
    within its transport's wait after power-on is recovered: remove the stale device (PCI
    function `remove`, SCSI device `delete`), wait for its node to go, rescan the bridge (or the
    PCI root) or the SCSI host (`scan` of its channel, target and LUN), then wait for the drive
    by identity as before. Each step is a `bus_recover` event of the cycle.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rig.bus.ready import read_probe
from rig.config.tables import Table
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode, Presence, PresenceWatch
from rig.errors import UserError

RECOVER_MODES = ("none", "rescan")
# Power-on to "not back by itself": a drive past this is recovered (rescan). NVMe links train and
# the controller is ready in seconds (CAP.TO allows more); SATA/SAS drives spin up and a SAS
# expander re-discovers them. Campaigns may set their own ([station].recover_wait_s).
DEFAULT_WAIT_S = {"nvme": 10.0, "sata": 10.0, "sas": 20.0, "scsi": 10.0}
OTHER_WAIT_S = 10.0
SLICE_S = 0.5  # how often a stale node is asked whether it answers again
PROBE_TIMEOUT_S = 5.0  # a read a stale drive does not answer within this is "not answering"
STEP_TIMEOUT_S = 60.0  # a sysfs write of a recovery step (a PCI remove waits for its driver)
NODE_GONE_TIMEOUT_S = 15.0

PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
SCSI_ADDRESS = re.compile(r"^(\d+):(\d+):(\d+):(\d+)$")
AHCI_PORT_HPCP = 1 << 18  # PxCMD: hot plug capable port
AHCI_PORT_ESP = 1 << 21  # PxCMD: external SATA port
VIRTIO_SCSI_F_HOTPLUG = 1
PCI_CAP_EXP = 0x10
PCI_EXP_FLAGS_SLOT = 0x0100  # Express Capabilities: slot implemented
PCI_EXP_SLTCAP_HPC = 0x40  # Slot Capabilities: hot-plug capable


@dataclass(frozen=True)
class BusLocation:
    """Where a drive sits. `device` is what recovery removes, `rescan` what it writes to and
    `rescan_value` what it writes there."""

    kind: str  # "pci" (NVMe) or "scsi" (SATA, SAS, other SCSI)
    address: str  # PCI function (0000:02:00.0) or H:C:T:L
    device: str  # sysfs directory of the PCI function or the SCSI device
    rescan: str  # sysfs file: the bridge's or root's rescan, or the SCSI host's scan
    rescan_value: str
    hotplug: bool | None
    why: str  # where `hotplug` came from, for people (`rig drives`)

    def remove_file(self) -> str:
        return os.path.join(self.device, "remove" if self.kind == "pci" else "delete")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def locate(devnode: str, sysfs: str = "/sys") -> BusLocation | None:
    """The bus location of the block device `devnode` (None: not on a PCI or SCSI bus, such as a
    loop device)."""
    name = os.path.basename(os.path.realpath(devnode))
    block = os.path.join(sysfs, "class", "block", name)
    if not os.path.exists(block):
        return None
    if name.startswith("nvme"):
        return _locate_nvme(block, sysfs)
    device = os.path.realpath(os.path.join(block, "device"))
    if SCSI_ADDRESS.match(os.path.basename(device)):
        return _locate_scsi(device, sysfs)
    return None


def _ancestor(path: str, pattern: re.Pattern[str]) -> str:
    while path not in ("", "/"):
        if pattern.match(os.path.basename(path)):
            return path
        path = os.path.dirname(path)
    return ""


def _locate_nvme(block: str, sysfs: str) -> BusLocation | None:
    # a namespace's `device` is its controller; with native multipath the block device is the
    # subsystem's head and its paths (nvmeXcYnZ) lead to the controllers
    candidates = [os.path.join(block, "device")]
    paths = os.path.join(block, "multipath")
    if os.path.isdir(paths):
        candidates += [os.path.join(paths, p, "device") for p in sorted(os.listdir(paths))]
    function = ""
    for candidate in candidates:
        function = _ancestor(os.path.realpath(candidate), PCI_ADDRESS)
        if function:
            break
    if not function:
        return None
    parent = os.path.dirname(function)
    if PCI_ADDRESS.match(os.path.basename(parent)):
        rescan = os.path.join(parent, "rescan")
    else:  # on a root bus: only a rescan of everything reaches it
        rescan = os.path.join(sysfs, "bus", "pci", "rescan")
    address = os.path.basename(function)
    hotplug, why = _pci_hotplug(address, parent, sysfs)
    return BusLocation("pci", address, function, rescan, "1", hotplug, why)


def _pci_hotplug(address: str, bridge: str, sysfs: str) -> tuple[bool | None, str]:
    """A slot a hot-plug driver manages (pciehp, acpiphp: it has `power`), or a PCIe port whose
    Slot Capabilities say hot-plug capable (even with no driver loaded)."""
    slots = os.path.join(sysfs, "bus", "pci", "slots")
    bus_device = address.rsplit(".", 1)[0]
    if os.path.isdir(slots):
        for slot in sorted(os.listdir(slots)):
            where = os.path.join(slots, slot)
            managed = os.path.exists(os.path.join(where, "power"))
            if managed and _read(os.path.join(where, "address")) == bus_device:
                module = os.path.basename(os.path.realpath(os.path.join(where, "module")))
                return True, f"hot-plug slot {slot} ({module or 'driver'})"
    if not PCI_ADDRESS.match(os.path.basename(bridge)):
        return False, "on a root bus (no hot-plug slot)"
    slot_caps = _pcie_slot_caps(os.path.join(bridge, "config"))
    if slot_caps is None:
        return None, "bridge config space not readable"
    if slot_caps & PCI_EXP_SLTCAP_HPC:
        return True, f"port {os.path.basename(bridge)} is hot-plug capable (no driver manages it)"
    return False, f"port {os.path.basename(bridge)} is not hot-plug capable"


def _pcie_slot_caps(config: str) -> int | None:
    """Slot Capabilities of a PCIe port from its config space (0 when no slot is implemented)."""
    try:
        with open(config, "rb") as handle:
            space = handle.read(256)
    except OSError:
        return None
    if len(space) < 64:
        return None
    pointer = space[0x34] & 0xFC
    for _ in range(48):  # a capability list is short; a loop in a broken one must end
        if pointer < 0x40 or pointer + 0x18 > len(space):
            return None
        if space[pointer] == PCI_CAP_EXP:
            flags = int.from_bytes(space[pointer + 2 : pointer + 4], "little")
            if not flags & PCI_EXP_FLAGS_SLOT:
                return 0
            return int.from_bytes(space[pointer + 0x14 : pointer + 0x18], "little")
        pointer = space[pointer + 1] & 0xFC
    return None


def _locate_scsi(device: str, sysfs: str) -> BusLocation:
    host_dir = _ancestor(device, re.compile(r"^host\d+$"))
    host = os.path.basename(host_dir)
    match = SCSI_ADDRESS.match(os.path.basename(device))
    assert match is not None
    channel, target, lun = match[2], match[3], match[4]
    scan = os.path.join(sysfs, "class", "scsi_host", host, "scan")
    hotplug, why = _scsi_hotplug(device, host, sysfs)
    address = os.path.basename(device)
    return BusLocation("scsi", address, device, scan, f"{channel} {target} {lun}", hotplug, why)


def _scsi_hotplug(device: str, host: str, sysfs: str) -> tuple[bool | None, str]:
    parts = device.split(os.sep)
    if any(p.startswith(("end_device-", "port-")) for p in parts):
        return True, "SAS (hot-plug by design)"
    if any(re.match(r"^ata\d+$", p) for p in parts):
        text = _read(os.path.join(sysfs, "class", "scsi_host", host, "ahci_port_cmd"))
        if not text:
            return None, "libata port (not AHCI: capability unknown)"
        cmd = int(text, 16)
        if cmd & (AHCI_PORT_HPCP | AHCI_PORT_ESP):
            return True, "AHCI port is hot-plug capable (PxCMD.HPCP/ESP)"
        return False, "AHCI port is not hot-plug capable (PxCMD.HPCP and ESP clear)"
    virtio = _ancestor(device, re.compile(r"^virtio\d+$"))
    if virtio:
        features = _read(os.path.join(virtio, "features"))
        if len(features) > VIRTIO_SCSI_F_HOTPLUG:
            if features[VIRTIO_SCSI_F_HOTPLUG] == "1":
                return True, "virtio-scsi with hot-plug events"
            return False, "virtio-scsi without hot-plug events"
    return None, "SCSI host (capability unknown)"


def hotplug_label(location: BusLocation | None) -> str:
    """'yes', 'no', '?' or '-' (not on a PCI or SCSI bus), for `rig drives`."""
    if location is None:
        return "-"
    return {True: "yes", False: "no", None: "?"}[location.hotplug]


def transport_of(location: BusLocation | None, node: DriveNode) -> str:
    return "nvme" if location is not None and location.kind == "pci" else node.transport


# -- presence with recovery ----------------------------------------------------------------------
Event = tuple[int, str, dict[str, Any]]
ReadProbe = Callable[[DriveNode], str]  # '' when the drive answered a read


def _timed(action: Callable[[], str], timeout_s: float) -> str:
    """Run `action` on a helper thread; its answer, or a timeout note (the thread is left)."""
    box: list[str] = []
    thread = threading.Thread(target=lambda: box.append(action()), daemon=True)
    thread.start()
    thread.join(timeout_s)
    return box[0] if box else f"no answer within {timeout_s:g} s"


def _write(path: str, value: str) -> str:
    try:
        with open(path, "w", encoding="ascii") as handle:
            handle.write(value)
        return ""
    except OSError as error:
        return f"{path}: {error.strerror or error}"


class RecoveringWatch:
    def __init__(
        self,
        inner: PresenceWatch,
        presence: Presence,
        identity: DriveIdentity,
        node: DriveNode | None,
        location: BusLocation | None,
        mode: str,
        wait_s: float,
        probe: ReadProbe,
    ) -> None:
        self._inner = inner
        self._presence = presence
        self._identity = identity
        self._node = node
        self._location = location
        self._mode = mode
        self._wait_s = wait_s
        self._probe = probe
        self._stale = False
        self._removed = False  # recovery removed the stale device
        self._events: list[Event] = []

    def _answer(self, node: DriveNode) -> str:
        return _timed(lambda: self._probe(node), PROBE_TIMEOUT_S)

    def wait_gone(self, timeout_s: float) -> int | None:
        fixed = self._location is not None and self._location.hotplug is False
        if not fixed or self._node is None:
            return self._inner.wait_gone(timeout_s)
        node = self._node
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            gone = self._inner.wait_gone(min(left, SLICE_S))
            if gone is not None:
                return gone
            answer = self._answer(node) if os.path.exists(node.devnode) else ""
            if answer:  # still there, no longer answering: gone as far as the host can tell
                self._stale = True
                now = time.monotonic_ns()
                self._events.append((now, "bus_stale", {"devnode": node.devnode, "read": answer}))
                return now
        return None

    def wait_back(self, timeout_s: float) -> DriveNode | None:
        deadline = time.monotonic() + timeout_s
        first = min(self._wait_s, timeout_s) if self._mode == "rescan" else timeout_s
        node = self._wait_back(first)
        if node is not None or self._mode != "rescan" or self._location is None:
            return node
        self._recover(self._location)
        return self._wait_back(deadline - time.monotonic())

    def _wait_back(self, timeout_s: float) -> DriveNode | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            node = self._inner.wait_back(min(left, SLICE_S) if self._stale else left)
            if node is not None and self._accept(node):
                return node
            if self._stale and self._stale_answers():  # the stale node answers again: back
                found = self._presence.find(self._identity)
                if found is not None:
                    self._events.append((time.monotonic_ns(), "bus_stale_answers", {}))
                    return found
        return None

    def _accept(self, node: DriveNode) -> bool:
        """A udev event of the stale node itself is no return (udev sends `change` whenever a
        writer closes a disk, the rig's own close included): that node is back only if it
        answers reads. A new device, or any after recovery removed the stale one, is."""
        stale = self._node
        if not self._stale or stale is None or self._removed or node.devnode != stale.devnode:
            return True
        return not self._answer(node)

    def _stale_answers(self) -> bool:
        stale = self._node
        return stale is not None and os.path.exists(stale.devnode) and not self._answer(stale)

    def _recover(self, where: BusLocation) -> None:
        """Remove the stale device, wait for its node to go, rescan: each step an event."""

        def step(name: str, detail: dict[str, Any], error: str) -> None:
            detail = {"step": name, **detail, "ok": not error}
            if error:
                detail["error"] = error
            self._events.append((time.monotonic_ns(), "bus_recover", detail))

        if os.path.exists(where.device):
            path = where.remove_file()
            step("remove", {"path": path}, _timed(lambda: _write(path, "1"), STEP_TIMEOUT_S))
            stale = self._node.devnode if self._node is not None else ""
            deadline = time.monotonic() + NODE_GONE_TIMEOUT_S
            while stale and os.path.exists(stale) and time.monotonic() < deadline:
                time.sleep(0.05)
            if stale:
                still = os.path.exists(stale)
                step("node_gone", {"devnode": stale}, "node still present" if still else "")
                self._removed = not still
        else:
            step("remove", {"path": where.device}, "")  # the host had removed it already

        def rescan() -> str:
            return _write(where.rescan, where.rescan_value)

        detail = {"path": where.rescan, "value": where.rescan_value}
        step("rescan", detail, _timed(rescan, STEP_TIMEOUT_S))

    def bus_events(self) -> list[Event]:
        events = self._inner.bus_events() + self._events
        self._events = []
        return sorted(events, key=lambda e: e[0])

    def close(self) -> None:
        self._inner.close()


class RecoveringPresence:
    """A station's presence, with departures of stale nodes and (optionally) bus recovery."""

    def __init__(
        self,
        inner: Presence,
        mode: str = "none",
        waits: dict[str, float] | None = None,
        *,
        sysfs: str = "/sys",
        probe: ReadProbe = read_probe,
    ) -> None:
        if mode not in RECOVER_MODES:
            raise ValueError(f"recover mode {mode!r}")
        self.inner = inner
        self.mode = mode
        self.waits = {**DEFAULT_WAIT_S, **(waits or {})}
        self.sysfs = sysfs
        self.probe = probe

    def find(self, identity: DriveIdentity) -> DriveNode | None:
        return self.inner.find(identity)

    def watch(self, identity: DriveIdentity) -> RecoveringWatch:
        inner = self.inner.watch(identity)
        node = self.inner.find(identity)
        location = locate(node.devnode, self.sysfs) if node is not None else None
        transport = transport_of(location, node) if node is not None else ""
        wait_s = self.waits.get(transport, OTHER_WAIT_S)
        return RecoveringWatch(inner, self, identity, node, location, self.mode, wait_s, self.probe)


def settings(station_t: Table) -> tuple[str, tuple[tuple[str, float], ...]]:
    """[station].recover (RECOVER_MODES) and [station].recover_wait_s: seconds after power-on
    before a drive that is not back is recovered; one number for every transport, or a table of
    them (nvme, sata, sas, scsi)."""
    mode = station_t.choice("recover", RECOVER_MODES)
    if "recover_wait_s" not in station_t.data:
        return mode, ()
    value = station_t.get("recover_wait_s", (int, float, dict))
    table = value if isinstance(value, dict) else dict.fromkeys(DEFAULT_WAIT_S, value)
    waits = []
    for transport, seconds in table.items():
        if transport not in DEFAULT_WAIT_S:
            raise UserError(
                f"campaign: [station].recover_wait_s: '{transport}' is not a transport"
                f" ({', '.join(DEFAULT_WAIT_S)})"
            )
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise UserError(f"campaign: [station].recover_wait_s.{transport} must be seconds")
        if not 0 <= seconds <= 3600:
            raise UserError(f"campaign: [station].recover_wait_s.{transport} is outside 0..3600")
        waits.append((transport, float(seconds)))
    return mode, tuple(waits)
