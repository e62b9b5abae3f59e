"""Workloads: what the planner asks for (sizes, skew, order, flush cadence) and what both engines
do with it on real O_DIRECT targets (the ledger contract: docs/decisions.md, "No two requests in
flight overlap, and generations are never reused" and "Durability is judged on the host's own
timestamps")."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rig.check import verify
from rig.io import media
from rig.io.blockio import DirectTarget
from rig.io.ledger import NOT_DONE, CycleLog, LbaState
from rig.io.workload import (
    FLUSH,
    JESD219_SIZES,
    TIMER_WORKER,
    WRITE,
    SlotPlanner,
    Workload,
    Writer,
    WriterContext,
    block_sizes,
)
from tests.loopdev import attached, loop_available


def _planner(load: Workload, stripe: int = 100_000, block: int = 4096) -> SlotPlanner:
    state = LbaState(0, stripe * 2)
    return SlotPlanner(load, 1, stripe, stripe, state, 0, block, seed=3)


def test_jesd219_sizes_follow_the_standard_mix_in_512_byte_blocks() -> None:
    plan = _planner(Workload(size_mix="jesd219", flush_every=0), block=512).next(40_000)
    sizes, counts = np.unique(plan.nblocks, return_counts=True)
    expected = {size // 512: share for size, share in JESD219_SIZES}
    assert set(sizes.tolist()) == set(expected)
    for size, count in zip(sizes.tolist(), counts.tolist(), strict=True):
        assert abs(count / 40_000 - expected[size]) < 0.01, size


def test_jesd219_sizes_below_a_block_round_up_to_one_block() -> None:
    sizes, weights = block_sizes(Workload(size_mix="jesd219"), 4096)
    assert sizes.tolist() == [1, 2, 4, 8, 16]
    assert weights[0] == pytest.approx(0.77)  # 512 B .. 4 KiB all become one 4 KiB block
    assert weights.sum() == pytest.approx(1.0)


def test_jesd219_skew_sends_half_the_writes_to_the_first_5_percent() -> None:
    planner = _planner(Workload(lba_skew="jesd219", write_blocks=(1,), flush_every=0))
    offsets = planner.next(40_000).lba - planner.first
    assert offsets.min() >= 0 and offsets.max() < planner.stripe
    share = np.histogram(offsets, bins=[0, 5_000, 20_000, 100_000])[0] / 40_000
    assert np.allclose(share, [0.5, 0.3, 0.2], atol=0.01)


def test_uniform_random_writes_stay_inside_the_stripe_and_spread() -> None:
    planner = _planner(Workload(write_blocks=(1, 32), flush_every=0), stripe=1000)
    plan = planner.next(5000)
    ends = plan.lba + plan.nblocks
    assert plan.lba.min() >= planner.first and ends.max() <= planner.first + planner.stripe
    assert np.histogram(plan.lba - planner.first, bins=4, range=(0, 1000))[0].min() > 1000


def test_sequential_writes_follow_each_other_and_wrap_at_the_stripe_end() -> None:
    planner = _planner(Workload(sequential=True, write_blocks=(3,), flush_every=0), stripe=10)
    lbas = np.concatenate([planner.next(2).lba, planner.next(3).lba]) - planner.first
    assert lbas.tolist() == [0, 3, 6, 0, 3]


def test_flush_after_every_nth_write_of_a_slot_across_batches() -> None:
    planner = _planner(Workload(flush_every=3))
    kinds = np.concatenate([planner.next(4).kind, planner.next(4).kind, planner.next(1).kind])
    w, f = WRITE, FLUSH
    assert kinds.tolist() == [w, w, w, f, w, w, w, f, w, w, w, f]


def test_planned_generations_are_reserved_per_block() -> None:
    state = LbaState(0, 16)
    planner = SlotPlanner(
        Workload(write_blocks=(4,), sequential=True, flush_every=0),
        0, 0, 8, state, 0, 4096, seed=1,
    )  # fmt: skip
    plan = planner.next(3)  # blocks 0-3, 4-7, then 0-3 again
    assert plan.gens.tolist() == [1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2]
    assert state.issued[np.arange(8)].tolist() == [2, 2, 2, 2, 1, 1, 1, 1]


# --- both engines on real O_DIRECT targets ------------------------------------------------------

LOADS = {
    "random-flush-every-4": Workload(workers=8, write_blocks=(1, 4, 16), flush_every=4),
    "every-write-durable": Workload(workers=4, flush_every=0, durable_writes=True),
    "timed-flush": Workload(workers=4, flush_every=0, flush_every_ms=2.0),
    "never-flush": Workload(workers=4, flush_every=0),
    "single-thread-sequential": Workload(workers=1, sequential=True, write_blocks=(8,)),
    "concurrent-sequential": Workload(workers=6, sequential=True, write_blocks=(2, 32)),
    "jesd219": Workload(workers=8, size_mix="jesd219", lba_skew="jesd219", flush_every=8),
    "stream-sequential": Workload(
        workers=8, layout="stream", sequential=True, write_blocks=(4, 32), flush_every=16
    ),
    "stream-random": Workload(workers=16, layout="stream", write_blocks=(1, 8), flush_every=0),
}


def _image(tmp_path: Path, mib: int = 32) -> Path:
    image = tmp_path / "target.img"
    with image.open("wb") as handle:
        handle.truncate(mib << 20)
    return image


def _run(
    target: DirectTarget, load: Workload, seconds: float = 0.3
) -> tuple[Writer, CycleLog, LbaState]:
    state = LbaState(0, target.nblocks)
    log = CycleLog()
    stop = threading.Event()
    writer = Writer(load, WriterContext(42, target, state, log, stop), seed=5)
    writer.start()
    time.sleep(seconds)
    stop.set()
    assert writer.join(10)
    return writer, log, state


def _check_ledger_contract(log: CycleLog, load: Workload, nblocks: int) -> None:
    issue, complete = log.column("issue_ns"), log.column("complete_ns")
    assert log.write_count > 0
    assert (log.column("status") == 0).all() and (complete != NOT_DONE).all()
    assert (issue <= complete).all()
    worker, first, count = log.column("worker"), log.column("first_lba"), log.column("nblocks")
    if load.layout == "stripes":
        stripe = nblocks // load.workers
        assert ((first // stripe) == worker).all()
        assert (((first + count - 1) // stripe) == worker).all()
    # no two writes to the same block were ever in flight together
    block = (
        np.repeat(first, count)
        + np.arange(int(count.sum()))
        - np.repeat(np.cumsum(count) - count, count)
    )
    write = np.repeat(np.arange(len(first)), count)
    order = np.lexsort((issue[write], block))
    block, write = block[order], write[order]
    same = block[1:] == block[:-1]
    assert (issue[write[1:]][same] >= complete[write[:-1]][same]).all()
    # one request in flight per slot: its writes and flushes never overlap in time
    for slot in range(load.workers):
        mine = worker == slot
        f_mine = log.column("flush_worker") == slot
        spans = np.concatenate(
            [
                np.stack([issue[mine], complete[mine]], axis=1),
                np.stack(
                    [log.column("flush_issue_ns")[f_mine], log.column("flush_complete_ns")[f_mine]],
                    axis=1,
                ),
            ]
        )
        spans = spans[np.argsort(spans[:, 0])]
        assert (spans[1:, 0] >= spans[:-1, 1]).all(), slot
    assert (log.column("fua") == int(load.durable_writes)).all()


@pytest.mark.parametrize("engine", ["native", "threads"])
@pytest.mark.parametrize("name", list(LOADS))
def test_engines_keep_the_ledger_contract_and_everything_reads_back(
    tmp_path: Path, engine: str, name: str
) -> None:
    load = LOADS[name]
    load = Workload(**{**load.__dict__, "engine": engine})
    target = DirectTarget(str(_image(tmp_path)))
    try:
        writer, log, state = _run(target, load)
        assert writer.engine == engine
        _check_ledger_contract(log, load, target.nblocks)
        flushes = log.column("flush_worker")
        if load.flush_every:
            assert (flushes != TIMER_WORKER).sum() >= log.write_count // load.flush_every - 8
        if load.flush_every_ms:
            assert (flushes == TIMER_WORKER).sum() > 0
        if not load.flush_every and not load.flush_every_ms:
            assert len(flushes) == 0
        end = max(int(log.column("complete_ns").max()), int(log.column("issue_ns").max()))
        result = verify.check(
            42,
            state,
            log,
            log.durability(end + 1, 0),
            np.zeros(0, dtype=np.int64),
            target.read,
            target.block_size,
        )
        assert [f for f in result.findings if f.failure] == []
        assert result.nondurable_writes == result.nondurable_survived
        # the headers on the target name the slot as worker and carry the ledger's op counts
        last = int(np.argmax(log.column("complete_ns")))
        sectors = media.parse(target.read(int(log.column("first_lba")[last]), 1))
        assert int(sectors.worker[0]) == int(log.column("worker")[last])
        assert int(sectors.op_seq[0]) == int(log.column("op_seq")[last])
    finally:
        target.close()


@pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "loop devices work")
@pytest.mark.parametrize("engine", ["native", "threads"])
def test_write_errors_end_each_slot_and_are_logged(tmp_path: Path, engine: str) -> None:
    """A region that runs past the device's end: writes there fail, their slots stop at their
    first error while the others go on, and every failure is in the ledger as not completed."""
    with attached(_image(tmp_path, mib=4)) as devnode:
        target = DirectTarget(devnode)
        try:
            load = Workload(workers=4, write_blocks=(1,), flush_every=0, engine=engine)
            state = LbaState(0, target.nblocks * 2)  # slots 2 and 3 lie beyond the end
            log = CycleLog()
            stop = threading.Event()
            writer = Writer(load, WriterContext(1, target, state, log, stop), seed=2)
            writer.start()
            time.sleep(0.2)
            stop.set()
            assert writer.join(10)
            failed = log.column("status") != 0
            assert sorted(log.column("worker")[failed].tolist()) == [2, 3]  # one each, then stop
            assert (log.column("complete_ns")[failed] == NOT_DONE).all()
            worker = log.column("worker")
            assert (worker == 0).sum() > 0 and (worker == 1).sum() > 0
        finally:
            target.close()


def test_native_engine_is_refused_for_a_target_without_a_descriptor() -> None:
    class NoDescriptor:
        block_size = 4096
        nblocks = 1024

    state = LbaState(0, 1024)
    context = WriterContext(1, NoDescriptor(), state, CycleLog(), threading.Event())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="descriptor"):
        Writer(Workload(engine="native"), context, seed=1).start()


def test_campaign_file_sets_the_workload_and_refuses_unknown_choices() -> None:
    from rig.config.campaign_file import parse
    from rig.errors import UserError

    head = '[campaign]\nname = "x"\ncycles = 1\n[station]\nkind = "manual"\n'
    drive = '[[drive]]\nchannel = 0\nwwn = "0x1"\n'
    text = (
        head + '[workload]\nsize_mix = "jesd219"\nlba_skew = "jesd219"\nflush_every_ms = 2.5\n'
        'engine = "threads"\n' + drive
    )
    load = parse(text).workload
    assert (load.size_mix, load.lba_skew, load.flush_every_ms, load.engine) == (
        "jesd219", "jesd219", 2.5, "threads"
    )  # fmt: skip
    with pytest.raises(UserError, match="size_mix must be one of uniform, jesd219"):
        parse(head + '[workload]\nsize_mix = "tpc"\n' + drive)


def test_entries_given_back_come_first_with_their_generations_and_cadence() -> None:
    planner = _planner(Workload(flush_every=2, write_blocks=(1, 3)))
    first = planner.next(3)  # W W F W
    planner.give_back(first, 1)  # only the first write was issued
    again = planner.next(1)
    assert again.kind.tolist() == [WRITE, FLUSH, WRITE, WRITE, FLUSH]
    assert again.op_seq[:3].tolist() == first.op_seq[1:].tolist()
    for i in (0, 2):  # the carried writes keep their generations
        n = int(first.nblocks[i + 1])
        start, mine = int(first.gen_offset[i + 1]), int(again.gen_offset[i])
        assert again.gens[mine : mine + n].tolist() == first.gens[start : start + n].tolist()


@pytest.mark.parametrize("engine", ["native", "threads"])
def test_a_crowded_stream_holds_back_writes_that_would_overlap_one_in_flight(
    tmp_path: Path, engine: str
) -> None:
    """16 slots on a 64-block region of 8-block random writes: most new writes collide with one
    in flight; none may be issued before that one completed, and all read back."""
    load = Workload(workers=16, layout="stream", write_blocks=(8,), flush_every=0, engine=engine)
    target = DirectTarget(str(_image(tmp_path, mib=1)))
    try:
        state, log, stop = LbaState(0, 64), CycleLog(), threading.Event()
        writer = Writer(load, WriterContext(9, target, state, log, stop), seed=4)
        writer.start()
        time.sleep(0.3)
        stop.set()
        assert writer.join(10)
        assert log.write_count > 20
        _check_ledger_contract(log, load, 64)
        end = int(log.column("complete_ns").max())
        result = verify.check(
            9, state, log, log.durability(end + 1, 0), np.zeros(0, dtype=np.int64),
            target.read, target.block_size,
        )  # fmt: skip
        assert [f for f in result.findings if f.failure] == []
    finally:
        target.close()


def test_campaign_file_sets_the_layout() -> None:
    from rig.config.campaign_file import parse
    from rig.errors import UserError

    head = '[campaign]\nname = "x"\ncycles = 1\n[station]\nkind = "manual"\n'
    drive = '[[drive]]\nchannel = 0\nwwn = "0x1"\n'
    assert parse(head + '[workload]\nlayout = "stream"\n' + drive).workload.layout == "stream"
    with pytest.raises(UserError, match="layout must be one of stripes, stream"):
        parse(head + '[workload]\nlayout = "zigzag"\n' + drive)


class _BuggyTarget:
    """A target whose write hits a bug (not an I/O error) after a few writes."""

    block_size = 4096
    nblocks = 4096

    def __init__(self) -> None:
        self.writes = 0

    def write(self, lba: int, data: np.ndarray, durable: bool = False) -> None:
        self.writes += 1
        if self.writes > 5:
            raise RuntimeError("bug in the target")

    def read(self, lba: int, count: int) -> np.ndarray:
        return np.zeros(count * self.block_size, dtype=np.uint8)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_writer_thread_that_crashes_is_a_rig_error_not_a_quiet_cycle() -> None:
    from rig.errors import RigError

    stop = threading.Event()
    state, log = LbaState(0, 4096), CycleLog()
    writer = Writer(
        Workload(workers=2, flush_every=0),
        WriterContext(1, _BuggyTarget(), state, log, stop),
        seed=1,
    )
    writer.start()
    deadline = time.monotonic() + 30
    while writer.crash is None and time.monotonic() < deadline:  # no timing claim: just wait
        time.sleep(0.01)
    assert stop.is_set()  # the crash stopped the other writers
    with pytest.raises(RigError, match="writer thread crashed: RuntimeError"):
        writer.join(5.0)
    assert writer.join(5.0, raise_crash=False)  # clean-up does not raise again


@pytest.mark.parametrize("layout", ["stripes", "stream"])
def test_a_sequential_stream_goes_on_in_the_next_writer(tmp_path: Path, layout: str) -> None:
    """Endurance runs one writer per interval: each must go on where the last one stopped, or a
    sequential workload rewrites the same first stretch of each stripe interval after interval
    and never fills the drive."""
    load = Workload(workers=4, sequential=True, write_blocks=(8,), flush_every=0, layout=layout)
    target = DirectTarget(str(_image(tmp_path, mib=64)))
    try:
        state = LbaState(0, target.nblocks)
        planners = 1 if layout == "stream" else 4
        size = target.nblocks // planners
        start_at: list[int] = []
        ends: list[list[int]] = []
        for seed in (5, 6, 7):
            log = CycleLog()
            stop = threading.Event()
            context = WriterContext(42, target, state, log, stop)
            writer = Writer(load, context, seed=seed, start_at=start_at)
            writer.start()
            time.sleep(0.1)
            stop.set()
            assert writer.join(10)
            assert log.write_count > 0
            first, op = log.column("first_lba"), log.column("op_seq")
            planner = np.zeros(len(op), dtype=np.int64) if layout == "stream" else first // size
            for p in range(planners):
                mine = np.flatnonzero(planner == p)
                if start_at and len(mine):  # its first write is where the last writer stopped
                    head = int(first[mine[np.argmin(op[mine])]]) - p * size
                    assert head == (start_at[p] if start_at[p] + 8 <= size else 0), (p, seed)
            start_at = writer.next_start()
            ends.append(start_at)
            assert len(start_at) == planners
        # the stream advanced (it did not start over at 0 each time)
        assert ends[0] != ends[1] != ends[2]
    finally:
        target.close()
