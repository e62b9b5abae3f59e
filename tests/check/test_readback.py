"""Reading back for the checker (rig/check/readback.py): at queue depth on an O_DIRECT descriptor,
one read at a time under a long-lived guard otherwise, and the same verdicts either way."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from rig.check import readback, verify
from rig.check.verify import reads as verify_reads
from rig.io.blockio import DirectTarget
from rig.io.ledger import LbaState
from rig.io.media import aligned_buffer
from tests.checker_scenario import BS, CAMPAIGN, Scenario


def _target_with(tmp_path: Path, image: np.ndarray) -> DirectTarget:
    path = tmp_path / "drive.img"
    path.write_bytes(image.tobytes())
    return DirectTarget(str(path), BS)


def _damaged_scenario() -> Scenario:
    """A cycle with a lost durable write, a corrupt sector, a torn block and a flying write."""
    s = Scenario(nblocks=1024)
    s.write(0, 1024, issue=0, complete=1)
    s.flush(2, 3)
    s.check(cut=100)  # commit generation 1 everywhere
    s.new_cycle()
    s.write(10, 8, issue=10, complete=11, land=False)  # durable (flushed below), lost
    torn = s.write(300, 1, issue=12, complete=13, land=False)
    s.image[300 * BS : 300 * BS + 2048] = torn[:2048]  # half of it landed
    s.write(500, 4, issue=14, complete=15)
    s.image[501 * BS + 700] ^= 0xFF  # a bit flipped in a block written this cycle
    s.image[801 * BS : 802 * BS] = s.image[900 * BS : 901 * BS]  # block 900 at 801 (sampled)
    s.flush(20, 21)
    return s


def test_the_queue_reads_what_the_target_reads(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, 256 * BS, dtype=np.uint8)
    target = _target_with(tmp_path, image)
    try:
        reader = readback.reader_for(target.read, BS, 5.0)
        assert isinstance(reader, readback.AioReader)
        ranges = [(0, 1), (7, 32), (100, 3), (255, 1), (40, 60)]
        offsets = np.cumsum([0] + [c * BS for _, c in ranges[:-1]]).tolist()
        out = reader.buffer(sum(c for _, c in ranges) * BS)
        reader.read_ahead(ranges, out, offsets)
        for k, (first, count) in enumerate(ranges):
            assert reader.take(k) is None  # in the window's buffer
            got = out[offsets[k] : offsets[k] + count * BS]
            assert np.array_equal(got, target.read(first, count))
        assert np.array_equal(reader.read(7, 2), image[7 * BS : 9 * BS])
    finally:
        target.close()


def test_a_read_past_the_end_fails_as_the_target_fails(tmp_path: Path) -> None:
    target = _target_with(tmp_path, np.zeros(16 * BS, dtype=np.uint8))
    try:
        reader = readback.reader_for(target.read, BS, 5.0)
        out = reader.buffer(6 * BS)
        reader.read_ahead([(2, 2), (15, 4)], out, [0, 2 * BS])
        assert reader.take(0) is None
        with pytest.raises(OSError) as queued:
            reader.take(1)
        with pytest.raises(OSError) as direct:
            target.read(15, 4)
        assert queued.value.errno == direct.value.errno == errno.EIO
        assert "short read" in str(queued.value)
    finally:
        target.close()


def test_windows_read_ahead_of_each_other_each_get_their_data(tmp_path: Path) -> None:
    """The stream serves window after window in order: windows started before the last one is
    taken, and a single read queued behind them, each land in their own buffer."""
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, 512 * BS, dtype=np.uint8)
    target = _target_with(tmp_path, image)
    try:
        reader = readback.reader_for(target.read, BS, 5.0)
        before = readback.queue_stats()
        plans = [[(0, 40), (100, 3)], [(200, 64), (300, 1), (301, 2)], [(400, 100)]]
        started = []
        for ranges in plans:
            offsets = np.cumsum([0] + [c * BS for _, c in ranges[:-1]]).tolist()
            out = aligned_buffer(sum(c for _, c in ranges) * BS)
            out[:] = 0xAA
            started.append((ranges, offsets, out, reader.read_ahead(ranges, out, offsets)))
        assert np.array_equal(reader.read(50, 5), image[50 * BS : 55 * BS])
        for ranges, offsets, out, window in started:
            for k, (first, count) in enumerate(ranges):
                assert window.take(k) is None
                got = out[offsets[k] : offsets[k] + count * BS]
                assert np.array_equal(got, image[first * BS : (first + count) * BS])
            window.finish()
        inflight, busy = (b - a for a, b in zip(before, readback.queue_stats(), strict=True))
        assert busy > 0 and inflight >= busy  # the stream's counters: >= 1 read whenever busy
    finally:
        target.close()


def test_a_window_is_read_whole_only_when_every_range_read_in_full(tmp_path: Path) -> None:
    image = np.random.default_rng(8).integers(0, 256, 64 * BS, dtype=np.uint8)
    target = _target_with(tmp_path, image)
    try:
        reader = readback.reader_for(target.read, BS, 5.0)
        good = aligned_buffer(6 * BS)
        whole = reader.read_ahead([(0, 2), (10, 4)], good, [0, 2 * BS])
        bad = aligned_buffer(6 * BS)
        short = reader.read_ahead([(20, 2), (62, 4)], bad, [0, 2 * BS])  # past the end
        assert whole.read_whole()
        assert np.array_equal(good[2 * BS :], image[10 * BS : 14 * BS])
        assert not short.read_whole()
        assert short.take(0) is None
        with pytest.raises(OSError) as failed:
            short.take(1)
        assert failed.value.errno == errno.EIO
        assert (
            not readback.reader_for(lambda a, n: target.read(a, n), BS, 5.0)
            .read_ahead([(0, 1)], good, [0])
            .read_whole()
        )  # one read at a time: each range is read when taken
    finally:
        target.close()


def test_a_finished_window_has_nothing_left_in_flight(tmp_path: Path) -> None:
    """Ranges of a window not taken (the budget was spent) are not read once it is finished, or
    have completed: its buffer may be reused for the next window."""
    image = np.random.default_rng(9).integers(0, 256, 2048 * BS, dtype=np.uint8)
    target = _target_with(tmp_path, image)
    try:
        reader = readback.reader_for(target.read, BS, 5.0)
        ranges = [(first, 1) for first in range(0, 2048, 2)]  # many small reads
        out = aligned_buffer(len(ranges) * BS)
        window = reader.read_ahead(ranges, out, [k * BS for k in range(len(ranges))])
        after = aligned_buffer(8 * BS)
        window.finish()
        assert isinstance(window, readback.AioBatch)
        assert set(window.state.tolist()) <= {readback.RQ_DONE, readback.RQ_UNSENT}
        done = np.flatnonzero(window.state == readback.RQ_DONE)
        for k in done.tolist():  # what did complete is the data
            first = ranges[k][0]
            assert np.array_equal(out[k * BS : (k + 1) * BS], image[first * BS : (first + 1) * BS])
        snapshot = out.copy()
        next_window = reader.read_ahead([(1, 8)], after, [0])
        assert next_window.take(0) is None
        assert np.array_equal(after, image[BS : 9 * BS])
        assert np.array_equal(out, snapshot)  # nothing of the finished window landed since
    finally:
        target.close()


def test_checking_at_queue_depth_gives_the_verdicts_of_one_read_at_a_time(tmp_path: Path) -> None:
    s = _damaged_scenario()
    target = _target_with(tmp_path, s.image)
    try:
        results = {}
        for name, read in {"queued": target.read, "serial": lambda a, n: target.read(a, n)}.items():
            state = LbaState.from_bytes(0, s.state.to_bytes())
            result = verify.check(
                CAMPAIGN,
                state,
                s.log,
                s.log.durability(100, 0),
                np.arange(0, 1024, 3),
                read,
                BS,
                max_read_blocks=16,
                policy=verify.ReadPolicy(timeout_s=10.0),
            )
            results[name] = (result, state.committed[np.arange(1024)].tolist())
        queued, serial = results["queued"], results["serial"]
        assert queued[0].findings == serial[0].findings
        assert queued[1] == serial[1]
        found = {f.cls for f in queued[0].findings if f.failure}
        assert {verify.LOST_DURABLE, verify.SHORN, verify.CORRUPTION, verify.FLYING} <= found
    finally:
        target.close()


def test_many_small_windows_through_the_stream_and_two_parse_threads_give_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows of 128 KiB, each parsed on a parse thread (two at once) while later windows are
    read into the four buffers in turn: the findings and committed state of reading it all as
    one window, one read at a time."""
    s = _damaged_scenario()
    target = _target_with(tmp_path, s.image)

    def run(read: verify.BlockReader) -> tuple[list[verify.Finding], list[int]]:
        state = LbaState.from_bytes(0, s.state.to_bytes())
        result = verify.check(
            CAMPAIGN, state, s.log, s.log.durability(100, 0), np.arange(0, 1024, 3), read, BS,
            max_read_blocks=16, policy=verify.ReadPolicy(timeout_s=10.0),
        )  # fmt: skip
        return result.findings, state.committed[np.arange(1024)].tolist()

    try:
        whole = run(lambda a, n: target.read(a, n))  # one 4 MiB window, one read at a time
        monkeypatch.setattr(verify_reads, "BATCH_BYTES", 128 << 10)
        monkeypatch.setattr(verify_reads, "PARSE_THREAD_BYTES", 64 << 10)
        # at least 342 blocks checked: 10 windows or more, so every buffer is reused
        assert len(np.arange(0, 1024, 3)) * BS > 2 * readback.BUFFERS * (128 << 10)
        streamed = run(target.read)
    finally:
        target.close()
    assert streamed == whole
    found = {f.cls for f in streamed[0] if f.failure}
    assert {verify.LOST_DURABLE, verify.SHORN, verify.CORRUPTION, verify.FLYING} <= found


def test_a_timed_read_needs_no_thread_of_its_own() -> None:
    s = Scenario()
    s.write(0, 64, issue=0, complete=1)
    s.flush(2, 3)
    guards_before = {t.ident for t in threading.enumerate() if t.name == "check-read-guard"}
    started = []
    real_start = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    threading.Thread.start = counting_start  # type: ignore[method-assign]
    try:
        result = verify.check(
            CAMPAIGN,
            s.state,
            s.log,
            s.log.durability(100, 0),
            np.arange(0, 64, 2),  # scattered: 33 reads
            s.read,
            BS,
            max_read_blocks=1,
            policy=verify.ReadPolicy(timeout_s=5.0),
        )
    finally:
        threading.Thread.start = real_start  # type: ignore[method-assign]
    assert result.blocks_checked == 64 and not [f for f in result.findings if f.failure]
    assert len(started) <= 1  # at most this thread's guard, started once for every read
    guards = {t.ident for t in threading.enumerate() if t.name == "check-read-guard"}
    assert len(guards - guards_before) <= 1


def test_a_drive_gone_under_the_queue_stops_the_check_as_before(tmp_path: Path) -> None:
    """A removed disk's size drops to 0 and its reads end at once: through the queue as through
    `DirectTarget.read`, that is ENODEV, and the check stops (`DriveGone`), no read errors."""
    s = Scenario(nblocks=16)
    s.write(0, 16, issue=0, complete=1)
    s.flush(2, 3)
    target = _target_with(tmp_path, s.image)
    try:
        os.truncate(tmp_path / "drive.img", 0)
        with pytest.raises(verify.DriveGone):
            verify.check(
                CAMPAIGN, s.state, s.log, s.log.durability(100, 0), np.zeros(0, dtype=np.int64),
                target.read, BS, policy=verify.ReadPolicy(timeout_s=5.0),
            )  # fmt: skip
        with pytest.raises(OSError) as direct:
            target.read(0, 1)
        assert direct.value.errno == errno.ENODEV
    finally:
        target.close()


class _CountingReader(readback.SerialReader):
    """A reader that counts the windows started (`read_ahead`), reading as SerialReader does."""

    def __init__(self, image: np.ndarray) -> None:
        super().__init__(lambda first, count: image[first * BS : (first + count) * BS], None)
        self.started = 0

    def read_ahead(
        self, ranges: readback.Ranges, out: np.ndarray, offsets: list[int]
    ) -> readback.ReadBatch:
        self.started += 1
        return super().read_ahead(ranges, out, offsets)


def test_entering_a_read_back_starts_a_window_in_every_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing is parsed yet on entering, so every buffer gets a window; then one window is
    started per window taken, and every window is read (docs/decisions.md, "Verification reads
    go in batches, at queue depth, with a timeout per read")."""
    monkeypatch.setattr(verify_reads, "BATCH_BYTES", 8 * BS)  # 64 blocks: 8 windows
    image = np.zeros(64 * BS, dtype=np.uint8)
    reader = _CountingReader(image)
    checked = np.arange(64, dtype=np.int64)
    policy = verify.ReadPolicy()
    budget = verify_reads.Budget(policy.max_reads, policy.max_hangs)
    with verify_reads.ReadBack(checked, reader, BS, 8, policy, budget) as reading:
        assert reader.started == readback.BUFFERS
        reads = reading.collect()
    assert reader.started == 8
    assert reads.readable.all()
