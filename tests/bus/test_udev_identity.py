"""Identity and transport from udev properties of SATA, SAS and NVMe drives, cross-checked with
real smartctl captures of the same models.

This kernel has no SCSI or NVMe drivers, so the devices are real pyudev Devices built by libudev
from an environment (`Devices.from_environment`, what udev gives a RUN program), with the
properties 60-persistent-storage.rules sets for such drives. The property values are synthetic,
shaped after those rules (ID_MODEL_ENC escapes blanks, ID_WWN is 0x + 16 hex digits, NVMe's
ID_WWN is the namespace's eui.); serial and firmware are "REDACTED" as in the captures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rig.drive.identity import DriveIdentity
from rig.health import crosscheck
from rig.health.smart import parse_smartctl_json
from tests.health.health_paths import real_file

SATA = {
    "DEVPATH": "/devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sdm",
    "DEVNAME": "/dev/sdm",
    "ID_BUS": "ata",
    "ID_MODEL": "INTEL_SSDSC2KB480G8",
    "ID_MODEL_ENC": r"INTEL\x20SSDSC2KB480G8\x20\x20\x20\x20\x20\x20\x20\x20\x20\x20",
    "ID_SERIAL_SHORT": "REDACTED",
    "ID_WWN": "0x55cd2e40499602d2",
    "ID_WWN_WITH_EXTENSION": "0x55cd2e40499602d2",
    "ID_REVISION": "REDACTED",
    "ID_PATH": "pci-0000:00:17.0-ata-3",
}
SAS = {
    "DEVPATH": "/devices/pci0000:00/0000:03:00.0/host0/port-0:1/end_device-0:1/target0:0:1/"
    "0:0:1:0/block/sdb",
    "DEVNAME": "/dev/sdb",
    "ID_BUS": "scsi",
    "ID_VENDOR": "HITACHI",
    "ID_MODEL": "H109060SESUN600G",
    "ID_MODEL_ENC": "H109060SESUN600G",
    "ID_SERIAL_SHORT": "REDACTED",
    "ID_WWN": "0x1234567890abcdef",
    "ID_WWN_WITH_EXTENSION": "0x1234567890abcdef",
    "ID_REVISION": "A31A",
    "ID_PATH": "pci-0000:03:00.0-sas-phy1-lun-0",
}
NVME = {
    "DEVPATH": "/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme2/nvme2n1",
    "DEVNAME": "/dev/nvme2n1",
    "ID_MODEL": "KXG60ZNV512G TOSHIBA",
    "ID_SERIAL_SHORT": "REDACTED",
    "ID_WWN": "eui.8ce38e05008768b5",
    "ID_REVISION": "REDACTED",
    "ID_PATH": "pci-0000:3d:00.0-nvme-1",
}


# libudev builds a device from the environment once per process: one child per device.
_CHILD = """
import dataclasses, json, pyudev
from rig.bus.udev import identity_of, transport_of
dev = pyudev.Devices.from_environment(pyudev.Context())
print(json.dumps([dataclasses.asdict(identity_of(dev)), transport_of(dev)]))
"""


def udev_view(props: dict[str, str]) -> tuple[DriveIdentity, str]:
    """What the production udev code reads from a device with these properties."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ID_", "RIG_", "DEV"))}
    env.update({"SUBSYSTEM": "block", "DEVTYPE": "disk", "ACTION": "add", "SEQNUM": "1"})
    env.update({"MAJOR": "8", "MINOR": "16", **props})
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
    ).stdout
    ident, transport = json.loads(out)
    return DriveIdentity(**ident), transport


@pytest.mark.parametrize(
    "props, capture, transport, expected",
    [
        (
            SATA,
            "sat-Intel_S4510_S4610_S4500_S4600_Series_SSDs-INTEL_SSDSC2KB480G8-sdm.json",
            "sata",
            DriveIdentity("INTEL SSDSC2KB480G8", "REDACTED", "0x55cd2e40499602d2", "REDACTED"),
        ),
        (
            SAS,
            "HITACHI_H109060SESUN600G_10.json",
            "sas",
            DriveIdentity("H109060SESUN600G", "REDACTED", "0x1234567890abcdef", "A31A"),
        ),
        (
            NVME,
            "KXG60ZNV512G_TOSHIBA_2.json",
            "nvme",
            DriveIdentity("KXG60ZNV512G TOSHIBA", "REDACTED", "eui.8ce38e05008768b5", "REDACTED"),
        ),
    ],
    ids=["sata", "sas", "nvme"],
)
def test_udev_identity_agrees_with_the_drive_s_own_answer(
    props: dict[str, str],
    capture: str,
    transport: str,
    expected: DriveIdentity,
) -> None:
    assert udev_view(props) == (expected, transport)
    answer = parse_smartctl_json(real_file(capture).read_text()).identity.to_drive_identity()
    assert crosscheck.mismatch(expected, answer) is None
    # the same node with another drive's WWN behind it is caught
    other = DriveIdentity(expected.model, expected.serial, "0x5000000000000001", "")
    assert (crosscheck.mismatch(other, answer) or "").startswith("wwn ")


def test_simulated_drives_are_named_by_rig_properties() -> None:
    ident, transport = udev_view(
        {
            "DEVPATH": "/devices/virtual/block/loop500",
            "DEVNAME": "/dev/loop500",
            "MAJOR": "7",
            "MINOR": "500",
            "RIG_MODEL": "RIGSIM Enterprise PLP",
            "RIG_SERIAL": "SIMPLP0001",
            "RIG_WWN": "0x5000c500a0000001",
            "RIG_FIRMWARE": "RSIM0100",
            "RIG_TRANSPORT": "sim-nvme",
        },
    )
    assert ident == DriveIdentity(
        "RIGSIM Enterprise PLP", "SIMPLP0001", "0x5000c500a0000001", "RSIM0100"
    )
    assert transport == "sim-nvme"
