"""Block I/O: a `BlockTarget` capability and its real implementation on O_DIRECT file descriptors.

The real target opens a block device (or a regular file, for rehearsals) with O_DIRECT and issues
aligned pwritev/preadv; a flush is fdatasync; a durable write is RWF_DSYNC (FUA on the wire where
the drive supports it). Requests release the GIL, so several worker threads give a real queue
depth. Timestamps are taken by the caller around each request (see `rig.io.workload`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import time
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rig.errors import UserError
from rig.io.media import aligned_buffer
from rig.native.trigger import Trigger

BLKDISCARD = 0x1277  # _IO(0x12, 119)


class BlockTarget(Protocol):
    """A drive (or image) addressed in logical blocks."""

    @property
    def block_size(self) -> int: ...

    @property
    def nblocks(self) -> int: ...

    def write(self, lba: int, data: npt.NDArray[np.uint8], durable: bool = False) -> int | None:
        """Write whole blocks at `lba`; raises OSError on failure. Returns the completion instant
        on the host's CLOCK_MONOTONIC (ns) when the target knows it (a simulated drive keeps
        time by timestamps), else None: the caller stamps it when the call returns."""
        ...

    def read(self, lba: int, count: int) -> npt.NDArray[np.uint8]:
        """Read `count` blocks at `lba`; raises OSError on failure."""
        ...

    def flush(self) -> int | None:
        """Make every acknowledged write durable (the drive's cache flush). Returns the
        completion instant as `write` does."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class FiresTriggers(Protocol):
    """A target whose completion path fires a cut's trigger itself, natively, the moment the
    request completes (a simulated drive: rig/native/trigger.c `pfr_complete_at`). For any
    other target the caller fires it once the call has returned."""

    def write_fired(
        self, lba: int, data: npt.NDArray[np.uint8], durable: bool, trigger: Trigger
    ) -> int | None: ...

    def flush_fired(self, trigger: Trigger) -> int | None: ...


def write_firing(
    target: BlockTarget, lba: int, data: npt.NDArray[np.uint8], durable: bool, trigger: Trigger
) -> int:
    """`target.write` whose completion fires `trigger`: natively where the target can
    (`FiresTriggers`), else once the call returned. Its completion instant (host ns)."""
    if isinstance(target, FiresTriggers):
        return target.write_fired(lba, data, durable, trigger) or time.monotonic_ns()
    done_ns = target.write(lba, data, durable=durable) or time.monotonic_ns()
    trigger.fire(done_ns)
    return done_ns


def flush_firing(target: BlockTarget, trigger: Trigger) -> int:
    """`target.flush` whose completion fires `trigger`, as `write_firing`."""
    if isinstance(target, FiresTriggers):
        return target.flush_fired(trigger) or time.monotonic_ns()
    done_ns = target.flush() or time.monotonic_ns()
    trigger.fire(done_ns)
    return done_ns


@runtime_checkable
class Discards(Protocol):
    """A target that takes discards (TRIM / UNMAP / deallocate) of whole blocks."""

    def discard(self, lba: int, count: int) -> None:
        """Discard `count` blocks at `lba`; raises OSError on failure."""
        ...


class DirectTarget:
    """A block device or regular file opened with O_DIRECT.

    Block devices are opened O_EXCL as well: the kernel then refuses the open while the device is
    mounted or claimed by md/dm, a last line of defence behind the interlocks in
    `rig.station.safety`.
    """

    def __init__(self, path: str, block_size: int | None = None) -> None:
        self.path = path
        flags = os.O_RDWR | os.O_DIRECT | os.O_CLOEXEC
        mode = os.stat(path).st_mode
        is_device = stat.S_ISBLK(mode)
        if not is_device and not stat.S_ISREG(mode):
            raise UserError(f"{path}: not a block device or regular file")
        if is_device:
            flags |= os.O_EXCL
        try:
            self._fd = os.open(path, flags)
        except OSError as error:
            raise UserError(f"{path}: cannot open for direct I/O: {error.strerror}") from error
        size = os.lseek(self._fd, 0, os.SEEK_END)
        self._block_size = block_size or (
            (queue_bytes(path, "logical_block_size") or 512) if is_device else 4096
        )
        self._nblocks = size // self._block_size

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def nblocks(self) -> int:
        return self._nblocks

    def fileno(self) -> int:
        """The O_DIRECT descriptor, for the native write engine (rig.io.workload)."""
        if self._fd < 0:
            raise OSError(9, f"{self.path}: target is closed")
        return self._fd

    def write(self, lba: int, data: npt.NDArray[np.uint8], durable: bool = False) -> None:
        flags = os.RWF_DSYNC if durable else 0
        done = os.pwritev(self._fd, [data.data], lba * self._block_size, flags)
        if done != len(data):
            raise OSError(errno.EIO, f"short write at block {lba}: {done} of {len(data)} bytes")

    def read(self, lba: int, count: int) -> npt.NDArray[np.uint8]:
        buffer = aligned_buffer(count * self._block_size)
        done = os.preadv(self._fd, [buffer.data], lba * self._block_size)
        if done != len(buffer):
            if os.lseek(self._fd, 0, os.SEEK_END) == 0:
                # The kernel sets a removed disk's capacity to 0 (reads end at once; writes get
                # ENOSPC): the drive left the bus under this descriptor, no media error.
                raise OSError(errno.ENODEV, f"{self.path}: the device left the bus")
            raise OSError(errno.EIO, f"short read at block {lba}: {done} of {len(buffer)} bytes")
        return buffer

    def flush(self) -> None:
        os.fdatasync(self._fd)

    def discard(self, lba: int, count: int) -> None:
        """BLKDISCARD: the kernel's driver sends it as the transport's own command (SCSI UNMAP,
        NVMe DSM deallocate, ATA TRIM; a loop device punches a hole in its file)."""
        fcntl.ioctl(
            self._fd,
            BLKDISCARD,
            struct.pack("QQ", lba * self._block_size, count * self._block_size),
        )

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def queue_bytes(devnode: str, attribute: str) -> int:
    """A byte count of the device's block queue in sysfs (`queue/<attribute>`); 0 when it is
    not there (not a block device) or empty."""
    name = os.path.basename(os.path.realpath(devnode))
    try:
        with open(f"/sys/class/block/{name}/queue/{attribute}") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0
