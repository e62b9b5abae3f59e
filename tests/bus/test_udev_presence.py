"""The pyudev presence layer on real loop devices and real udev events."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures import loopctl
from rig.bus.udev import UdevPresence
from rig.config.campaign import DriveSpec
from rig.drive.identity import DriveIdentity
from rig.errors import UnsafeDeviceError
from rig.station.build import ToolDrives
from tests.loopdev import loop_available

pytestmark = pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "ok")


@pytest.fixture
def indices() -> Iterator[list[int]]:
    """Loop indices a test uses; all detached and removed afterwards, pass or fail."""
    used: list[int] = []
    yield used
    for index in used:
        loopctl.detach_and_remove(index)


def image(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    with path.open("wb") as handle:
        handle.truncate(4 << 20)
    return str(path)


def test_drive_leaves_and_returns_under_another_node(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    presence = UdevPresence()
    drive = image(tmp_path, "a.img")
    identity = DriveIdentity("Linux loop device", drive)
    first = loopctl.free_index()
    indices.append(first)
    loopctl.attach(first, drive)
    node = presence.find(identity)
    assert node is not None and node.devnode == f"/dev/loop{first}"
    assert node.logical_block == 4096 and node.size_bytes == 4 << 20

    watch = presence.watch(identity)
    try:
        loopctl.detach_and_remove(first)
        assert watch.wait_gone(5.0) is not None
        second = first + 17
        indices.append(second)
        loopctl.attach(second, drive)
        back = watch.wait_back(5.0)
        assert back is not None and back.devnode == f"/dev/loop{second}"
        assert back.identity == identity
    finally:
        watch.close()


def test_a_different_drive_at_the_old_node_is_not_taken_for_it(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    presence = UdevPresence()
    ours, other = image(tmp_path, "ours.img"), image(tmp_path, "other.img")
    identity = DriveIdentity("Linux loop device", ours)
    index = loopctl.free_index()
    indices.append(index)
    loopctl.attach(index, ours)
    watch = presence.watch(identity)
    try:
        loopctl.detach_and_remove(index)
        assert watch.wait_gone(5.0) is not None
        loopctl.attach(index, other)  # same node name, another drive
        assert watch.wait_back(1.0) is None
        assert presence.find(identity) is None
    finally:
        watch.close()


def attach_free(drive: str, indices: list[int]) -> int:
    """Attach at a free loop index; another user may bind the same free node first (EBUSY),
    then another one."""
    for _ in range(20):
        index = loopctl.free_index()
        try:
            loopctl.attach(index, drive)
        except subprocess.CalledProcessError as error:
            if "busy" not in error.stderr:
                raise
            continue
        indices.append(index)
        return index
    raise AssertionError("no free loop index stayed free")


def trigger_change(index: int) -> None:
    """A synthetic `change` of the node, as udisks, blkid or `udevadm trigger` make."""
    subprocess.run(
        ["udevadm", "trigger", "--action=change", f"/sys/block/loop{index}"],
        check=False,
        capture_output=True,
    )


def test_events_about_a_drive_that_never_left_are_not_a_return(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    """Change events of the very attachment the watch was armed on (duplicated, late) are not
    the drive coming back: a return is a new attachment (a new disk sequence number)."""
    presence = UdevPresence()
    drive = image(tmp_path, "a.img")
    identity = DriveIdentity("Linux loop device", drive)
    index = attach_free(drive, indices)
    watch = presence.watch(identity)
    try:
        for _ in range(3):
            trigger_change(index)
        assert watch.wait_back(1.5) is None
        assert watch.wait_gone(0.2) is None  # still there
    finally:
        watch.close()


def test_a_file_replaced_at_the_drive_s_path_is_doubt(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    """A loop device is proven by the file the kernel holds behind it (device and inode), not
    by the path: another file at the same path answers to the same name and is not the drive."""
    presence = UdevPresence()
    drive = image(tmp_path, "a.img")
    identity = DriveIdentity("Linux loop device", drive)
    first = attach_free(drive, indices)
    watch = presence.watch(identity)
    try:
        loopctl.detach_and_remove(first)
        assert watch.wait_gone(5.0) is not None
        os.rename(drive, drive + ".old")  # keeps its inode away from the new file
        image(tmp_path, "a.img")
        attach_free(drive, indices)
        with pytest.raises(UnsafeDeviceError, match=r"is backed by dev .*, not by the drive's"):
            watch.wait_back(5.0)
    finally:
        watch.close()


def test_a_node_reused_after_the_check_is_never_opened(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    """Between identify and the open, the node is taken by another device: the descriptor just
    opened belongs to another attachment (disk sequence number), so nothing is written."""
    presence = UdevPresence()
    ours, other = image(tmp_path, "ours.img"), image(tmp_path, "other.img")
    identity = DriveIdentity("Linux loop device", ours)
    index = attach_free(ours, indices)
    node = presence.find(identity)
    assert node is not None and node.diskseq > 0 and node.backing.startswith("dev ")
    # the detach completes at the last close (udev's probe may still hold the node): wait for
    # the node to be really gone before another drive takes its name
    assert loopctl.remove_when_released(index, give_up_s=10.0)
    loopctl.attach(index, other)  # same node name, another drive, after the check
    spec = DriveSpec(0, identity)
    with pytest.raises(UnsafeDeviceError, match="changed after it was identified"):
        ToolDrives(lock_dir=str(tmp_path / "locks")).open_target(node, spec)
    with open(other, "rb") as handle:
        assert not handle.read().strip(b"\0"), "nothing was written to the other drive"
