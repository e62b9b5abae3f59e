"""The native write engine's ring of batches (engine.c pfr_engine_loop; docs/decisions.md, "The
engine runs a ring of planned batches"):
a slot goes on to the next published batch while others finish the last one, a batch retires
only once all of it came back, and an engine whose next batch is not published yet waits for it
instead of ending."""

from __future__ import annotations

import ctypes
import shutil
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from rig.check import verify
from rig.io import media, workload_native
from rig.io.blockio import DirectTarget
from rig.io.ledger import CycleLog, LbaState
from rig.io.workload import Live, Workload, Writer, WriterContext
from rig.native import AioContext, BatchRing, EngineResult, engine_loop

BLOCK = 4096


def _writes(per_slot: list[int], first_gen: int = 1) -> tuple[np.ndarray, ...]:
    """A stripes plan: slot s writes per_slot[s] one-block writes into its own 1000 blocks."""
    lbas = [s * 1000 + np.arange(n, dtype=np.int64) for s, n in enumerate(per_slot)]
    n = sum(per_slot)
    return (
        np.concatenate([[0], np.cumsum(per_slot)]).astype(np.int64),
        np.zeros(n, dtype=np.uint8),
        np.concatenate(lbas),
        np.ones(n, dtype=np.uint32),
        np.arange(n, dtype=np.int64),
        np.full(n, first_gen, dtype=np.uint32),
        np.arange(1, n + 1, dtype=np.uint64),
    )


class _Engine:
    """engine_loop on an image file in a thread of its own, stopped and joined on exit."""

    def __init__(self, tmp_path: Path, slots: int, ring: BatchRing, shared: bool = False) -> None:
        self.shared = shared  # the stream layout: one queue taken by whichever slot is idle
        image = tmp_path / "target.img"
        with image.open("wb") as handle:
            handle.truncate(16 << 20)
        self.target = DirectTarget(str(image))
        self.aio = AioContext(slots + 1)
        self.stop = ctypes.c_int(0)
        self.live = (ctypes.c_int64 * Live.WORDS)()  # engine.c LIVE_N
        self.buffers = media.aligned_buffer(BLOCK * slots)
        self.stuck: list[bool] = []
        self.thread = threading.Thread(target=self._run, args=(slots, ring), daemon=True)

    def _run(self, slots: int, ring: BatchRing) -> None:
        self.stuck.append(
            engine_loop(
                self.aio,
                self.target.fileno(),
                slots,
                self.shared,
                BLOCK,
                1,
                False,
                0,
                int(5e9),
                self.buffers,
                BLOCK,
                np.arange(slots, dtype=np.uint16),
                ring,
                self.stop,
                self.live,
            )
        )

    def __enter__(self) -> _Engine:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.value = 1
        self.thread.join(30)
        self.aio.close()
        self.target.close()


def _collect(ring: BatchRing, timeout_s: float = 30.0) -> EngineResult:
    for _ in range(int(timeout_s / 0.05)):
        result = ring.collect()
        if result is not None:
            return result
        ring.wait(0.05)
    raise AssertionError("the engine did not retire the batch")


def test_a_slot_goes_on_to_the_next_batch_while_another_finishes_the_last(
    tmp_path: Path,
) -> None:
    ring = BatchRing(3, 4)
    ring.publish(*_writes([1, 40]))  # slot 0 is done with batch 0 long before slot 1
    ring.publish(*_writes([40, 1], first_gen=2))
    with _Engine(tmp_path, 2, ring) as engine:
        first, second = _collect(ring), _collect(ring)
        assert engine.thread.is_alive()  # nothing more published: it waits, it does not end
    assert engine.stuck == [False]
    for result in (first, second):
        assert (result.status == 0).all()
        assert (result.complete_ns >= result.issue_ns).all() and (result.issue_ns > 0).all()
    # slot 0 wrote batch 1 while slot 1 was still writing batch 0: the queue did not drain
    assert second.issue_ns[0] < first.complete_ns[1:].max()
    # batch 0 retired after its last completion; each slot's entries ran in order
    assert first.seconds > 0
    assert (np.diff(first.issue_ns[1:]) > 0).all() and (np.diff(second.issue_ns[:40]) > 0).all()
    assert (first.slot_of == np.array([0] + [1] * 40)).all()
    assert (second.slot_of == np.array([0] * 40 + [1])).all()
    assert int(engine.live[0]) == 82  # acknowledgements seen


def test_a_batch_published_after_the_engine_went_idle_still_runs(tmp_path: Path) -> None:
    ring = BatchRing(2, 4)
    ring.publish(*_writes([3, 3]))
    with _Engine(tmp_path, 2, ring) as engine:
        first = _collect(ring)
        ring.wait(0.2)  # the engine has nothing to do for a while
        assert engine.thread.is_alive()
        ring.publish(*_writes([2, 2], first_gen=2))
        second = _collect(ring)
        data = engine.target.read(1000, 2)
    assert (first.status == 0).all() and (second.status == 0).all()
    assert (second.issue_ns > first.complete_ns.max()).all()
    headers = media.parse(data)
    assert (headers.generation[:: BLOCK // 512] == 2).all()  # the second batch's writes landed


def _stream(lbas: np.ndarray) -> tuple[np.ndarray, ...]:
    """A stream plan of one-block writes at `lbas`, generation 1, op i + 1."""
    n = len(lbas)
    return (
        np.array([0, n], dtype=np.int64),
        np.zeros(n, dtype=np.uint8),
        lbas.astype(np.int64),
        np.ones(n, dtype=np.uint32),
        np.arange(n, dtype=np.int64),
        np.ones(n, dtype=np.uint32),
        np.arange(1, n + 1, dtype=np.uint64),
    )


@pytest.mark.parametrize("where", ["tmp_path", "tmpfs"])
def test_every_completion_is_taken_once_whether_read_from_the_ring_or_waited_for(
    tmp_path: Path, where: str
) -> None:
    """The engine reads completions from the AIO ring the kernel shares with it, and calls
    io_getevents only to wait: thousands of writes (the ring wraps many times) each complete
    exactly once, land, and are counted. On tmpfs a write completes inside io_submit, so every
    completion is already in the ring when the engine looks."""
    if where == "tmpfs":
        if not Path("/dev/shm").is_dir():
            pytest.skip("no /dev/shm")
        tmp_path = Path(tempfile.mkdtemp(prefix="rig-test-ring-", dir="/dev/shm"))
    try:
        lbas = np.random.default_rng(3).permutation(4096)[:3000]
        ring = BatchRing(2, 4)
        ring.publish(*_stream(lbas))
        with _Engine(tmp_path, 8, ring, shared=True) as engine:
            result = _collect(ring)
            data = engine.target.read(0, 4096)
        assert engine.stuck == [False]
        assert (result.status == 0).all() and (result.complete_ns >= result.issue_ns).all()
        assert int(engine.live[0]) == 3000  # acknowledgements: each completion taken once
        reaped = int(engine.live[5])  # Live.ring_reaped
        assert 0 <= reaped <= 3000
        if where == "tmpfs":
            assert reaped == 3000
        headers = media.parse(data)
        per_block = BLOCK // media.SECTOR
        assert (
            headers.state[lbas[:, None] * per_block + np.arange(per_block)] == media.VALID
        ).all()
        assert (headers.op_seq[lbas * per_block] == np.arange(1, 3001)).all()
        assert (headers.lba[lbas * per_block] == lbas).all()
        # record version 2: stamped into buffers prepared once (docs/decisions.md, "Record
        # version 2 stamps a prepared payload"), each block exactly what the numpy reference
        # makes of its header
        words = data.view(np.uint64).reshape(-1, media.WORDS)
        versions = (words[lbas * per_block, 0] >> np.uint64(32)) & np.uint64(0xFFFF)
        assert (versions == media.VERSION2).all()
        for lba in lbas[:20].tolist():
            head = words[lba * per_block]  # (one-block writes here)
            gens = words[lba * per_block : (lba + 1) * per_block : per_block, 3]
            record = media.WriteRecord(
                int(head[1]), int(head[4]), gens,
                int(head[5] >> np.uint64(32)) & 0xFFFF, int(head[6]), int(head[7]),
                int(head[5] >> np.uint64(48)),
            )  # fmt: skip
            expected = media.reference_build(record, BLOCK, media.VERSION2)
            assert np.array_equal(data[lba * BLOCK : (lba + 1) * BLOCK], expected)
    finally:
        if where == "tmpfs":
            shutil.rmtree(tmp_path, ignore_errors=True)


def test_stopping_retires_what_was_published_and_never_ran(tmp_path: Path) -> None:
    ring = BatchRing(3, 4)
    with _Engine(tmp_path, 2, ring) as engine:
        ring.publish(*_writes([2, 2]))
        first = _collect(ring)
        engine.stop.value = 1
        engine.thread.join(30)
        ring.publish(*_writes([2, 2], first_gen=2))  # too late: the engine has ended
    assert not engine.thread.is_alive() and engine.stuck == [False]
    assert (first.status == 0).all()
    assert ring.collect() is None  # never retired: the caller logs nothing of it


class _LateRing(BatchRing):
    """A ring that plays one interleaving of the writer's two threads: the planner thread looks
    for a retired batch an instant before the engine retires it (and stops, and the writer marks
    the run finished). `stop` is the writer's stop event; set here so the engine ends."""

    stop: threading.Event | None = None
    played = False  # the interleaving happened (else the test proves nothing)

    def __init__(self, size: int, timers: int) -> None:
        super().__init__(size, timers)
        self._played = False
        self._finished = threading.Event()

    def collect(self) -> EngineResult | None:
        # (once a batch was retired, so the engine has written: on a loaded host the first look
        # can come before the engine ran any I/O, and a stop then leaves nothing to check)
        if not self._played and 0 < self.collected < self.published:
            self._played = _LateRing.played = True
            assert self.stop is not None
            self.stop.set()  # the cut: the engine drains, retires every batch and returns ...
            assert self._finished.wait(30)  # ... and the writer sets `finished` (then wakes us)
            return None  # what this look saw: the batch was not retired yet
        return super().collect()

    def wake(self) -> None:
        self._finished.set()
        super().wake()


def test_batches_retired_as_the_run_finishes_are_still_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write the engine ran is in the ledger, even when the planner thread's last look
    found nothing retired and the run finished right after it. Unlogged writes on the drive are
    generations the checker never planned: an honest drive's blocks were reported as flying
    writes in CI when this happened."""
    image = tmp_path / "target.img"
    with image.open("wb") as handle:
        handle.truncate(8 << 20)
    target = DirectTarget(str(image))
    monkeypatch.setattr(workload_native, "BatchRing", _LateRing)
    try:
        state = LbaState(0, target.nblocks)
        log = CycleLog()
        stop = threading.Event()
        _LateRing.stop, _LateRing.played = stop, False
        load = Workload(workers=4, write_blocks=(1, 4), flush_every=0, engine="native")
        writer = Writer(load, WriterContext(42, target, state, log, stop), seed=5)
        writer.start()
        assert writer.join(30)
        assert _LateRing.played
        on_target = media.parse(target.read(0, target.nblocks))
        per_block = BLOCK // media.SECTOR
        written = np.flatnonzero(on_target.state.reshape(-1, per_block)[:, 0] == media.VALID)
        assert len(written) > 0  # the engine did write before the stop
        logged: set[int] = set()
        if log.write_count:
            for first, count in zip(log.column("first_lba"), log.column("nblocks"), strict=True):
                logged.update(range(int(first), int(first) + int(count)))
        assert set(written.tolist()) <= logged
        end = int(log.column("complete_ns").max()) + 1
        result = verify.check(
            42,
            state,
            log,
            log.durability(end, 0),
            np.zeros(0, dtype=np.int64),
            target.read,
            target.block_size,
        )
        assert [f for f in result.findings if f.failure] == []
    finally:
        _LateRing.stop = None
        target.close()
