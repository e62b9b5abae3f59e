import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rig.io.ledger import (
    NOT_DONE,
    UNCERTAIN,
    UNKNOWN,
    ChunkedArray,
    CycleLog,
    LbaState,
    is_uncertain,
    known_floor,
    uncertain,
)


def _log(writes: list[tuple[int, int, int, bool]], flushes: list[tuple[int, int, int]]) -> CycleLog:
    """writes: (issue, complete, status, fua); flushes: (issue, complete, status)."""
    log = CycleLog()
    for i, (issue, complete, status, fua) in enumerate(writes):
        log.add_write(0, i, i, np.array([1], dtype=np.uint32), issue, complete, status, fua)
    for issue, complete, status in flushes:
        log.add_flush(0, issue, complete, status)
    return log


def test_flush_issued_after_the_ack_makes_a_write_durable() -> None:
    log = _log([(0, 10, 0, False)], [(11, 20, 0)])
    d = log.durability(cut_ns=100, error_ns=0)
    assert d.acked.tolist() == [True] and d.durable.tolist() == [True]
    assert d.ack_to_cut_ns.tolist() == [90] and d.flush_to_cut_ns.tolist() == [80]


def test_flush_issued_before_the_ack_does_not_cover_it() -> None:
    d = _log([(0, 10, 0, False)], [(5, 20, 0)]).durability(100, 0)
    assert d.acked.tolist() == [True] and d.durable.tolist() == [False]


def test_completion_inside_the_cut_error_bound_counts_as_not_complete() -> None:
    log = _log([(0, 10, 0, False), (0, 10, 0, True)], [(11, 95, 0)])
    d = log.durability(cut_ns=100, error_ns=10)
    assert d.durable.tolist() == [False, True]
    d = log.durability(cut_ns=100, error_ns=95)
    assert d.acked.tolist() == [False, False] and d.durable.tolist() == [False, False]


def test_failed_and_unfinished_requests_are_never_durable() -> None:
    log = _log([(0, NOT_DONE, 5, False), (0, 10, 0, False)], [(11, NOT_DONE, 5)])
    d = log.durability(100, 0)
    assert d.acked.tolist() == [False, True] and not d.durable.any()


def test_lba_state_reserves_increasing_generations_and_round_trips() -> None:
    state = LbaState(1000, 16)
    assert state.next_generations(1002, 3).tolist() == [1, 1, 1]
    assert state.next_generations(1003, 3).tolist() == [2, 2, 1]
    state.committed[:] = 7
    again = LbaState.from_bytes(1000, state.to_bytes())
    assert np.array_equal(again.issued[:], state.issued[:])
    assert np.array_equal(again.committed[:], state.committed[:])


def test_an_uncertain_block_keeps_the_generation_it_was_last_known_to_hold_as_its_floor() -> None:
    committed = np.array([0, 5, 41, int(UNCERTAIN) | 9, int(UNKNOWN)], dtype=np.uint32)
    assert is_uncertain(committed).tolist() == [False, False, False, True, True]
    assert known_floor(committed).tolist() == [0, 5, 41, 9, 0]
    unsure = uncertain(committed)
    assert is_uncertain(unsure).all()
    assert known_floor(unsure).tolist() == [0, 5, 41, 9, 0]  # the floor survives, twice too
    assert np.array_equal(uncertain(unsure), unsure)


def test_generations_stop_short_of_the_uncertain_flag() -> None:
    state = LbaState(0, 4)
    state.issued[2] = int(UNCERTAIN) - 2
    assert state.next_generations(2, 1).tolist() == [int(UNCERTAIN) - 1]
    with pytest.raises(OverflowError, match="2\\^31 writes"):
        state.next_generations(2, 1)
    assert state.issued[2] == int(UNCERTAIN) - 1  # nothing reserved by the refused write


times = st.integers(0, 1000)


@settings(max_examples=200)
@given(
    st.lists(st.tuples(times, times, st.booleans(), st.booleans()), min_size=1, max_size=20),
    st.lists(st.tuples(times, times, st.booleans()), max_size=10),
    times,
    st.integers(0, 50),
)
def test_durability_matches_the_definition(writes, flushes, cut, error) -> None:  # type: ignore[no-untyped-def]
    """Brute force: durable iff acked before cut-error and FUA, or some flush issued at or after
    the ack completed before cut-error."""
    w = [(min(a, b), max(a, b), 0 if ok else 5, fua) for a, b, ok, fua in writes]
    f = [(min(a, b), max(a, b), 0 if ok else 5) for a, b, ok in flushes]
    d = _log(w, f).durability(cut, error)
    horizon = cut - error
    for i, (_, done, status, fua) in enumerate(w):
        acked = status == 0 and done < horizon
        covered = any(fs == 0 and fi >= done and fd < horizon for fi, fd, fs in f)
        assert d.acked[i] == acked
        assert d.durable[i] == (acked and (fua or covered))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 99_999), st.integers(1, 40), st.integers(0, 5)), max_size=30)
)
def test_chunked_array_behaves_like_a_dense_one(ops: list[tuple[int, int, int]]) -> None:
    """Range writes (value 0 included) and reads agree with a dense numpy array."""
    n = 100_000
    sparse, dense = ChunkedArray(n), np.zeros(n, dtype=np.uint32)
    for start, length, value in ops:
        index = np.arange(start, min(n, start + length))
        sparse[index] = value
        dense[index] = value
    assert np.array_equal(sparse[:], dense)
    assert np.array_equal(sparse.nonzero(), np.flatnonzero(dense))
    assert sparse.count_nonzero() == np.count_nonzero(dense)
    sample = sparse.sample_nonzero(50, np.random.default_rng(len(ops)))
    assert len(sample) == min(50, np.count_nonzero(dense)) == len(np.unique(sample))
    assert (dense[sample] != 0).all()
    chunks, rows = sparse.to_arrays()
    assert np.array_equal(ChunkedArray.from_arrays(n, chunks, rows)[:], dense)


def test_chunked_array_allocates_only_touched_chunks() -> None:
    blocks_4tb = (4 << 40) // 4096
    array = ChunkedArray(blocks_4tb)
    assert array.nbytes <= 64 << 10  # the top-level directory of a 4 TB drive
    array[np.array([5, blocks_4tb - 1])] = 3
    array[np.array([77])] = 0  # zero needs no storage
    assert array.leaves_allocated == 2
    assert array.nbytes < 1 << 20
    assert array[np.array([5, 6, blocks_4tb - 1])].tolist() == [3, 0, 3]
    with pytest.raises(IndexError):
        array[np.array([blocks_4tb])]
    with pytest.raises(TypeError):
        _ = array != 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 63), max_size=50), st.integers(0, 3))
def test_batch_reservation_equals_one_write_at_a_time(lbas: list[int], before: int) -> None:
    one, batch = LbaState(100, 64), LbaState(100, 64)
    for lba in range(100, 100 + 64, 7):
        for _ in range(before):
            one.next_generations(lba, 1)
            batch.next_generations(lba, 1)
    expected = [int(one.next_generations(100 + lba, 1)[0]) for lba in lbas]
    got = batch.reserve(np.array(lbas, dtype=np.int64) + 100)
    assert got.tolist() == expected
    assert np.array_equal(one.issued[:], batch.issued[:])


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(0, 4095), min_size=1, max_size=600), st.integers(0, 2))
def test_an_increasing_batch_equals_one_write_at_a_time(lbas: set[int], before: int) -> None:
    """A sequential writer's batch (increasing blocks: reserved without the sort)."""
    one, batch = LbaState(100, 4096), LbaState(100, 4096)
    for lba in range(100, 100 + 4096, 5):
        for _ in range(before):
            one.next_generations(lba, 1)
            batch.next_generations(lba, 1)
    ordered = sorted(lbas)
    expected = [int(one.next_generations(100 + lba, 1)[0]) for lba in ordered]
    assert batch.reserve(np.array(ordered, dtype=np.int64) + 100).tolist() == expected
    assert np.array_equal(one.issued[:], batch.issued[:])


def test_a_large_batch_with_many_repeats_equals_one_write_at_a_time() -> None:
    # the writer's batches are tens of thousands of writes, most blocks repeated several times
    lbas = np.random.default_rng(5).integers(0, 3000, 20000) + 7
    one, batch = LbaState(7, 3000), LbaState(7, 3000)
    expected = [int(one.next_generations(int(lba), 1)[0]) for lba in lbas]
    assert batch.reserve(lbas).tolist() == expected
    assert np.array_equal(one.issued[:], batch.issued[:])


def test_sampling_reaches_every_written_block_and_only_those() -> None:
    array = ChunkedArray((4 << 40) // 4096)
    written = np.array([3, 4, 5, 9_000_000, 700_000_000, 1_000_000_000])
    array[written] = 1
    array[np.array([4])] = 0  # rewritten to zero: no longer written
    array[np.array([3, 3])] = np.array([0, 7])  # the last of repeated positions wins
    rng = np.random.default_rng(1)
    seen = np.concatenate([array.sample_nonzero(2, rng) for _ in range(200)])
    assert set(seen.tolist()) == {3, 5, 9_000_000, 700_000_000, 1_000_000_000}
    assert array.sample_nonzero(10, rng).tolist() == [3, 5, 9_000_000, 700_000_000, 1_000_000_000]


def test_writer_threads_reserving_generations_at_once_lose_nothing() -> None:
    # The in-process writer threads reserve generations concurrently; leaf allocation in the
    # sparse arrays once raced (a half-grown pool: "shape mismatch", lost reservations).
    import sys
    import threading

    state = LbaState(0, 1 << 22)
    errors: list[BaseException] = []
    per_thread = 1500
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible to expose the race

    def worker(k: int) -> None:
        rng = np.random.default_rng(k)
        try:
            for lba in rng.choice((1 << 22) // 8, per_thread, replace=False) * 8 + k:
                state.next_generations(int(lba), 1)
        except BaseException as error:  # the assertion below reports it
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert not errors, errors[:3]
    assert state.issued.count_nonzero() == 8 * per_thread  # every reservation landed


def test_the_discard_state_is_saved_with_the_state_and_older_saves_still_load() -> None:
    state = LbaState(100, 1000)
    state.committed[np.array([5, 6])] = 3
    state.trimmed[np.array([5, 6])] = 3
    again = LbaState.from_bytes(100, state.to_bytes())
    assert again.trimmed[np.array([5, 6, 7])].tolist() == [3, 3, 0]
    # a state saved before discards were ledgered (no trimmed arrays) loads with none
    buffer = io.BytesIO()
    c_leaves, c_values = state.committed.to_arrays()
    i_leaves, i_values = state.issued.to_arrays()
    np.savez_compressed(
        buffer, nblocks=np.array([1000]), committed_leaves=c_leaves, committed=c_values,
        issued_leaves=i_leaves, issued=i_values,
    )  # fmt: skip
    old = LbaState.from_bytes(100, buffer.getvalue())
    assert old.committed[np.array([5])].tolist() == [3] and old.trimmed.count_nonzero() == 0


def test_a_discard_is_logged_as_a_write_with_the_discard_flag() -> None:
    log = CycleLog()
    log.add_write(0, 1, 10, np.array([1, 1], dtype=np.uint32), 0, 5, 0, False)
    log.add_write(0, 2, 20, np.array([1], dtype=np.uint32), 6, 8, 0, False, True)
    log.add_flush(0, 9, 10, 0)
    assert log.column("discard").tolist() == [0, 1]
    assert log.durability(100, 0).durable.tolist() == [True, True]
