"""udev identity of disks as a real kernel and udev present them: properties captured in the QEMU
guest (tests/guest) for a SCSI disk with a WWN, a SATA disk and QEMU's NVMe, read by the
production code and cross-checked with the same devices' real smartctl answers
(fixtures/recorded/qemu/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.drive.identity import DriveIdentity
from rig.health import crosscheck
from rig.health.smart import parse_smartctl_json
from tests.bus.test_udev_identity import udev_view

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "recorded" / "qemu"

# `udevadm info -q property` in the guest (Debian 12 udev 252, kernel 6.1), trimmed to what the
# identity code reads; DEVPATH as the guest's sysfs showed it.
SCSI_DISK = {
    "DEVPATH": "/devices/pci0000:00/0000:00:1c.0/virtio9/host0/target0:0:2/0:0:2:0/block/sdb",
    "DEVNAME": "/dev/sdb",
    "ID_SCSI": "1",
    "ID_VENDOR": "RIGSIM",
    "ID_MODEL": "plp",
    "ID_MODEL_ENC": r"plp\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20",
    "ID_REVISION": "2.5+",
    "ID_SERIAL": "35000c500000a0203",
    "ID_SERIAL_SHORT": "5000c500000a0203",
    "ID_WWN": "0x5000c500000a0203",
    "ID_WWN_WITH_EXTENSION": "0x5000c500000a0203",
    "ID_SCSI_SERIAL": "GSC0001",
    "ID_BUS": "scsi",
    "ID_PATH": "pci-0000:00:1c.0-scsi-0:0:2:0",
}
SATA_DISK = {
    "DEVPATH": "/devices/pci0000:00/0000:00:1f.2/ata4/host4/target4:0:0/4:0:0:0/block/sda",
    "DEVNAME": "/dev/sda",
    "ID_ATA": "1",
    "ID_BUS": "ata",
    "ID_MODEL": "RIGSIM_honest",
    "ID_MODEL_ENC": r"RIGSIM\x20honest\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20",
    "ID_REVISION": "2.5+",
    "ID_SERIAL": "RIGSIM_honest_GSA0001",
    "ID_SERIAL_SHORT": "GSA0001",
    "ID_WWN": "0x5000c500000a0304",
    "ID_WWN_WITH_EXTENSION": "0x5000c500000a0304",
}
QEMU_NVME = {
    "DEVPATH": "/devices/pci0000:00/0000:00:18.0/0000:01:00.0/nvme/nvme0/nvme0n1",
    "DEVNAME": "/dev/nvme0n1",
    "ID_SERIAL_SHORT": "GHN0001",
    "ID_WWN": "nvme.1b36-47484e30303031-51454d55204e564d65204374726c-00000001",
    "ID_MODEL": "QEMU NVMe Ctrl",
    "ID_REVISION": "7.2.22",
    "ID_NSID": "1",
    "ID_SERIAL": "QEMU_NVMe_Ctrl_GHN0001_1",
    "ID_PATH": "pci-0000:01:00.0-nvme-1",
}


@pytest.mark.parametrize(
    ("props", "capture", "expected"),
    [
        (
            SCSI_DISK,
            "smartctl-i-scsi-hd.json",
            DriveIdentity("plp", "GSC0001", "0x5000c500000a0203", "2.5+"),
        ),
        (
            SATA_DISK,
            "smartctl-i-ide-hd.json",
            DriveIdentity("RIGSIM honest", "GSA0001", "0x5000c500000a0304", "2.5+"),
        ),
        (
            QEMU_NVME,
            "smartctl-i-nvme.json",
            DriveIdentity(
                "QEMU NVMe Ctrl",
                "GHN0001",
                "nvme.1b36-47484e30303031-51454d55204e564d65204374726c-00000001",
                "7.2.22",
            ),
        ),
    ],
    ids=["scsi-with-wwn", "sata", "qemu-nvme"],
)
def test_the_guest_s_disks_identify_alike_in_udev_and_in_smartctl(
    props: dict[str, str], capture: str, expected: DriveIdentity
) -> None:
    ident, _ = udev_view(props)
    assert ident == expected  # a SCSI disk's serial is its unit serial, not its NAA designator
    answer = parse_smartctl_json((RECORDED / capture).read_text()).identity.to_drive_identity()
    assert crosscheck.mismatch(ident, answer) is None
