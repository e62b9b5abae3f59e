"""Reading blocks back for the checker: at queue depth on an O_DIRECT descriptor, one at a time
through any other reader; a timeout per read either way, and no thread started per read.

A `Reader` reads a batch of ranges ahead into one buffer (`read_ahead`) and then gives each
range's outcome in order (`ReadBatch.take`): its data is in the buffer, or the OSError of its read,
or `Hung` (no answer within the timeout: the drive sits on it). The next batch may be started
before the last one is taken, so reading goes on while the checker takes and parses. Extra reads
(retries, halves of a failing range) go through `read`. The checker consumes outcomes in order
with its read budget, so its verdicts are those of reading one range after another
(rig/check/verify/reads.py).

- `AioReader`: a `DirectTarget`'s descriptor through the calling thread's native read stream
  (rig/native/readq.c, Linux AIO, served by its own C thread): up to `depth` reads in flight,
  batch after batch in order, each timed from its own submission. After a hang nothing more
  is submitted until a range not sent is taken; then the stream resumes (if the hang has since
  answered) or, with a request still stuck in flight, the stream and its buffers are abandoned
  (kept referenced, never reused) and the reader goes on one read at a time.
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


class ReadBatch(Protocol):
    """One batch of ranges started by `Reader.read_ahead`."""

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        """Range k: its data (None: it is in the batch's buffer); raises OSError or Hung."""
        ...

    def finish(self) -> None:
        """Done with this batch: ranges not taken are not read; its buffer is free again."""
        ...

    def read_whole(self) -> bool:
        """Waits for the whole batch: True if every range was read in full into the buffer
        (then none needs taking), False if some range needs taking to learn its outcome."""
        ...


@runtime_checkable
class Reader(Protocol):
    def read_ahead(
        self, ranges: Ranges, out: npt.NDArray[np.uint8], offsets: list[int]
    ) -> ReadBatch:
        """Start reading `ranges` (first, count) into `out` at byte `offsets` (may read ahead,
        also while an earlier batch is still being taken)."""
        ...

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        """Range k of the last batch started (`ReadBatch.take`)."""
        ...

    def buffer(self, nbytes: int, slot: int = 0) -> npt.NDArray[np.uint8]:
        """Batch buffer `slot` (0 to BUFFERS - 1: one read ahead, one taken, two parsed),
        `nbytes` long, aligned, reused from batch to batch."""
        ...

    def read(self, first: int, count: int) -> npt.NDArray[np.uint8]:
        """One read now; raises OSError or Hung."""
        ...


BUFFERS = 4  # batch buffers per checking thread: taken, read ahead, two being parsed


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
        self._current = _SerialBatch(self, [])

    def read_ahead(
        self, ranges: Ranges, out: npt.NDArray[np.uint8], offsets: list[int]
    ) -> ReadBatch:
        self._current = _SerialBatch(self, ranges)
        return self._current

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        return self._current.take(k)

    def buffer(self, nbytes: int, slot: int = 0) -> npt.NDArray[np.uint8]:
        return _batch_buffer(nbytes, slot)

    def read(self, first: int, count: int) -> npt.NDArray[np.uint8]:
        if self._timeout_s is None:
            return self._read(first, count)
        return _guard().run(lambda: self._read(first, count), self._timeout_s)


class _SerialBatch:
    """A batch read on demand, range by range, when taken."""

    def __init__(self, reader: SerialReader, ranges: Ranges) -> None:
        self._reader, self._ranges = reader, ranges

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        first, count = self._ranges[k]
        return self._reader.read(first, count)

    def finish(self) -> None:
        pass

    def read_whole(self) -> bool:
        return False  # read on demand: each range when taken


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


class _Stream:
    """A calling thread's native read stream (rig/native/readq.c: an AIO context and its server
    thread, kept from check to check: creating and destroying a context costs an RCU grace
    period). Requests are served in the order added, batch after batch, so the queue stays
    full across batches. The arrays of requests not settled yet are kept alive here."""

    CAPACITY = 4 * 4096  # requests queued at once: a few batches of rig/check/verify/reads.py

    def __init__(self, depth: int) -> None:
        handle = ctypes.c_void_p(0)
        rc = lib().pfr_rqs_open(depth, self.CAPACITY, ctypes.byref(handle))
        if rc < 0:
            raise OSError(-rc, f"io_setup({depth}): {os.strerror(-rc)}")
        self.handle = handle.value
        self.live: list[tuple[int, list[npt.NDArray[Any]]]] = []  # (end seq, arrays)

    def add(
        self, fd: int, ranges: Ranges, block_size: int, out: npt.NDArray[np.uint8],
        offsets: list[int], timeout_ns: int, state: npt.NDArray[np.uint8],
        res: npt.NDArray[np.int64],
    ) -> int:  # fmt: skip
        """Queues `ranges` (read into `out` at `offsets`); the first request's sequence number."""
        settled = lib().pfr_rqs_settled(self.handle)
        if settled >= 0:
            self.live = [entry for entry in self.live if entry[0] > settled]
        offset = np.array([first * block_size for first, _ in ranges], dtype=np.int64)
        nbytes = np.array([count * block_size for _, count in ranges], dtype=np.uint64)
        at = np.array(offsets, dtype=np.uint64)
        seq = lib().pfr_rqs_add(
            self.handle, fd, len(ranges), offset.ctypes.data, nbytes.ctypes.data,
            out.ctypes.data, at.ctypes.data, timeout_ns, state.ctypes.data, res.ctypes.data,
        )  # fmt: skip
        if seq < 0:
            raise OSError(-seq, f"read queue: {os.strerror(-seq)}")
        self.live.append((seq + len(ranges), [out, state, res]))
        return int(seq)

    def wait(self, seq: int) -> int:
        """Until request `seq` has an outcome (see readq.c); the hangs still in flight."""
        hung = int(lib().pfr_rqs_wait(self.handle, seq))
        if hung < 0:
            raise OSError(-hung, f"read queue: {os.strerror(-hung)}")
        return hung

    def wait_span(self, first: int, end: int) -> int:
        """Until requests first..end - 1 are all done, or one will not be without the caller;
        how many of them, from `first`, are done."""
        done = int(lib().pfr_rqs_wait_span(self.handle, first, end))
        if done < 0:
            raise OSError(-done, f"read queue: {os.strerror(-done)}")
        return done

    def resume(self) -> None:
        lib().pfr_rqs_resume(self.handle)

    def retire(self, end: int) -> None:
        """Requests before `end` never sent are dropped; returns once none is in flight (but
        hung ones): their buffers may be reused."""
        lib().pfr_rqs_retire(self.handle, end)

    def abandon(self) -> None:
        """A request is stuck in the kernel: the stream, its context and every buffer it had
        are kept referenced, never reused."""
        lib().pfr_rqs_abandon(self.handle)
        _abandoned.append(self)
        _local.stream = None
        _local.spare = None  # (the batch buffers may be among them)


_abandoned: list[Any] = []  # streams whose buffers the kernel may still write into: never freed


def _stream() -> _Stream:
    found: _Stream | None = getattr(_local, "stream", None)
    if found is None:
        found = _local.stream = _Stream(DEPTH)
    return found


def queue_stats() -> tuple[float, float]:
    """The calling thread's read stream since it opened: requests in flight summed over time
    (request-seconds), and seconds with at least one in flight; zeros before its first read."""
    found: _Stream | None = getattr(_local, "stream", None)
    if found is None:
        return 0.0, 0.0
    inflight, busy = ctypes.c_int64(0), ctypes.c_int64(0)
    lib().pfr_rqs_stats(found.handle, ctypes.byref(inflight), ctypes.byref(busy))
    return inflight.value / 1e9, busy.value / 1e9


class AioBatch:
    """One batch's reads through the stream (or through the reader's fallback, once stuck)."""

    def __init__(
        self, reader: AioReader, ranges: Ranges, out: npt.NDArray[np.uint8], offsets: list[int]
    ) -> None:
        self.reader, self.ranges = reader, ranges
        self.state = np.full(len(ranges), RQ_UNSENT, dtype=np.uint8)
        self.res = np.zeros(len(ranges), dtype=np.int64)
        self.stream: _Stream | None = None
        self.seq = 0
        if reader.fallback is None and ranges:
            self.stream = _stream()
            self.seq = self.stream.add(
                reader.target.fileno(), ranges, reader.block_size, out, offsets,
                reader.timeout_ns, self.state, self.res,
            )  # fmt: skip

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        first, count = self.ranges[k]
        while self.stream is not None and self.reader.fallback is None:
            hung = self.stream.wait(self.seq + k)
            if self.state[k] == RQ_DONE:
                break
            if hung > 0:  # the kernel may still write into buffers through this context
                self.stream.abandon()
                self.reader.fallback = SerialReader(self.reader.target.read, self.reader.timeout_s)
            if self.state[k] == RQ_HUNG:
                raise Hung()
            if self.reader.fallback is None:
                self.stream.resume()  # a stop left it unsent: sent now, timed from then
        if self.state[k] == RQ_UNSENT:
            assert self.reader.fallback is not None
            return self.reader.fallback.read(first, count)
        if self.state[k] == RQ_HUNG:
            raise Hung()
        self.reader.raise_failed(first, count, int(self.res[k]))
        return None

    def read_whole(self) -> bool:
        if self.stream is None or self.reader.fallback is not None:
            return False
        n = len(self.ranges)
        if self.stream.wait_span(self.seq, self.seq + n) < n:
            return False
        want = np.array([count for _, count in self.ranges], dtype=np.int64)
        return bool((self.res == want * self.reader.block_size).all())

    def finish(self) -> None:
        """Reads of this batch not taken are dropped; its buffer is free once this returns."""
        if self.stream is not None and self.reader.fallback is None:
            self.stream.retire(self.seq + len(self.ranges))


class AioReader:
    def __init__(self, target: DirectTarget, block_size: int, timeout_s: float | None) -> None:
        self.target = target
        self.block_size = block_size
        self.timeout_s = timeout_s
        self.timeout_ns = int(timeout_s * 1e9) if timeout_s is not None else 0
        self._current: AioBatch | None = None
        # Once a request is stuck in the kernel, the device's request slots may all be held by
        # hung requests and a submission could block with no timeout: from then on this reader
        # reads as before the queue existed (the target's own read under the guard thread).
        self.fallback: SerialReader | None = None
        stream: _Stream | None = getattr(_local, "stream", None)
        if stream is not None:
            stream.resume()  # a stop of an earlier reader's is not this reader's

    def read_ahead(
        self, ranges: Ranges, out: npt.NDArray[np.uint8], offsets: list[int]
    ) -> ReadBatch:
        self._current = AioBatch(self, ranges, out, offsets)
        return self._current

    def take(self, k: int) -> npt.NDArray[np.uint8] | None:
        assert self._current is not None, "read_ahead first"
        return self._current.take(k)

    def buffer(self, nbytes: int, slot: int = 0) -> npt.NDArray[np.uint8]:
        return _batch_buffer(nbytes, slot)

    def read(self, first: int, count: int) -> npt.NDArray[np.uint8]:
        if self.fallback is not None:
            return self.fallback.read(first, count)
        out = aligned_buffer(count * self.block_size)  # (kept by the stream until settled)
        result = AioBatch(self, [(first, count)], out, [0]).take(0)
        return out if result is None else result

    def raise_failed(self, first: int, count: int, res: int) -> None:
        """As `DirectTarget.read` would for the same answer."""
        if res < 0:
            raise OSError(-res, f"read at block {first}: {os.strerror(-res)}")
        want = count * self.block_size
        if res != want:
            if os.lseek(self.target.fileno(), 0, os.SEEK_END) == 0:
                raise OSError(errno.ENODEV, f"{self.target.path}: the device left the bus")
            raise OSError(errno.EIO, f"short read at block {first}: {res} of {want} bytes")


def _batch_buffer(nbytes: int, slot: int) -> npt.NDArray[np.uint8]:
    """The calling thread's batch buffers, kept from check to check (a fresh one costs a page
    fault per page on its first read)."""
    spares: list[npt.NDArray[np.uint8]] | None = getattr(_local, "spare", None)
    if spares is None:
        spares = _local.spare = []
    while len(spares) <= slot:
        spares.append(np.zeros(0, dtype=np.uint8))
    if len(spares[slot]) < nbytes:
        spares[slot] = aligned_buffer(nbytes)
    return spares[slot][:nbytes]
