"""How the checker reads the checked blocks (docs/checker.md): in batches read ahead at queue
depth, failing ranges split down to single blocks within a read budget and a hang budget, each
batch's sectors parsed on a helper thread while the next batch is read."""

from __future__ import annotations

import collections
import errno
import functools
import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rig.check import readback
from rig.check.failures import READ_ERROR, UNCHECKED
from rig.check.verify.findings import Finding
from rig.check.verify.sectors import SectorSummary
from rig.io import media

# What a read gets from a drive that left the bus under the checker (rig/io/blockio.py makes a
# removed disk's empty reads ENODEV; ENXIO: a device node without its device): the drive is gone,
# which is no read error of its media. The check stops (`DriveGone`), and the cycle is a rig
# ERROR whose blocks stay unjudged.
GONE_ERRNOS = frozenset({errno.ENODEV, errno.ENXIO})


class DriveGone(OSError):
    """The drive left the bus while the checker read it."""


BlockReader = Callable[[int, int], npt.NDArray[np.uint8]]


def runs(lbas: npt.NDArray[np.int64], longest: int) -> Iterator[tuple[int, int]]:
    """(first, count) runs of consecutive LBAs, each at most `longest` long."""
    if len(lbas) == 0:
        return
    breaks = np.flatnonzero(np.diff(lbas) != 1) + 1
    for run in np.split(lbas, breaks):
        for start in range(0, len(run), longest):
            yield int(run[start]), min(longest, len(run) - start)


@dataclass(frozen=True)
class ReadPolicy:
    """How the checker reads: failing ranges are split down to single blocks; a single block is
    tried `attempts` times; a read that has not returned after `timeout_s` counts as a hang and is
    not retried (the drive is sitting on it). `max_reads` bounds the extra reads spent on failing
    ranges per check, `max_hangs` the hangs (each costs a timeout); past either, what is left is
    `unchecked` (counted and reported, never a read error: no read of those blocks failed)."""

    attempts: int = 2
    timeout_s: float | None = None
    max_reads: int = 2048
    max_hangs: int = 16


@dataclass(frozen=True)
class Reads:
    """What reading the checked blocks gave: their sectors' headers, which rows were read, the
    read errors and the ranges left unread."""

    sectors: SectorSummary
    readable: npt.NDArray[np.bool_]
    errors: list[Finding]
    unread: list[Finding]


class ReadBack:
    """Reading the checked blocks (a context: leaving it with batches still being read finishes
    them). Batches of ranges are read ahead (at queue depth where the reader can), each judged range
    by range in order with the budget, then parsed in one pass on a helper thread (the C parse's
    per-block summaries, `SectorSummary`). While batch n is taken, batch n + 1 is being read and
    batches n - 1 and n - 2 parsed; once n is taken, n + 2 is started: the reader's queue never
    waits for the checker (`readback.BUFFERS` batch buffers). On entering, nothing is parsed
    yet, so a batch is started into every buffer (docs/decisions.md, "Verification reads go in
    batches, at queue depth, with a timeout per read"): the caller's own work before
    `collect` overlaps their reads, and a checking thread that waits for a CPU meanwhile leaves
    the device four batches to read instead of two."""

    def __init__(
        self,
        checked: npt.NDArray[np.int64],
        read: BlockReader | readback.Reader,
        block_size: int,
        max_read_blocks: int,
        policy: ReadPolicy,
        budget: Budget,
    ) -> None:
        per_block = block_size // media.SECTOR
        self.reads = Reads(
            SectorSummary.empty(len(checked), per_block),
            np.ones(len(checked), dtype=bool),
            [],
            [],
        )
        self.checked, self.block_size = checked, block_size
        self.policy, self.budget = policy, budget
        self.reader = readback.reader_for(read, block_size, policy.timeout_s)
        self.parsing = _Parser()
        self.batches = enumerate(_batches(runs(checked, max_read_blocks), block_size))
        self.ahead: collections.deque[_Started] = collections.deque()

    def __enter__(self) -> ReadBack:
        self._start(readback.BUFFERS)
        return self

    def __exit__(self, *exc: object) -> None:
        for started in self.ahead:  # (an error stopped the check: nothing of these is read now)
            started.batch.finish()
        self.ahead.clear()
        self.parsing.wait()

    def _start(self, count: int) -> None:
        for n, batch in itertools.islice(self.batches, count):
            self.ahead.append(_Started.start(self.reader, self.checked, batch, n, self.block_size))

    def collect(self, judge: Callable[[slice, Reads], None] | None = None) -> Reads:
        """Every batch judged and parsed: what reading the checked blocks gave. `judge` gets
        each batch's rows, in order, once they are read and parsed, while later batches are
        still being read (the checker's per-block rules: the read queue does not wait for them
        after the last read)."""
        bs, reads, parsing = self.block_size, self.reads, self.parsing
        parsed: collections.deque[tuple[slice, threading.Event | None]] = collections.deque()
        while self.ahead:
            current = self.ahead[0]  # (left there until finished: an error finishes it on exit)
            landed = _take_batch(reads, self.reader, current, self.policy, self.budget, bs)
            current.batch.finish()
            self.ahead.popleft()
            parsing.make_room()  # the buffer of batch n - PARSE_THREADS is free again
            args = (reads.sectors, landed, current.data, current.row0, bs)
            done = parsing.start(functools.partial(_parse_landed, *args), len(current.data))
            rows = slice(current.row0, current.row0 + len(current.data) // bs)
            parsed.append((rows, done))
            # batch n + 2 into the buffer of n - 2, whose parse `make_room` saw done; after the
            # start's deeper read-ahead, nothing until the ahead count is back to that depth
            self._start(max(0, readback.BUFFERS - PARSE_THREADS - len(self.ahead)))
            while judge and parsed and (parsed[0][1] is None or parsed[0][1].is_set()):
                judge(parsed.popleft()[0], reads)
        parsing.join()
        while judge and parsed:
            judge(parsed.popleft()[0], reads)
        return reads


@dataclass(frozen=True)
class _Started:
    """A batch of ranges being read ahead into its buffer."""

    ranges: list[tuple[int, int]]
    batch: readback.ReadBatch
    data: npt.NDArray[np.uint8]
    offsets: list[int]
    row0: int

    @classmethod
    def start(
        cls,
        reader: readback.Reader,
        checked: npt.NDArray[np.int64],
        ranges: list[tuple[int, int]],
        n: int,
        block_size: int,
    ) -> _Started:
        nrows = sum(count for _, count in ranges)
        data = reader.buffer(nrows * block_size, n % readback.BUFFERS)
        offsets, at = [], 0
        for _, count in ranges:
            offsets.append(at)
            at += count * block_size
        row0 = int(np.searchsorted(checked, ranges[0][0]))
        return cls(ranges, reader.read_ahead(ranges, data, offsets), data, offsets, row0)


def _take_batch(
    reads: Reads,
    reader: readback.Reader,
    started: _Started,
    policy: ReadPolicy,
    budget: Budget,
    block_size: int,
) -> list[tuple[int, int, npt.NDArray[np.uint8] | None]]:
    """Judge a batch's ranges in order with the budget; the rows read, and where."""
    row0, data = started.row0, started.data
    if budget.hangs > 0 and started.batch.read_whole():
        # every range read in full: each one's outcome is its data in the buffer, and no budget
        # is spent (as when taken one by one), so the batch's rows are read as one run
        return [(row0, row0 + len(data) // block_size, None)]
    landed: list[tuple[int, int, npt.NDArray[np.uint8] | None]] = []
    for k, (first, count) in enumerate(started.ranges):
        start = row0 + started.offsets[k] // block_size
        first_try = functools.partial(started.batch.take, k)
        for part_first, part_count, outcome in _read_range(
            reader, first, count, policy, budget, first_try=first_try
        ):
            rows = slice(start + part_first - first, start + part_first - first + part_count)
            landed.extend(_take_outcome(reads, rows, part_first, outcome, data, row0, block_size))
    return landed


def _take_outcome(
    reads: Reads,
    rows: slice,
    first: int,
    outcome: ReadOutcome | _InBuffer,
    data: npt.NDArray[np.uint8],
    row0: int,
    block_size: int,
) -> list[tuple[int, int, npt.NDArray[np.uint8] | None]]:
    """Account for one read outcome of `rows`; what landed, for the batch's parse."""
    count = rows.stop - rows.start
    if isinstance(outcome, Unread):
        # not read at all: treated like an unreadable block for the state (unchanged, or
        # uncertain if this cycle wrote it), but no read of it failed
        reads.readable[rows] = False
        reads.unread.append(_unjudged(UNCHECKED, first, count, {"reason": outcome.reason}))
        return []
    if isinstance(outcome, ReadFailure):
        reads.readable[rows] = False
        reads.errors.append(_unjudged(READ_ERROR, first, count, outcome.detail()))
        return []
    if isinstance(outcome, np.ndarray) and count * block_size < COPY_BELOW:
        at = (rows.start - row0) * block_size  # small: copied, parsed with its batch
        data[at : at + count * block_size] = outcome.view(np.uint8)
        return [(rows.start, rows.stop, None)]
    array = outcome if isinstance(outcome, np.ndarray) else None
    return [(rows.start, rows.stop, array)]


def _unjudged(cls: str, first: int, count: int, detail: dict[str, Any]) -> Finding:
    """A range whose content was not judged (unreadable, or not read): no generations."""
    return Finding(
        cls=cls, lba_first=first, lba_count=count, expected_gen=-1, observed_gen=-1, detail=detail
    )


@dataclass(frozen=True)
class ReadFailure:
    """A range whose read failed: how (eio, timeout, hang) and after how many attempts."""

    kind: str
    errno: int | None
    message: str
    attempts: int

    def detail(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "errno": self.errno,
            "error": self.message,
            "attempts": self.attempts,
        }


@dataclass(frozen=True)
class Unread:
    """A range the check meant to read and did not (a budget was spent): `unchecked`."""

    reason: str


ReadOutcome = npt.NDArray[np.uint8] | ReadFailure | Unread


@dataclass
class Budget:
    """What a check may still spend on failing reads: reads while splitting failing ranges,
    and reads that hang (each costs a whole timeout)."""

    reads: int
    hangs: int


def _read_range(
    read: readback.Reader,
    first: int,
    count: int,
    policy: ReadPolicy,
    budget: Budget,
    parent: ReadFailure | None = None,
    first_try: Callable[[], npt.NDArray[np.uint8] | None] | None = None,
) -> Iterator[tuple[int, int, ReadOutcome | _InBuffer]]:
    """Read `count` blocks; a failing range is split in halves down to single blocks, so a bad
    range is located exactly while good neighbours are still checked. A block is a read error
    only when a read of it alone failed: past the budget, what is left of a failing range and
    any range not read at all (the drive hung too often) is `Unread` (some of it may read fine;
    calling it a read error would invent failures). `first_try`: the range's first read was
    started ahead (data that landed in the caller's buffer: `_IN_BUFFER`)."""
    if budget.hangs <= 0:
        yield first, count, Unread("the drive hung too often in this check")
        return
    if parent is not None and budget.reads <= 0:
        yield first, count, Unread(f"read budget spent inside a failing range ({parent.kind})")
        return
    attempts = policy.attempts if count == 1 else 1
    outcome = _attempt(read, first, count, policy, attempts, budget, parent is not None, first_try)
    if not isinstance(outcome, ReadFailure) or count == 1:
        yield first, count, outcome
        return
    half = count // 2
    yield from _read_range(read, first, half, policy, budget, outcome)
    yield from _read_range(read, first + half, count - half, policy, budget, outcome)


class _InBuffer:
    """The outcome of a read that landed where the caller's buffer wanted it."""


_IN_BUFFER = _InBuffer()


def _attempt(
    read: readback.Reader,
    first: int,
    count: int,
    policy: ReadPolicy,
    attempts: int,
    budget: Budget,
    splitting: bool,
    first_try: Callable[[], npt.NDArray[np.uint8] | None] | None = None,
) -> ReadOutcome | _InBuffer:
    failure = ReadFailure("eio", None, "", 0)
    for attempt in range(1, attempts + 1):
        if splitting or attempt > 1:
            budget.reads -= 1
        try:
            if attempt == 1 and first_try is not None:
                ahead = first_try()
                return _IN_BUFFER if ahead is None else ahead
            return read.read(first, count)
        except readback.Hung:
            budget.hangs -= 1
            return ReadFailure("hang", None, f"no answer within {policy.timeout_s} s", attempt)
        except OSError as error:
            if error.errno in GONE_ERRNOS:
                raise DriveGone(error.errno, f"drive gone during the check: {error}") from error
            kind = "timeout" if error.errno == errno.ETIMEDOUT else "eio"
            failure = ReadFailure(kind, error.errno, str(error), attempt)
        if budget.reads <= 0:
            break
    return failure


COPY_BELOW = 64 << 10  # a read returned smaller than this is copied and parsed with its batch


def _parse_landed(
    sec: SectorSummary,
    landed: list[tuple[int, int, npt.NDArray[np.uint8] | None]],
    data: npt.NDArray[np.uint8],
    row0: int,
    block_size: int,
) -> None:
    """Parse what a batch read: rows in `data` (None) in runs as long as they are consecutive,
    rows returned as arrays of their own one read each."""
    run_start = run_stop = -1
    for start, stop, array in [*landed, (-1, -1, None)]:
        if array is None and start == run_stop and start >= 0:
            run_stop = stop
            continue
        if run_start >= 0:
            at = (run_start - row0) * block_size
            sec.fill(
                slice(run_start, run_stop), data[at : at + (run_stop - run_start) * block_size]
            )
            run_start = run_stop = -1
        if array is not None:
            sec.fill(slice(start, stop), array)
        elif start >= 0:
            run_start, run_stop = start, stop


PARSE_THREADS = 2  # batches parsed at once (a parse is slower than the reads on a busy CPU)
PARSE_THREAD_BYTES = 1 << 20  # a smaller batch is parsed inline (a thread's hand-off costs more)


class _Parser:
    """Parses a batch's rows on a helper thread when the batch is large (the C parse releases
    the GIL, so the next batch's reads and this parse overlap), inline when small. The helpers
    are `PARSE_THREADS` long-lived threads per checking thread: starting a thread per batch cost
    ~20 ms each on the loaded machine (start waits until the new thread runs). Batches are rows
    of their own, so two parses never write the same rows."""

    def __init__(self) -> None:
        self._pending: collections.deque[threading.Event] = collections.deque()
        self._error: list[BaseException] = []

    def start(self, parse: Callable[[], None], nbytes: int) -> threading.Event | None:
        """Parse now (None) or on a helper thread (the event it sets when done)."""
        if nbytes < PARSE_THREAD_BYTES:
            parse()
            return None
        done, error = threading.Event(), self._error

        def job() -> None:
            try:
                parse()
            except BaseException as failure:  # raised in the checker by join
                error.append(failure)
            finally:
                done.set()

        self._pending.append(done)
        _parse_jobs().put(job)
        return done

    def make_room(self) -> None:
        """Until fewer than `PARSE_THREADS` batches are being parsed (the oldest one's buffer is
        free again)."""
        while len(self._pending) >= PARSE_THREADS:
            self._pending.popleft().wait()
        if self._error:
            raise self._error.pop()

    def join(self) -> None:
        self.wait()
        if self._error:
            raise self._error.pop()

    def wait(self) -> None:
        """Until every batch being parsed is done (an error stays for `join`)."""
        while self._pending:
            self._pending.popleft().wait()


_parse_local = threading.local()


def _parse_jobs() -> queue.SimpleQueue[Callable[[], None]]:
    found: queue.SimpleQueue[Callable[[], None]] | None = getattr(_parse_local, "jobs", None)
    if found is not None:
        return found
    jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
    _parse_local.jobs = jobs

    def serve() -> None:
        while True:
            jobs.get()()

    for _ in range(PARSE_THREADS):
        threading.Thread(target=serve, name="check-parse", daemon=True).start()
    return jobs


BATCH_BYTES = 16 << 20  # read ahead and parsed at once: bounds the checker's read buffer
WINDOW_RANGES = 4096


def _batches(ranges: Iterator[tuple[int, int]], block_size: int) -> Iterator[list[tuple[int, int]]]:
    batch: list[tuple[int, int]] = []
    size = 0
    for first, count in ranges:
        if batch and (size + count * block_size > BATCH_BYTES or len(batch) == WINDOW_RANGES):
            yield batch
            batch, size = [], 0
        batch.append((first, count))
        size += count * block_size
    if batch:
        yield batch
