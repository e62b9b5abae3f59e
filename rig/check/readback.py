"""Reading blocks back for the checker: at queue depth on an O_DIRECT descriptor, one at a time
through any other reader; a timeout per read either way, and no thread started per read.

A `Reader` reads a window of ranges ahead into one buffer (`read_ahead`) and then gives each
range's outcome in order (`take`): its data is in the buffer, or the OSError of its read, or
`Hung` (no answer within the timeout: the drive sits on it). Extra reads (retries, halves of a
failing range) go through `read`. The checker consumes outcomes in order with its read budget,
so its verdicts are those of reading one range after another (rig/check/verify_reads.py).

- `AioReader`: a `DirectTarget`'s descriptor through the native queue (rig/native/readq.c, Linux
  AIO): up to `depth` reads in flight, each timed from its own submission. After a hang nothing
  more is submitted in that window; the rest is read when its turn comes. A request still in
  flight at return leaves its context and buffer abandoned (kept referenced, never reused).
- `SerialReader`: any `(lba, count) -> bytes` callable, called on demand in order (so a fake
  drive sees exactly the reads it saw before), under a timeout kept by one long-lived guard
  thread per calling thread; a guard left behind by a hang is replaced.
"""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rig.io.blockio import DirectTarget
from rig.io.media import aligned_buffer
from rig.native import lib

BlockReader = Callable[[int, int], npt.NDArray[np.uint8]]
Ranges = list[tuple[int, int]]
DEPTH = 32  # reads in flight (the rig's write depth; fio's verify bench uses the same)

RQ_DONE, RQ_HUNG, RQ_UNSENT = 0, 1, 2  # rig/native/pfr.h


class Hung(Exception):
    """A read not answered within its timeout."""


@runtime_checkable
class Reader(Protocol):
    def read_ahead(self, ranges: Ranges, out: npt.NDArray[np.uint8], offsets: list[int]) -> None:
        """Start reading `ranges` (first, count) into `out` at byte `offsets` (may read ahead)."""
        ...

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        """Range k of the window: its data (None: it is in `out`); raises OSError or Hung."""
        ...

    def buffer(self, nbytes: int, slot: int = 0) -> npt.NDArray[np.uint8]:
        """Window buffer `slot` (0 or 1: one is read into while the other is parsed), `nbytes`
        long, aligned, reused from window to window."""
        ...

    def read(self, first: int, count: int) -> npt.NDArray[np.uint8]:
        """One read now; raises OSError or Hung."""
        ...


def reader_for(read: BlockReader | Reader, block_size: int, timeout_s: float | None) -> Reader:
    """At queue depth for a `DirectTarget`'s own read method, else one read at a time (a
    reader already made is used as it is)."""
    if isinstance(read, Reader):
        return read
    owner = getattr(read, "__self__", None)
    if isinstance(owner, DirectTarget) and read == owner.read:
        return AioReader(owner, block_size, timeout_s)
    return SerialReader(read, timeout_s)


class SerialReader:
    def __init__(self, read: BlockReader, timeout_s: float | None) -> None:
        self._read = read
        self._timeout_s = timeout_s
        self._window: Ranges = []
        self._out: npt.NDArray[np.uint8] = np.zeros(0, dtype=np.uint8)
        self._offsets: list[int] = []

    def read_ahead(self, ranges: Ranges, out: npt.NDArray[np.uint8], offsets: list[int]) -> None:
        self._window, self._out, self._offsets = ranges, out, offsets

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        first, count = self._window[k]
        return self.read(first, count)

    def buffer(self, nbytes: int, slot: int = 0) -> npt.NDArray[np.uint8]:
        return _window_buffer(nbytes, slot)

    def read(self, first: int, count: int) -> npt.NDArray[np.uint8]:
        if self._timeout_s is None:
            return self._read(first, count)
        return _guard().run(lambda: self._read(first, count), self._timeout_s)


class _Guard:
    """One daemon thread that runs reads for one calling thread, so that a read can be given
    up on after a timeout: a guard whose read hangs is dropped (left to the drive) and the next
    read gets a new one."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]] = (
            queue.SimpleQueue()
        )
        self.stuck = False
        threading.Thread(target=self._serve, name="check-read-guard", daemon=True).start()

    def _serve(self) -> None:
        while True:
            job, box, done = self._jobs.get()
            try:
                box.append((True, job()))
            except BaseException as error:  # an I/O error, or a bug: raised in the checker
                box.append((False, error))
            done.set()

    def run(self, job: Callable[[], npt.NDArray[np.uint8]], timeout_s: float) -> Any:
        box: list[Any] = []
        done = threading.Event()
        self._jobs.put((job, box, done))
        if not done.wait(timeout_s):
            self.stuck = True
            raise Hung()
        ok, value = box[0]
        if not ok:
            raise value
        return value


_local = threading.local()


def _guard() -> _Guard:
    guard: _Guard | None = getattr(_local, "guard", None)
    if guard is None or guard.stuck:
        guard = _local.guard = _Guard()
    return guard


class _Queue:
    """A calling thread's native read queue (an AIO context, kept: creating and destroying one
    per check would cost an RCU grace period each)."""

    def __init__(self, depth: int) -> None:
        handle = ctypes.c_uint64(0)
        rc = lib().pfr_readq_setup(depth, ctypes.byref(handle))
        if rc < 0:
            raise OSError(-rc, f"io_setup({depth}): {os.strerror(-rc)}")
        self.handle = handle.value
        self.depth = depth


_abandoned: list[Any] = []  # contexts and buffers the kernel may still write into: never freed


def _queue() -> _Queue:
    q: _Queue | None = getattr(_local, "queue", None)
    if q is None:
        q = _local.queue = _Queue(DEPTH)
    return q


class AioReader:
    def __init__(self, target: DirectTarget, block_size: int, timeout_s: float | None) -> None:
        self._target = target
        self._block_size = block_size
        self._timeout_ns = int(timeout_s * 1e9) if timeout_s is not None else 0
        self._window: Ranges = []
        self._out: npt.NDArray[np.uint8] = np.zeros(0, dtype=np.uint8)
        self._offsets: list[int] = []
        self._state = np.zeros(0, dtype=np.uint8)
        self._res = np.zeros(0, dtype=np.int64)
        # Once a request is stuck in the kernel, the device's request slots may all be held by
        # hung requests and a submission could block with no timeout: from then on this reader
        # reads as before the queue existed (the target's own read under the guard thread).
        self._fallback: SerialReader | None = None
        self._timeout_s = timeout_s

    def read_ahead(self, ranges: Ranges, out: npt.NDArray[np.uint8], offsets: list[int]) -> None:
        self._window, self._out, self._offsets = ranges, out, offsets
        self._state = np.full(len(ranges), RQ_UNSENT, dtype=np.uint8)
        self._res = np.zeros(len(ranges), dtype=np.int64)
        if self._fallback is None:
            self._submit(0)

    def _submit(self, k: int) -> None:
        """Read ranges k.. of the window (until the first hang)."""
        ranges = self._window[k:]
        if not ranges:
            return
        bs = self._block_size
        offset = np.array([first * bs for first, _ in ranges], dtype=np.int64)
        nbytes = np.array([count * bs for _, count in ranges], dtype=np.uint64)
        at = np.array(self._offsets[k:], dtype=np.uint64)
        state = np.empty(len(ranges), dtype=np.uint8)
        res = np.empty(len(ranges), dtype=np.int64)
        q = _queue()
        stuck = lib().pfr_readq_run(
            q.handle, self._target.fileno(), q.depth, len(ranges), offset.ctypes.data,
            nbytes.ctypes.data, self._out.ctypes.data, at.ctypes.data, self._timeout_ns,
            state.ctypes.data, res.ctypes.data,
        )  # fmt: skip
        if stuck < 0:
            raise OSError(-stuck, f"read queue: {os.strerror(-stuck)}")
        if stuck > 0:  # the kernel may still write into this buffer through this context
            _abandoned.append((q, self._out))
            _local.queue = None
            _local.spare = None  # (it may be that buffer)
            self._fallback = SerialReader(self._target.read, self._timeout_s)
        self._state[k:], self._res[k:] = state, res

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        first, count = self._window[k]
        if self._state[k] == RQ_UNSENT:
            if self._fallback is not None:
                return self._fallback.read(first, count)
            self._submit(k)
        if self._state[k] == RQ_HUNG:
            raise Hung()
        self._raise_failed(first, count, int(self._res[k]))
        return None

    def buffer(self, nbytes: int, slot: int = 0) -> npt.NDArray[np.uint8]:
        return _window_buffer(nbytes, slot)

    def read(self, first: int, count: int) -> npt.NDArray[np.uint8]:
        if self._fallback is not None:
            return self._fallback.read(first, count)
        window = self._window, self._out, self._offsets, self._state, self._res
        out = aligned_buffer(count * self._block_size)
        try:
            self.read_ahead([(first, count)], out, [0])
            self.take(0)
        finally:
            self._window, self._out, self._offsets, self._state, self._res = window
        return out

    def _raise_failed(self, first: int, count: int, res: int) -> None:
        """As `DirectTarget.read` would for the same answer."""
        if res < 0:
            raise OSError(-res, f"read at block {first}: {os.strerror(-res)}")
        want = count * self._block_size
        if res != want:
            if os.lseek(self._target.fileno(), 0, os.SEEK_END) == 0:
                raise OSError(errno.ENODEV, f"{self._target.path}: the device left the bus")
            raise OSError(errno.EIO, f"short read at block {first}: {res} of {want} bytes")


def _window_buffer(nbytes: int, slot: int) -> npt.NDArray[np.uint8]:
    """The calling thread's window buffers, kept from check to check (a fresh one costs a page
    fault per page on its first read)."""
    spares: list[npt.NDArray[np.uint8]] | None = getattr(_local, "spare", None)
    if spares is None:
        spares = _local.spare = [np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.uint8)]
    if len(spares[slot]) < nbytes:
        spares[slot] = aligned_buffer(nbytes)
    return spares[slot][:nbytes]
