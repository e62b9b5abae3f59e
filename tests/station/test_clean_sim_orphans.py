"""`rig clean-sim` finds a simulator's loop device even after its runtime directory is gone
(a clean-up that crashed half-way: the FUSE mount already detached, the directory removed)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures import loopctl
from fixtures.simssd import cleanup, runtime
from tests.loopdev import loop_available

pytestmark = pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "ok")

RULES = Path("/run/udev/rules.d")


@pytest.fixture
def tagged_orphan(tmp_path: Path, udevd: None) -> Iterator[tuple[int, Path]]:
    image = tmp_path / "orphan.img"
    image.write_bytes(b"\0" * (1 << 20))
    name = "999999999"  # a simulator name with no runtime directory
    assert not (runtime.ROOT / name).exists()
    rule = RULES / f"99-rig-test-orphan-{tmp_path.name}.rules"
    RULES.mkdir(parents=True, exist_ok=True)
    rule.write_text(
        f'SUBSYSTEM=="block", KERNEL=="loop*", ATTR{{loop/backing_file}}=="{image}",'
        f' ENV{{RIG_SIM}}="{name}"\n'
    )
    devnode = ""
    try:
        subprocess.run(["udevadm", "control", "--reload"], check=True)
        devnode = subprocess.run(
            ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
        ).stdout.strip()
        subprocess.run(["udevadm", "trigger", "--action=change", devnode], check=True)
        subprocess.run(["udevadm", "settle", "--timeout=30"], check=True)
        yield int(devnode.removeprefix("/dev/loop")), image
    finally:
        rule.unlink(missing_ok=True)
        subprocess.run(["udevadm", "control", "--reload"], check=False)
        index = int(devnode.removeprefix("/dev/loop")) if devnode else -1
        if index >= 0 and loopctl.backing_file(index) == str(image):
            subprocess.run(["losetup", "-d", devnode], check=False)


def test_an_orphaned_simulator_loop_device_is_removed_and_others_are_not(
    tagged_orphan: tuple[int, Path], tmp_path: Path
) -> None:
    index, image = tagged_orphan
    other = tmp_path / "other.img"
    other.write_bytes(b"\0" * (1 << 20))
    untagged = subprocess.run(
        ["losetup", "--find", "--show", str(other)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        assert index in cleanup.orphan_loops()
        done = cleanup.clean()
        assert f"removed orphaned /dev/loop{index}" in done
        assert loopctl.backing_file(index) != str(image)
        assert loopctl.backing_file(int(untagged.removeprefix("/dev/loop"))) == str(other)
    finally:
        subprocess.run(["losetup", "-d", untagged], check=False)
