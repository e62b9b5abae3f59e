"""The guest tier: one QEMU guest (stock Debian kernel, TCG) serves every test of a module and is
ended after it (the rest of the suite does not share the machine with it). It needs
qemu-system-x86, linux-image-amd64, busybox-static, virtme-ng and the built firmware (make setup
installs them all) and skips, saying which is missing, only where one is."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.guest.drive import GuestDriveSpec
from fixtures.guest.faultdrive import fault_core_drives
from fixtures.guest.machine import unavailable
from fixtures.guest.station import GuestStation
from fixtures.simssd.twin import BRIDGE, FIRMWARE

# One drive per transport and slot kind; the relay board has four channels.
STATION_DRIVES = [
    GuestDriveSpec(0, "nvme-hotplug", "torn", "GHN0001", seed=101),
    GuestDriveSpec(1, "nvme-fixed", "honest", "GFN0001", seed=102),
    GuestDriveSpec(2, "scsi-hotplug", "plp", "GSC0001", seed=103),
    GuestDriveSpec(3, "sata-fixed", "honest", "GSA0001", seed=104),
]


def guest_unavailable() -> str:
    if os.geteuid() != 0:
        return "needs root (the guest station's runtime directory is under /run)"
    if not (BRIDGE.exists() and FIRMWARE.exists()):
        return "firmware not built (make setup)"
    return unavailable()


@pytest.fixture(scope="module")
def guest_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("guest")


@pytest.fixture(scope="module")
def guest_station(guest_workdir: Path) -> Iterator[GuestStation]:
    """The booted station, shared by a module's tests; ended (guest, bridge, NBD servers) after
    the module, whatever the tests did."""
    reason = guest_unavailable()
    if reason:
        pytest.skip(reason)
    drives = fault_core_drives(STATION_DRIVES)
    station = GuestStation(drives, guest_workdir, guest_workdir / "station.truth.jsonl")
    try:
        print(f"\nguest booted in {station.guest.boot_s:.0f} s" if station.guest else "")
        yield station
    finally:
        station.close()
