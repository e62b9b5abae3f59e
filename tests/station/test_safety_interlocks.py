"""Interlocks (docs/architecture.md, "Safety rules") on real loop devices: each refuses with one
line and writes nothing. (Mounted, filesystem signature, partitions and malformed input:
test_cli_refusals.py.)"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.bus.udev import UdevPresence
from rig.config.campaign import DriveSpec
from rig.drive.identity import DriveIdentity
from rig.errors import UnsafeDeviceError
from rig.station import locks, safety
from rig.station.build import ToolDrives
from tests.cli_runner import rig
from tests.interface.test_cli_refusals import assert_one_line_refusal, manual_campaign, our_sectors
from tests.loopdev import attached, drop_partitions, loop_available

needs_loop = pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "ok")
LOOP = "Linux loop device"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def blank(tmp_path: Path, name: str, mib: int = 8) -> Path:
    path = tmp_path / name
    with path.open("wb") as handle:
        handle.truncate(mib << 20)
    return path


def lvm2_label(image: Path) -> None:
    """An LVM2 physical-volume label as pvcreate writes it (sector 1, LVM's CRC32 variant)."""
    label = bytearray(512)
    label[0:8] = b"LABELONE"
    struct.pack_into("<QII", label, 8, 1, 0, 32)  # sector, crc (below), offset of pv_header
    label[24:32] = b"LVM2 001"
    label[32:64] = b"rigtestrigtestrigtestrigtestrigt"  # PV UUID
    struct.pack_into("<Q", label, 64, image.stat().st_size)
    init = 0xF597A6CF  # LVM's initial value, no final inversion (zlib inverts both ends)
    crc = ~zlib.crc32(bytes(label[20:]), ~init & 0xFFFFFFFF) & 0xFFFFFFFF
    struct.pack_into("<I", label, 16, crc)
    with image.open("r+b") as handle:
        handle.seek(512)
        handle.write(label)


def md_superblock(image: Path) -> None:
    """An md RAID v1.2 superblock (4 KiB into the device) with a valid checksum."""
    sb = bytearray(256 + 2 * 4)
    struct.pack_into("<II", sb, 0, 0xA92B4EFC, 1)  # magic, major version
    sb[16:32] = bytes(range(16))  # array UUID
    sb[32:40] = b"rig:test"
    struct.pack_into("<I", sb, 72, 1)  # RAID 1
    struct.pack_into("<I", sb, 92, 2)  # two disks
    sectors = image.stat().st_size // 512
    struct.pack_into("<QQQ", sb, 128, 2048, sectors - 2048, 8)  # data offset/size, sb offset
    struct.pack_into("<I", sb, 220, 4)  # max_dev
    total = sum(struct.unpack(f"<{len(sb) // 4}I", sb))
    struct.pack_into("<I", sb, 216, ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF)
    with image.open("r+b") as handle:
        handle.seek(4096)
        handle.write(sb)


@needs_loop
@pytest.mark.parametrize(
    "write, kind", [(lvm2_label, "LVM2_member"), (md_superblock, "linux_raid_member")]
)
def test_lvm_and_raid_members_are_refused(tmp_path: Path, write: object, kind: str) -> None:
    image = blank(tmp_path, "member.img")
    write(image)  # type: ignore[operator]
    before = digest(image)
    with attached(image, direct_io=False, sector_size=512) as devnode:
        assert safety.refusal_reasons(devnode) == [f"holds a {kind} signature"]
        result = rig("run", str(manual_campaign(tmp_path, LOOP, str(image))), cwd=tmp_path)
        assert_one_line_refusal(result, "refusing", devnode, f"{kind} signature")
    assert digest(image) == before


def fake_sysfs_with_holder(tmp_path: Path, name: str, holder: str) -> str:
    """A copy of the loop device's sysfs entry with a holder added.

    This kernel has neither device-mapper nor md, so no real holder can be made here; the rest
    of the device (its dev number, its real node) is the real one.
    """
    root = tmp_path / "sys-block"
    entry = root / name
    (entry / "holders" / holder).mkdir(parents=True)
    shutil.copy(f"/sys/class/block/{name}/dev", entry / "dev")
    return str(root)


@needs_loop
def test_a_held_device_is_refused_even_when_the_campaign_allows_a_wipe(tmp_path: Path) -> None:
    image = blank(tmp_path, "held.img")
    before = digest(image)
    with attached(image) as devnode:
        sys_block = fake_sysfs_with_holder(tmp_path, os.path.basename(devnode), "dm-3")
        assert safety.holders(os.path.basename(devnode), sys_block) == ["dm-3"]
        assert safety.refusal_reasons(devnode, True, sys_block) == ["held by dm-3"]
        with pytest.raises(UnsafeDeviceError) as refused:
            safety.check(devnode, "a loop device", allow_wipe=True, sys_block=sys_block)
        assert str(refused.value) == f"refusing {devnode} (a loop device): held by dm-3"
    assert digest(image) == before


def test_the_disk_the_running_system_lives_on_is_refused(tmp_path: Path) -> None:
    disks = safety.system_disks()
    root = next((disk for disk, path in disks.items() if path == "/"), None)
    if root is None:
        pytest.skip("the root file system is not on a block device here (overlay or tmpfs)")
    reasons = safety.refusal_reasons(f"/dev/{root}", allow_wipe=True)
    assert reasons[0] == "backs the running system (/)"
    listing = rig("drives", cwd=tmp_path)
    line = next(x for x in listing.stdout.splitlines() if x.startswith(f"/dev/{root} "))
    assert "no: backs the running system (/)" in line


@needs_loop
def test_a_drive_the_campaign_does_not_name_is_never_opened(tmp_path: Path, udevd: None) -> None:
    named, other = blank(tmp_path, "named.img"), blank(tmp_path, "other.img")
    before = digest(other)
    with attached(named), attached(other) as other_node:
        found = UdevPresence().find(DriveIdentity(LOOP, str(other)))
        assert found is not None and found.devnode == other_node
        spec = DriveSpec(0, DriveIdentity(LOOP, str(named)))
        with pytest.raises(UnsafeDeviceError) as refused:
            ToolDrives(lock_dir=str(tmp_path / "locks")).open_target(found, spec)
        assert str(refused.value) == (
            f"refusing {other_node}: it is {LOOP} s/n {other}, and the campaign names"
            f" {LOOP} s/n {named}"
        )
    assert digest(other) == before


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], DriveIdentity]]:
    """Another process (another campaign) holding the claim on a drive."""
    identity = DriveIdentity(LOOP, str(tmp_path / "claimed.img"))
    code = (
        "import sys\nfrom rig.station import locks\n"
        "from rig.drive.identity import DriveIdentity\n"
        f"with locks.claim(DriveIdentity({LOOP!r}, {identity.serial!r}), 'overnight'):\n"
        "    print('held', flush=True)\n    sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        yield child, identity
    finally:
        if child.stdin:
            child.stdin.close()
        child.wait(10)


@needs_loop
def test_a_second_campaign_cannot_claim_a_drive_in_use(
    tmp_path: Path, holder: tuple[subprocess.Popen[str], DriveIdentity]
) -> None:
    child, identity = holder
    image = blank(tmp_path, "claimed.img")
    with attached(image):
        result = rig("run", str(manual_campaign(tmp_path, LOOP, str(image))), cwd=tmp_path)
        assert_one_line_refusal(
            result, "is claimed by another campaign", f"pid {child.pid}", "'overnight'"
        )
    assert our_sectors(image) == 0
    # the claim ends with its holder, however that ends
    assert child.stdin is not None
    child.stdin.close()
    child.wait(10)
    with locks.claim(identity, "next"):
        pass


def test_one_drive_named_two_ways_is_one_claim(tmp_path: Path) -> None:
    on_bus = DriveIdentity("ACME SSD", "S123", "0x5000000000000001", "F1")
    by_wwn = DriveIdentity("", "", "naa.5000000000000001")
    by_serial = DriveIdentity("ACME SSD", "S123")
    lock_dir = str(tmp_path)
    with locks.claim(on_bus, "first", lock_dir):
        for other in (by_wwn, by_serial):
            with (
                pytest.raises(
                    locks.DriveClaimedError, match=f"pid {os.getpid()}, campaign 'first'"
                ),
                locks.claim(other, "second", lock_dir),
            ):
                pass
    with (
        locks.claim(by_wwn, "third", lock_dir),
        locks.claim(DriveIdentity("X", "Y"), "4", lock_dir),
    ):
        pass


def test_every_way_a_drive_can_be_named_gives_a_safe_file_name() -> None:
    names = locks.lock_names(DriveIdentity("A/B ../x", "s n", "0x50:01"))
    assert names == ["wwn-50_01.lock", "sn-A_B_.._x-s_n.lock"]


@needs_loop
def test_a_partitioned_drive_is_refused_by_the_cli_and_untouched(tmp_path: Path) -> None:
    image = blank(tmp_path, "parts.img", 16)
    subprocess.run(
        ["sfdisk", "-q", str(image)],
        input="label: gpt\n,8M\n",
        text=True,
        check=True,
        capture_output=True,
    )
    before = digest(image)
    with attached(image, direct_io=False, sector_size=512) as devnode:
        # partx adds them (this kernel does not scan GPT on loop); they outlive a detach
        subprocess.run(["partx", "-a", devnode], check=True, capture_output=True)
        try:
            result = rig("run", str(manual_campaign(tmp_path, LOOP, str(image))), cwd=tmp_path)
        finally:
            drop_partitions(devnode)
        assert_one_line_refusal(result, "refusing", devnode, "has partitions")
    assert digest(image) == before


@needs_loop
def test_a_swap_device_backs_the_running_system_and_is_refused(tmp_path: Path) -> None:
    image = blank(tmp_path, "swap.img", 16)
    subprocess.run(["mkswap", str(image)], check=True, capture_output=True)
    with attached(image, direct_io=False, sector_size=512) as devnode:
        on = subprocess.run(["swapon", devnode], capture_output=True, text=True, check=False)
        if on.returncode != 0:
            pytest.skip(f"swapon not possible here: {on.stderr.strip()}")
        try:
            reasons = safety.refusal_reasons(devnode, allow_wipe=True)
            result = rig("run", str(manual_campaign(tmp_path, LOOP, str(image))), cwd=tmp_path)
        finally:
            subprocess.run(["swapoff", devnode], check=False, capture_output=True)
        assert reasons == [
            f"backs the running system (swap {devnode})",
            f"in use as swap ({devnode})",
        ]
        assert_one_line_refusal(result, "refusing", devnode, "backs the running system")
    assert our_sectors(image) == 0  # (the kernel itself may have swapped pages out to it)


@needs_loop
def test_two_devices_with_one_identity_are_refused_not_guessed(tmp_path: Path) -> None:
    image = blank(tmp_path, "twice.img")
    with attached(image) as first, attached(image) as second:  # one drive, two paths
        result = rig("run", str(manual_campaign(tmp_path, LOOP, str(image))), cwd=tmp_path)
        assert_one_line_refusal(result, "2 devices answer to", first, second, "refusing to guess")
    assert our_sectors(image) == 0
