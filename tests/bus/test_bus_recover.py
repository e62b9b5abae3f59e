"""Bus location, hot-plug capability and bus recovery (rig/bus/recover.py) on sysfs trees laid out
as the guest kernel showed them (tests/guest runs the same code against the real ones): an NVMe
function in an acpiphp slot, one behind a root port that cannot hot-plug, one on the root bus,
a SATA disk on an AHCI port, a SCSI disk on virtio-scsi, a SAS disk behind an expander.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rig.bus.recover import RecoveringPresence, hotplug_label, locate
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode

FIXED_PORT = "0000:00:19.0"
HOTPLUG_PORT = "0000:00:18.0"


def pcie_port_config(slot_implemented: bool, hot_plug_capable: bool) -> bytes:
    """256 bytes of a PCIe root port's config space: a PM capability, then the Express one."""
    space = bytearray(256)
    space[0x34] = 0x40
    space[0x40:0x42] = bytes([0x01, 0x60])  # power management, next at 0x60
    space[0x60:0x62] = bytes([0x10, 0x00])  # PCI Express, last
    flags = 0x0042 | (0x0100 if slot_implemented else 0)  # v2, root port
    space[0x62:0x64] = flags.to_bytes(2, "little")
    slot_caps = 0x00080000 | (0x40 if hot_plug_capable else 0)
    space[0x74:0x78] = slot_caps.to_bytes(4, "little")
    return bytes(space)


class Sysfs:
    """A sysfs tree in a temporary directory: devices, class links, slots."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for sub in ("class/block", "class/scsi_host", "bus/pci/slots", "bus/pci/devices"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "bus/pci/rescan").write_text("")

    def path(self, rel: str) -> Path:
        path = self.root / rel
        path.mkdir(parents=True, exist_ok=True)
        return path

    def block(self, name: str, device: Path) -> None:
        block = self.path(f"devices/virtual-block/{name}")
        (block / "device").symlink_to(device)
        (self.root / "class/block" / name).symlink_to(block)

    def nvme(self, name: str, function_rel: str) -> Path:
        function = self.path(function_rel)
        (function / "remove").write_text("")
        controller = self.path(f"{function_rel}/nvme/{name[:5]}")
        self.block(name, controller)
        return function

    def scsi(self, name: str, device_rel: str, host: str) -> Path:
        device = self.path(device_rel)
        (device / "delete").write_text("")
        self.block(name, device)
        host_dir = self.path(device_rel.split(f"/{host}/")[0] + f"/{host}")
        (host_dir / "scan").write_text("")
        (self.root / "class/scsi_host" / host).symlink_to(host_dir)
        return device

    def slot(self, name: str, address: str, module: str | None) -> None:
        slot = self.path(f"bus/pci/slots/{name}")
        (slot / "address").write_text(address + "\n")
        if module is not None:  # managed by a hot-plug driver
            (slot / "power").write_text("1\n")
            self.path(f"module/{module}")
            (slot / "module").symlink_to(self.root / "module" / module)


@pytest.fixture
def sysfs(tmp_path: Path) -> Sysfs:
    tree = Sysfs(tmp_path / "sys")
    tree.path(f"devices/pci0000:00/{FIXED_PORT}")
    (tree.root / f"devices/pci0000:00/{FIXED_PORT}/rescan").write_text("")
    (tree.root / f"devices/pci0000:00/{FIXED_PORT}/config").write_bytes(
        pcie_port_config(slot_implemented=True, hot_plug_capable=False)
    )
    tree.path(f"devices/pci0000:00/{HOTPLUG_PORT}")
    (tree.root / f"devices/pci0000:00/{HOTPLUG_PORT}/rescan").write_text("")
    (tree.root / f"devices/pci0000:00/{HOTPLUG_PORT}/config").write_bytes(
        pcie_port_config(slot_implemented=True, hot_plug_capable=False)  # ACPI hot-plug: no HPC
    )
    tree.nvme("nvme0n1", f"devices/pci0000:00/{HOTPLUG_PORT}/0000:01:00.0")
    tree.slot("0", "0000:01:00", "acpiphp")
    tree.nvme("nvme1n1", f"devices/pci0000:00/{FIXED_PORT}/0000:02:00.0")
    tree.nvme("nvme2n1", "devices/pci0000:00/0000:00:05.0")
    tree.scsi("sda", "devices/pci0000:00/0000:00:1f.2/ata4/host4/target4:0:0/4:0:0:0", "host4")
    (tree.root / "class/scsi_host/host4/ahci_port_cmd").write_text("c011\n")
    tree.scsi("sdb", "devices/pci0000:00/0000:00:1c.0/virtio9/host0/target0:0:2/0:0:2:0", "host0")
    (tree.root / "devices/pci0000:00/0000:00:1c.0/virtio9/features").write_text("0110" + "0" * 60)
    tree.scsi(
        "sdc",
        "devices/pci0000:00/0000:03:00.0/host7/port-7:1/end_device-7:1/target7:0:1/7:0:1:0",
        "host7",
    )
    return tree


def test_locations_and_hot_plug_capability_of_each_kind_of_slot(sysfs: Sysfs) -> None:
    root = str(sysfs.root)
    hot = locate("/dev/nvme0n1", root)
    assert hot is not None and hot.kind == "pci" and hot.address == "0000:01:00.0"
    assert (hot.hotplug, hot.why) == (True, "hot-plug slot 0 (acpiphp)")
    assert hot.rescan == f"{root}/devices/pci0000:00/{HOTPLUG_PORT}/rescan"
    fixed = locate("/dev/nvme1n1", root)
    assert fixed is not None and fixed.hotplug is False
    assert fixed.why == f"port {FIXED_PORT} is not hot-plug capable"
    assert fixed.remove_file() == f"{root}/devices/pci0000:00/{FIXED_PORT}/0000:02:00.0/remove"
    integrated = locate("/dev/nvme2n1", root)
    assert integrated is not None and integrated.hotplug is False
    assert integrated.rescan == f"{root}/bus/pci/rescan"  # a root bus: rescan everything
    sata = locate("/dev/sda", root)
    assert sata is not None and (sata.kind, sata.address, sata.hotplug) == (
        "scsi",
        "4:0:0:0",
        False,
    )
    assert sata.rescan == f"{root}/class/scsi_host/host4/scan" and sata.rescan_value == "0 0 0"
    assert sata.remove_file().endswith("/4:0:0:0/delete")
    virtio = locate("/dev/sdb", root)
    assert virtio is not None and virtio.hotplug is True and virtio.rescan_value == "0 2 0"
    sas = locate("/dev/sdc", root)
    assert sas is not None and sas.hotplug is True and sas.why.startswith("SAS")
    assert locate("/dev/loop5", root) is None
    assert [hotplug_label(locate(f"/dev/{n}", root)) for n in ("nvme0n1", "sda", "loop5")] == [
        "yes",
        "no",
        "-",
    ]


def test_a_port_that_reports_hot_plug_capability_counts_without_a_driver(sysfs: Sysfs) -> None:
    config = sysfs.root / f"devices/pci0000:00/{FIXED_PORT}/config"
    config.write_bytes(pcie_port_config(slot_implemented=True, hot_plug_capable=True))
    where = locate("/dev/nvme1n1", str(sysfs.root))
    assert where is not None and where.hotplug is True and "no driver manages it" in where.why
    (sysfs.root / "class/scsi_host/host4/ahci_port_cmd").write_text("4c011\n")  # HPCP
    sata = locate("/dev/sda", str(sysfs.root))
    assert sata is not None and sata.hotplug is True
    config.write_bytes(b"\0" * 16)  # a config space we cannot parse: unknown, never a guess
    assert locate("/dev/nvme1n1", str(sysfs.root)).hotplug is None  # type: ignore[union-attr]


# -- presence with recovery ----------------------------------------------------------------------


class FakeWatch:
    def __init__(self, presence: FakePresence) -> None:
        self.presence = presence

    def wait_gone(self, timeout_s: float) -> int | None:
        return self.presence.gone_ns if self.presence.gone_ns else _sleep(timeout_s)

    def wait_back(self, timeout_s: float) -> DriveNode | None:
        if self.presence.back is not None and self.presence.back():
            return self.presence.node
        return _sleep(timeout_s)

    def bus_events(self) -> list[tuple[int, str, dict[str, Any]]]:
        return [(1, "udev", {"action": "remove"})]

    def close(self) -> None:
        pass


def _sleep(timeout_s: float) -> None:
    time.sleep(min(timeout_s, 0.01))


class FakePresence:
    """The udev presence as a cycle sees it: the drive leaves (gone_ns) and comes back when
    `back()` says so."""

    def __init__(self, node: DriveNode) -> None:
        self.node = node
        self.gone_ns = 0
        self.back: Any = None

    def find(self, identity: DriveIdentity) -> DriveNode | None:
        return self.node

    def watch(self, identity: DriveIdentity) -> FakeWatch:
        return FakeWatch(self)


IDENT = DriveIdentity("QEMU NVMe Ctrl", "GFN0001")


def fixed_nvme(tmp_path: Path) -> tuple[FakePresence, Path]:
    """The fixed-slot NVMe of the fixture, with a device node that exists (a plain file)."""
    node_file = tmp_path / "nvme1n1"
    node_file.write_text("")
    node = DriveNode(IDENT, str(node_file), 1 << 28, 4096, 4096, "nvme")
    return FakePresence(node), node_file


def test_a_fixed_slot_drive_that_stops_answering_has_left_and_rescan_brings_it_back(
    sysfs: Sysfs, tmp_path: Path
) -> None:
    fake, node_file = fixed_nvme(tmp_path)
    presence = RecoveringPresence(
        fake, "rescan", {"nvme": 0.05}, sysfs=str(sysfs.root), probe=lambda n: "read: EIO"
    )
    watch = presence.watch(IDENT)
    gone = watch.wait_gone(2.0)
    assert gone is not None  # the node is still there, but no longer answers reads
    removed = sysfs.root / f"devices/pci0000:00/{FIXED_PORT}/0000:02:00.0/remove"
    rescan = sysfs.root / f"devices/pci0000:00/{FIXED_PORT}/rescan"

    def kernel() -> None:  # the remove takes the node away
        while removed.read_text() != "1":
            time.sleep(0.01)
        node_file.unlink()

    threading.Thread(target=kernel, daemon=True).start()
    fake.back = lambda: rescan.read_text() == "1"  # back once its bridge was rescanned
    assert watch.wait_back(5.0) is fake.node
    assert removed.read_text() == "1" and rescan.read_text() == "1"
    events = watch.bus_events()
    kinds = [(kind, d.get("step")) for _, kind, d in events]
    assert kinds[0] == ("udev", None)
    assert ("bus_stale", None) in kinds
    assert [s for k, s in kinds if k == "bus_recover"] == ["remove", "node_gone", "rescan"]
    assert all(d["ok"] for _, k, d in events if k == "bus_recover")


def test_without_recovery_a_drive_that_needs_a_rescan_never_returns(
    sysfs: Sysfs, tmp_path: Path
) -> None:
    fake, _ = fixed_nvme(tmp_path)
    presence = RecoveringPresence(fake, "none", sysfs=str(sysfs.root), probe=lambda n: "EIO")
    watch = presence.watch(IDENT)
    assert watch.wait_gone(2.0) is not None
    rescan = sysfs.root / f"devices/pci0000:00/{FIXED_PORT}/rescan"
    fake.back = lambda: rescan.read_text() == "1"
    assert watch.wait_back(0.3) is None
    assert rescan.read_text() == "" and not any(
        k == "bus_recover" for _, k, _ in watch.bus_events()
    )


def test_a_stale_node_that_answers_again_is_back_without_recovery(
    sysfs: Sysfs, tmp_path: Path
) -> None:
    fake, _ = fixed_nvme(tmp_path)
    answers = iter(["EIO", "EIO", ""])  # gone, still gone, then it reads again
    presence = RecoveringPresence(
        fake, "none", sysfs=str(sysfs.root), probe=lambda n: next(answers, "")
    )
    watch = presence.watch(IDENT)
    assert watch.wait_gone(2.0) is not None
    assert watch.wait_back(3.0) is fake.node
    assert [k for _, k, _ in watch.bus_events()][-1] == "bus_stale_answers"


def test_hot_plug_slots_wait_for_removal_only(sysfs: Sysfs, tmp_path: Path) -> None:
    """A drive in a hot-plug slot that still answers has not left: the udev watch decides
    (the rig then reports power that did not go off), never a read probe."""
    node = DriveNode(IDENT, "/dev/nvme0n1", 1 << 28, 4096, 4096, "nvme")
    fake = FakePresence(node)
    probed = []
    presence = RecoveringPresence(
        fake, "rescan", sysfs=str(sysfs.root), probe=lambda n: probed.append(n) or "EIO"
    )
    assert presence.watch(IDENT).wait_gone(0.2) is None and not probed


def test_a_change_event_of_the_stale_node_is_no_return(sysfs: Sysfs, tmp_path: Path) -> None:
    """udev sends `change` when a writer closes a disk (the rig closes its target after a cut):
    for a stale node that still does not answer, that is not the drive coming back (seen in the
    guest: the rig then checked a drive that failed every read, and reported read errors)."""
    fake, _ = fixed_nvme(tmp_path)
    probed = []
    presence = RecoveringPresence(
        fake, "none", sysfs=str(sysfs.root), probe=lambda n: probed.append(n) or "EIO"
    )
    watch = presence.watch(IDENT)
    assert watch.wait_gone(2.0) is not None
    fake.back = lambda: True  # udev keeps reporting the stale node (change events)
    assert watch.wait_back(0.5) is None and len(probed) > 1
