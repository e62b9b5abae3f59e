"""A drive model of its own for the guest station, written apart from the fault core: a
write-through RAM disk that loses nothing at a cut, boots after a fixed delay and keeps its own
truth. It meets `fixtures.guest.drive.DriveModel`, so a station takes it as it takes the fault
core's drives: no module of the station is patched."""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable

import numpy as np

from fixtures.faultcore import TruthEvent
from fixtures.virtual_drive import record_generation


class RamDrive:
    def __init__(self, name: str, block_size: int = 4096, size: int = 256 << 20) -> None:
        self.name = name
        self._block = block_size
        self._size = size
        self._lock = threading.Lock()
        self._blocks: dict[int, bytes] = {}
        self._written: set[int] = set()  # since power-on
        self._powered = self._present = True
        self._epoch = 0
        self._cuts = 0
        self._truth: list[TruthEvent] = []
        self._persisted: dict[int, dict[int, int]] = {}
        self._on_presence: Callable[[bool], None] = lambda present: None
        self.boot_s = 0.05

    def block_size(self) -> int:
        return self._block

    def size(self) -> int:
        return self._size

    def watch(self, on_presence: Callable[[bool], None]) -> None:
        self._on_presence = on_presence

    def set_power(self, on: bool, edge_ns: int) -> None:
        with self._lock:
            if on == self._powered:
                return
            self._powered = on
            if not on:
                self._cuts += 1
                self._epoch += 1
                self._present = False
                self._persisted[self._cuts] = {lba: self._tag(lba) for lba in sorted(self._written)}
                self._written.clear()
        if on:
            timer = threading.Timer(self.boot_s, self._booted)
            timer.daemon = True
            timer.start()
        else:
            self._on_presence(False)

    def _booted(self) -> None:
        with self._lock:
            if not self._powered:
                return
            self._present = True
        self._on_presence(True)

    def _tag(self, lba: int) -> int:
        data = self._blocks.get(lba)
        return record_generation(lba, None if data is None else np.frombuffer(data, np.uint8))

    def open(self) -> int:
        with self._lock:
            if not self._present:
                raise OSError(errno.EIO, "not powered")
            return self._epoch

    def _check(self, handle: int, lba: int, count: int) -> None:
        if not self._present or handle != self._epoch:
            raise OSError(errno.EIO, "drive gone since this handle")
        if lba + count > self._size // self._block:
            raise OSError(errno.EIO, "beyond the end")

    def read(self, handle: int, lba: int, count: int) -> bytes:
        with self._lock:
            self._check(handle, lba, count)
            empty = bytes(self._block)
            return b"".join(self._blocks.get(lba + i, empty) for i in range(count))

    def write(self, handle: int, lba: int, data: bytes, fua: bool) -> None:
        count = len(data) // self._block
        with self._lock:
            self._check(handle, lba, count)
            for i in range(count):
                self._blocks[lba + i] = data[i * self._block : (i + 1) * self._block]
                self._written.add(lba + i)

    def flush(self, handle: int) -> None:
        with self._lock:
            self._check(handle, 0, 0)

    def trim(self, handle: int, lba: int, count: int) -> None:
        with self._lock:
            self._check(handle, lba, count)
            for i in range(count):
                self._blocks.pop(lba + i, None)

    def cuts(self) -> int:
        with self._lock:
            return self._cuts

    def note(self, kind: str, detail: dict[str, int]) -> None:
        with self._lock:
            self._truth.append(TruthEvent(self._cuts, kind, -1, detail))

    def truth(self, start: int) -> list[TruthEvent]:
        with self._lock:
            return self._truth[start:]

    def persisted(self) -> dict[int, dict[int, int]]:
        with self._lock:
            return {cut: dict(blocks) for cut, blocks in self._persisted.items()}
