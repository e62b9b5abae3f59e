"""The pyudev presence layer on real loop devices and real udev events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures import loopctl
from rig.bus.udev import UdevPresence
from rig.identity import DriveIdentity
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
