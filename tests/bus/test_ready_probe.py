"""The readiness probe of a plain block device (loop, simulated drive) on a real loop device over
a FUSE image whose blocks fail as a bad range does: a drive with an unreadable first block still
answers and is ready; a drive that answers no read is not."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fixtures.simssd.fuse import FuseServer
from rig.bus.ready import NotReady, probe_once, wait_ready
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.health.tools import ToolRunner
from tests.loopdev import attached, loop_available

BLOCK = 4096
BLOCKS = 256
DRIVE = DriveIdentity("PROBE TEST", "P0001")


class BadBlocksImage:
    """An image of zeros whose `bad` blocks fail every read with `error`."""

    def __init__(self, bad: range, error: int) -> None:
        self.bad = bad
        self.error = error
        self.reads: list[int] = []

    def size(self) -> int:
        return BLOCKS * BLOCK

    def open(self) -> int:
        return 0

    def read(self, handle: int, offset: int, size: int) -> bytes:
        first, last = offset // BLOCK, (offset + size - 1) // BLOCK
        self.reads.extend(range(first, last + 1))
        if any(lba in self.bad for lba in range(first, last + 1)):
            raise OSError(self.error, os.strerror(self.error))
        return bytes(size)

    def write(self, handle: int, offset: int, data: memoryview) -> None:
        raise OSError(errno.EROFS, "read-only test image")

    def fsync(self, handle: int) -> None:
        pass

    def release(self, handle: int) -> None:
        pass


def _unavailable() -> str:
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    return loop_available()


pytestmark = pytest.mark.skipif(bool(_unavailable()), reason=_unavailable() or "ok")


@contextmanager
def drive_over(image: BadBlocksImage, where: Path) -> Iterator[DriveNode]:
    where.mkdir()
    server = FuseServer(str(where), {"disk.img": image}, name="probetest", workers=4)
    try:
        with attached(where / "disk.img", sector_size=BLOCK) as devnode:
            # udev's probe of the new device (blkid) reads it too: let it finish first, so the
            # reads a test sees are the readiness probe's own
            subprocess.run(["udevadm", "settle", "--timeout=10"], check=False, capture_output=True)
            yield DriveNode(DRIVE, devnode, BLOCKS * BLOCK, BLOCK, BLOCK, "loop")
    finally:
        server.stop()


@pytest.mark.parametrize("error", [errno.EIO, errno.ETIMEDOUT], ids=["fails", "hangs"])
def test_a_drive_with_an_unreadable_first_block_is_ready(tmp_path: Path, error: int) -> None:
    image = BadBlocksImage(range(0, 16), error)
    with drive_over(image, tmp_path / "mnt") as node:
        image.reads.clear()
        assert probe_once(node, ToolRunner()) == ""
        assert image.reads[0] == 0 and image.reads[-1] == BLOCKS - 1  # first, then the last


def test_a_drive_that_answers_no_read_is_not_ready(tmp_path: Path) -> None:
    image = BadBlocksImage(range(0, BLOCKS), errno.EIO)
    with drive_over(image, tmp_path / "mnt") as node:
        answer = probe_once(node, ToolRunner())
        assert answer.startswith(f"block 0: read: {os.strerror(errno.EIO)}"), answer
        assert f"block {BLOCKS - 1}:" in answer and f"block {BLOCKS // 2 - 1}:" in answer
        with pytest.raises(NotReady, match=r"not ready within 0\.1 s: block 0: read"):
            wait_ready(node, ToolRunner(), 0.1)


def test_a_whole_drive_is_ready_at_its_first_block(tmp_path: Path) -> None:
    image = BadBlocksImage(range(0), errno.EIO)
    with drive_over(image, tmp_path / "mnt") as node:
        image.reads.clear()
        assert probe_once(node, ToolRunner()) == ""
        assert image.reads == [0]
