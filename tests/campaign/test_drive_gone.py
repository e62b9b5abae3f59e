"""A drive that vanishes under the rig: what real drivers return then (the QEMU guest showed it:
an O_DIRECT writer on a removed NVMe namespace gets ENOSPC on every write, a removed SCSI disk one
EIO then ENOSPC; a node whose device is gone gives ENXIO or ENODEV; reads of a removed disk end at
once) all mean "the drive is gone": writes not acknowledged (no failure), checks stopped as a rig
ERROR (never read errors), and never a crash of the rig.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from rig.check import verify
from rig.io.blockio import DirectTarget
from rig.io.ledger import CycleLog, LbaState
from rig.io.workload import Workload, Writer, WriterContext

GONE = [errno.ENOSPC, errno.ENXIO, errno.ENODEV, errno.EIO]


class VanishingTarget:
    """A drive of 4096 blocks that answers `good` writes and then fails every request with
    `gone` (as a removed device does), whatever the thread."""

    block_size = 4096
    nblocks = 4096

    def __init__(self, good: int, gone: int) -> None:
        self.left = good
        self.gone = gone
        self.lock = threading.Lock()

    def write(self, lba: int, data: npt.NDArray[np.uint8], durable: bool = False) -> None:
        with self.lock:
            if self.left <= 0:
                raise OSError(self.gone, os.strerror(self.gone))
            self.left -= 1

    def read(self, lba: int, count: int) -> npt.NDArray[np.uint8]:
        raise OSError(self.gone, os.strerror(self.gone))

    def flush(self) -> None:
        with self.lock:
            if self.left <= 0:
                raise OSError(self.gone, os.strerror(self.gone))

    def close(self) -> None:
        pass


@pytest.mark.parametrize("gone", GONE, ids=[errno.errorcode[e] for e in GONE])
def test_writes_to_a_vanished_drive_are_not_acknowledged_and_the_writer_ends(gone: int) -> None:
    target = VanishingTarget(good=40, gone=gone)
    log = CycleLog()
    stop = threading.Event()
    load = Workload(workers=4, write_blocks=(1, 2), flush_every=4, engine="threads")
    writer = Writer(load, WriterContext(7, target, LbaState(0, 4096), log, stop), seed=3)
    writer.start()
    assert writer.join(10), "every slot ends at its first failed request"
    assert writer.crash is None
    status = log.column("status")
    assert int((status == 0).sum()) == 40
    assert set(status[status != 0].tolist()) == {gone}
    durability = log.durability(int(log.column("issue_ns").max()) + 1, 0)
    assert not durability.acked[status != 0].any()


@pytest.mark.parametrize("gone", [errno.ENODEV, errno.ENXIO])
def test_the_checker_stops_on_a_vanished_drive_instead_of_reporting_read_errors(gone: int) -> None:
    state = LbaState(0, 64)
    state.committed[:8] = 1
    log = CycleLog()
    target = VanishingTarget(good=0, gone=gone)
    with pytest.raises(verify.DriveGone) as raised:
        verify.check(7, state, log, log.durability(1, 0), np.arange(8), target.read, 4096)
    assert raised.value.errno == gone and isinstance(raised.value, OSError)


def test_a_media_error_is_still_a_read_error() -> None:
    state = LbaState(0, 64)
    state.committed[:2] = 1
    log = CycleLog()
    target = VanishingTarget(good=0, gone=errno.EIO)
    result = verify.check(7, state, log, log.durability(1, 0), np.arange(2), target.read, 4096)
    assert {f.cls for f in result.findings} == {verify.READ_ERROR}


def test_a_removed_disk_s_empty_read_is_enodev_and_a_shrunk_one_s_is_eio(tmp_path: Path) -> None:
    """A removed disk's capacity drops to 0 under an open descriptor; a regular file cut to 0
    bytes is the same to the reader. A drive that only shrank still has a size: a read past
    its end stays a short read (EIO), the checker's to report."""
    image = tmp_path / "drive.img"
    image.write_bytes(bytes(1 << 20))
    target = DirectTarget(str(image), 4096)
    try:
        os.truncate(image, 64 << 10)  # shrank: block 100 is past the end
        with pytest.raises(OSError) as shrunk:
            target.read(100, 1)
        assert shrunk.value.errno == errno.EIO
        os.truncate(image, 0)  # removed: nothing is left
        with pytest.raises(OSError) as removed:
            target.read(0, 1)
        assert removed.value.errno == errno.ENODEV
    finally:
        target.close()
