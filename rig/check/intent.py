"""The intent log: the LBA ranges a cycle plans to write, stored before any of them is issued, so
that a resume after `kill -9` reads back only those blocks (O(writes at risk)) instead of the
whole test region.

The log is a file beside the store, mapped shared into the rig's memory: a range is one store to
memory, no system call and no sync, so the writer's speed is unchanged. What the rig stored
there lives in the kernel's page cache and survives the rig's death, not the host's: the header
carries the boot id, and a log written in another boot (a host crash, a reboot) is not trusted.
The resume then reads the whole region back, as it does without a log (docs/decisions.md,
"Resume reads back what the last cycle planned, from an intent log").

Layout (little-endian int64 words): magic, boot id (2 words), drive id, cycle seq, count of
ranges written (capacity + 1 once it overflowed), capacity, 0; then (first LBA, blocks) pairs.
"""

from __future__ import annotations

import mmap
import os
import threading
import uuid
from pathlib import Path

import numpy as np
import numpy.typing as npt

MAGIC = int.from_bytes(b"RIGINT01", "little")
HEADER_WORDS = 8
CAPACITY = 1 << 20  # ranges per cycle (a 16 MiB sparse file); beyond it the resume reads all
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_SEQ, _COUNT = 4, 5


def boot_id() -> tuple[int, int]:
    """This boot's id as two words (0, 0 where the kernel does not say)."""
    try:
        value = uuid.UUID(BOOT_ID.read_text().strip()).int
    except (OSError, ValueError):
        return 0, 0
    return value >> 64, value & ((1 << 64) - 1)


def path_for(store_path: str, drive_id: int) -> Path | None:
    """Where a drive's intent log lives: beside the store file (none for an in-memory store)."""
    if not store_path or store_path == ":memory:" or store_path.startswith("file::memory:"):
        return None
    return Path(f"{store_path}.intent-{drive_id}")


class IntentLog:
    """One drive's log, open for the whole run. `begin` and `add` are thread-safe."""

    def __init__(self, path: Path, drive_id: int, capacity: int = CAPACITY) -> None:
        self.path = path
        self.drive_id = drive_id
        size = (HEADER_WORDS + 2 * capacity) * 8
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if os.fstat(fd).st_size != size:  # new, or made with another capacity: not trusted
                os.ftruncate(fd, 0)
                os.ftruncate(fd, size)  # sparse: only the pages written take disk space
            self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        words: npt.NDArray[np.int64] = np.frombuffer(self._map, dtype="<i8")
        self._head = words[:HEADER_WORDS]
        self._ranges = words[HEADER_WORDS:].reshape(capacity, 2)
        self.capacity = capacity
        self._lock = threading.Lock()

    def begin(self, seq: int) -> None:
        """A new cycle: its ranges replace the last cycle's."""
        high, low = boot_id()
        with self._lock:
            head = self._head
            head[_COUNT] = 0
            head[1:4] = np.array([high, low, self.drive_id], dtype=np.uint64).view(np.int64)
            head[6], head[7] = self.capacity, 0
            head[_SEQ] = seq
            head[0] = MAGIC

    def add(self, first_lbas: npt.NDArray[np.int64], nblocks: npt.NDArray[np.int64]) -> None:
        """Ranges about to be planned for writing; the count moves only after they are stored."""
        n = len(first_lbas)
        with self._lock:
            count = int(self._head[_COUNT])
            if count + n > self.capacity:
                self._head[_COUNT] = self.capacity + 1  # overflowed: the resume reads all
                return
            self._ranges[count : count + n, 0] = first_lbas
            self._ranges[count : count + n, 1] = nblocks
            self._head[_COUNT] = count + n

    def ranges(self, seq: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """The ranges of cycle `seq` if this log holds them whole (this drive, this boot, no
        overflow); None when it cannot say (the resume reads the whole region then)."""
        with self._lock:
            head = self._head.copy()
            count = int(head[_COUNT])
            if (
                head[0] != MAGIC
                or tuple(head[1:3].view(np.uint64).tolist()) != boot_id()
                or head[3] != self.drive_id
                or head[_SEQ] != seq
                or not 0 <= count <= self.capacity
            ):
                return None
            pairs = self._ranges[:count].copy()
        return pairs[:, 0], pairs[:, 1]

    def close(self) -> None:
        del self._head, self._ranges
        self._map.close()


def merged_runs(
    first_lbas: npt.NDArray[np.int64], nblocks: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Overlapping or touching ranges merged: sorted (start, length) runs covering each block
    once."""
    keep = nblocks > 0
    starts, ends = first_lbas[keep], first_lbas[keep] + nblocks[keep]
    if not len(starts):
        return starts, starts
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new_run = np.concatenate([[True], starts[1:] > reach[:-1]])
    run_start = starts[new_run]
    last_of_run = np.concatenate([np.flatnonzero(new_run)[1:] - 1, [len(starts) - 1]])
    return run_start, reach[last_of_run] - run_start
