"""The real O_DIRECT target and the production writer + checker on real block devices."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rig.check import verify
from rig.io import media
from rig.io.blockio import DirectTarget, flush_firing, write_firing
from rig.io.ledger import CycleLog, LbaState
from rig.io.workload import Workload, Writer, WriterContext
from rig.native.trigger import Trigger
from tests.loopdev import attached, loop_available


def _image(tmp_path: Path, mib: int = 8) -> Path:
    image = tmp_path / "drive.img"
    with image.open("wb") as handle:
        handle.truncate(mib << 20)
    return image


def test_direct_target_round_trips_blocks_in_a_regular_file(tmp_path: Path) -> None:
    target = DirectTarget(str(_image(tmp_path)))
    try:
        record = media.WriteRecord(3, 10, np.array([1, 1], dtype=np.uint64), 0, 1, 5)
        data = media.build(record, target.block_size)
        target.write(10, data, durable=True)
        target.flush()
        assert np.array_equal(target.read(10, 2), data)
        assert target.nblocks == (8 << 20) // 4096
    finally:
        target.close()


def test_a_target_without_a_native_completion_fires_the_trigger_once_the_call_returned(
    tmp_path: Path,
) -> None:
    """A real device's write returns through the kernel: the trigger fires after it, timed
    from the completion instant stamped then (rig/io/blockio.py `write_firing`)."""
    target = DirectTarget(str(_image(tmp_path)))
    try:
        record = media.WriteRecord(3, 10, np.array([1], dtype=np.uint64), 0, 1, 5)
        data = media.build(record, target.block_size)
        trigger = Trigger.after(0.002)
        before = time.monotonic_ns()
        done = write_firing(target, 10, data, True, trigger)
        assert before <= trigger.event_ns == done <= trigger.armed_ns
        assert trigger.edge_ns == max(done + 2_000_000, trigger.armed_ns)
        flushed = Trigger.after(0.0)
        assert flush_firing(target, flushed) == flushed.event_ns > done
    finally:
        target.close()


@pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "loop devices work")
def test_writer_and_checker_on_a_loop_device_find_nothing_without_a_cut(tmp_path: Path) -> None:
    """Without a power cut every completed write must read back: no failure, no allowed loss."""
    with attached(_image(tmp_path)) as devnode:
        target = DirectTarget(devnode)
        try:
            assert target.block_size == 4096
            state = LbaState(0, target.nblocks)
            log = CycleLog()
            stop = threading.Event()
            writer = Writer(
                Workload(workers=8, write_blocks=(1, 4, 16), flush_every=4),
                WriterContext(42, target, state, log, stop),
                seed=1,
            )
            writer.start()
            threading.Timer(0.5, stop.set).start()
            assert writer.join(10)
            assert log.write_count > 50 and log.flush_count > 5
            assert (log.column("status") == 0).all()
            end = max(log.column("complete_ns").max(), log.column("flush_complete_ns").max())
            durability = log.durability(int(end) + 1, 0)
            result = verify.check(
                42,
                state,
                log,
                durability,
                np.zeros(0, dtype=np.int64),
                target.read,
                target.block_size,
            )
            assert [f for f in result.findings if f.failure] == []
            assert result.nondurable_writes == result.nondurable_survived
        finally:
            target.close()
