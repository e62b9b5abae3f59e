"""A drive of its own for the in-process station, written apart from the fault core and the
virtual drive: a write-through RAM disk that loses nothing at a cut and is back on its bus a
fixed delay after power-on. It meets `fixtures.sim_station.InProcessDrive`, so
`in_process_station` takes it as it takes the fault core's drives; nothing is patched."""

from __future__ import annotations

import errno
import threading
import time

import numpy as np
import numpy.typing as npt

from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.io.blockio import BlockTarget


class RamDisk:
    def __init__(self, identity: DriveIdentity, blocks: int = 8192, block_size: int = 4096) -> None:
        self.identity = identity
        self.block_size = block_size
        self.blocks = blocks
        self.boot_s = 0.02
        self.cond = threading.Condition()
        self.data = np.zeros(blocks * block_size, np.uint8)
        self.powered = self.present = True
        self.epoch = 0  # power losses so far
        self.gone_ns = 0
        self.writes = 0

    def node(self) -> DriveNode:
        size = self.blocks * self.block_size
        return DriveNode(self.identity, f"ram:{self.identity.serial}", size, self.block_size,
                         self.block_size)  # fmt: skip

    def found(self) -> DriveNode | None:
        with self.cond:
            return self.node() if self.present else None

    def epoch_now(self) -> int:
        with self.cond:
            return self.epoch

    def wait_gone(self, since: int, timeout_s: float) -> int | None:
        with self.cond:
            return (
                self.gone_ns if self.cond.wait_for(lambda: self.epoch > since, timeout_s) else None
            )

    def wait_back(self, since: int, timeout_s: float) -> DriveNode | None:
        with self.cond:
            back = self.cond.wait_for(lambda: self.epoch > since and self.present, timeout_s)
            return self.node() if back else None

    def set_power(self, on: bool) -> None:
        with self.cond:
            if on == self.powered:
                return
            self.powered = on
            if not on:
                self.epoch += 1
                self.present = False
                self.gone_ns = time.monotonic_ns()
                self.cond.notify_all()
                return
        timer = threading.Timer(self.boot_s, self._booted)
        timer.daemon = True
        timer.start()

    def _booted(self) -> None:
        with self.cond:
            if self.powered:
                self.present = True
                self.cond.notify_all()

    def open_target(self) -> BlockTarget:
        with self.cond:
            if not self.present:
                raise OSError(errno.ENODEV, "not on the bus")
            return RamTarget(self, self.epoch)


class RamTarget:
    """The disk as one power-on sees it: every request after the next power loss fails."""

    def __init__(self, disk: RamDisk, epoch: int) -> None:
        self.disk = disk
        self.epoch = epoch

    @property
    def block_size(self) -> int:
        return self.disk.block_size

    @property
    def nblocks(self) -> int:
        return self.disk.blocks

    def _span(self, lba: int, count: int) -> slice:
        if self.disk.epoch != self.epoch or not self.disk.present:
            raise OSError(errno.EIO, "drive is gone")
        if lba + count > self.disk.blocks:
            raise OSError(errno.EIO, "beyond the end")
        return slice(lba * self.block_size, (lba + count) * self.block_size)

    def write(self, lba: int, data: npt.NDArray[np.uint8], durable: bool = False) -> None:
        with self.disk.cond:
            self.disk.data[self._span(lba, len(data) // self.block_size)] = data
            self.disk.writes += 1

    def read(self, lba: int, count: int) -> npt.NDArray[np.uint8]:
        with self.disk.cond:
            return self.disk.data[self._span(lba, count)].copy()

    def flush(self) -> None:
        with self.disk.cond:
            self._span(0, 0)

    def close(self) -> None:
        pass
