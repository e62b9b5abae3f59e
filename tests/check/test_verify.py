import threading
from collections.abc import Iterable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rig.check import verify
from rig.io.ledger import is_uncertain
from tests.checker_scenario import BS, Scenario, classes, failures


def test_honest_outcome_gives_no_failure_and_reports_allowed_losses() -> None:
    s = Scenario()
    s.write(0, 4, issue=0, complete=10)  # durable below
    s.flush(11, 20)
    s.write(8, 2, issue=21, complete=30, land=False)  # acked, unflushed, lost: allowed
    s.write(12, 1, issue=25, land=False)  # in flight at the cut, lost: allowed
    s.write(16, 1, issue=26, land=True)  # in flight, survived: allowed
    result = s.check(cut=100)
    assert failures(result) == []
    lost = [f for f in result.findings if f.cls == verify.ALLOWED_LOSS]
    assert sorted((f.lba_first, f.lba_count) for f in lost) == [(8, 2), (12, 1)]
    assert result.nondurable_writes == 3 and result.nondurable_survived == 1


def test_lost_durable_write_names_lba_range_generations_and_timing() -> None:
    s = Scenario()
    s.write(4, 3, issue=0, complete=10, land=False)
    s.flush(12, 20)
    result = s.check(cut=100)
    (finding,) = failures(result)
    assert finding.cls == verify.LOST_DURABLE
    assert (finding.lba_first, finding.lba_count) == (4, 3)
    assert (finding.expected_gen, finding.observed_gen) == (1, 0)
    assert finding.detail["ack_to_cut_ns"] == 90
    assert finding.detail["flush_to_cut_ns"] == 80
    assert finding.detail["last_flush_to_cut_ns"] == 80


def test_uncertain_cut_instant_never_makes_a_lost_durable_write() -> None:
    s = Scenario()
    s.write(4, 1, issue=0, complete=10, land=False)
    s.flush(12, 95)
    assert classes(s.check(cut=100, error=10)) == []


def test_torn_block_is_a_shorn_write_with_its_sector_offset() -> None:
    s = Scenario()
    data = s.write(2, 1, issue=0, complete=10, land=False)
    s.image[2 * BS : 2 * BS + 3 * 512] = data[: 3 * 512]
    (finding,) = failures(s.check(cut=100))
    assert finding.cls == verify.SHORN and finding.lba_first == 2
    assert finding.detail["tear_sectors"] == [3]


def test_bit_flip_is_corruption() -> None:
    s = Scenario()
    s.write(5, 1, issue=0, complete=10)
    s.flush(11, 12)
    s.image[5 * BS + 1000] ^= 0x10
    (finding,) = failures(s.check(cut=100))
    assert finding.cls == verify.CORRUPTION and finding.lba_first == 5


def test_block_landing_at_the_wrong_lba_is_a_flying_write() -> None:
    s = Scenario()
    data = s.write(5, 1, issue=0, complete=10, land=False)
    s.image[9 * BS : 10 * BS] = data
    found = {(f.cls, f.lba_first) for f in failures(s.check(cut=100, extra=[9]))}
    assert (verify.FLYING, 9) in found


def test_a_write_of_this_cycle_landing_on_a_block_of_unknown_content_is_a_flying_write() -> None:
    """Whatever an uncertain block held, a write of this cycle for another LBA does not belong
    in it."""
    s = Scenario()
    assert classes(s.unknown_content(9)) == [verify.READ_ERROR]  # block 9: content unknown now
    data = s.write(5, 1, issue=40, complete=41, land=False)  # acknowledged, lands on block 9
    s.image[9 * BS : 10 * BS] = data
    found = {(f.cls, f.lba_first) for f in failures(s.check(cut=100, extra=[9]))}
    assert (verify.FLYING, 9) in found
    # the same misplaced data at the next check is old damage, not a new flying write
    s.new_cycle()
    assert classes(s.check(cut=200, extra=[9])) == []


def test_old_committed_data_reverting_without_a_write_is_collateral_damage() -> None:
    s = Scenario()
    old = s.write(20, 1, issue=0, complete=10)
    s.write(20, 1, issue=11, complete=12)
    s.flush(13, 14)
    assert classes(s.check(cut=100)) == []
    s.new_cycle()
    s.image[20 * BS : 21 * BS] = old  # the block reverts to its previous version
    s.write(30, 1, issue=200, complete=210)
    (finding,) = failures(s.check(cut=300, extra=[20]))
    assert finding.cls == verify.COLLATERAL and finding.lba_first == 20
    assert (finding.expected_gen, finding.observed_gen) == (2, 1)


def test_committed_data_reading_zero_is_metadata_loss() -> None:
    s = Scenario()
    s.write(20, 4, issue=0, complete=10)
    s.flush(11, 12)
    assert classes(s.check(cut=100)) == []
    s.new_cycle()
    s.image[20 * BS : 24 * BS] = 0  # the mapping of the range is gone
    s.write(30, 1, issue=200, complete=210)
    (finding,) = failures(s.check(cut=300, extra=[20, 21, 22, 23]))
    assert (finding.cls, finding.lba_first, finding.lba_count) == (verify.READ_ERROR, 20, 4)
    assert finding.detail["kind"] == "unmapped"


def test_lost_durable_write_with_a_later_survivor_is_unserializable() -> None:
    s = Scenario()
    s.write(1, 1, issue=0, complete=10, land=False)
    s.flush(11, 20)
    s.write(40, 1, issue=30, complete=40, land=True)
    assert classes(s.check(cut=100)) == [verify.LOST_DURABLE, verify.UNSERIALIZABLE]


def test_read_errors_are_recorded_and_the_rest_still_checked() -> None:
    s = Scenario()
    s.write(1, 1, issue=0, complete=10, land=False)
    s.write(40, 1, issue=0, complete=10, land=False)
    s.flush(11, 20)
    s.failing = {40}
    assert classes(s.check(cut=100)) == [verify.LOST_DURABLE, verify.READ_ERROR]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_honest_cycles_never_report_a_failure(data: st.DataObject) -> None:
    """Durable writes land; every other write lands whole per block or not at all."""
    s = Scenario(nblocks=48)
    for _ in range(data.draw(st.integers(1, 3))):
        s.new_cycle()
        t = 0
        landed: dict[int, bool] = {}
        plan = []
        for lba in range(0, 48, 6):  # one write per 6-block stripe, like one worker each
            count = data.draw(st.integers(1, 6))
            acked = data.draw(st.booleans())
            plan.append((lba, count, acked))
        flush_at = data.draw(st.integers(0, len(plan)))
        for i, (lba, count, acked) in enumerate(plan):
            if i == flush_at:
                s.flush(t, t + 1)
                t += 2
            durable_later = acked and i < flush_at
            keep = durable_later or data.draw(st.booleans())
            s.write(lba, count, issue=t, complete=t + 1 if acked else -1, land=keep)
            landed[lba] = keep
            t += 2
        if flush_at == len(plan):
            s.flush(t, t + 1)
            t += 2
        result = s.check(cut=t + 100)
        assert failures(result) == []


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 47), st.integers(1, 4))
def test_a_dropped_durable_write_is_always_found_at_its_lba(lba: int, count: int) -> None:
    count = min(count, 48 - lba)
    s = Scenario(nblocks=48)
    s.write(lba, count, issue=0, complete=1, land=False)
    s.flush(2, 3)
    (finding,) = failures(s.check(cut=10, extra=list(np.arange(48))))
    assert (finding.cls, finding.lba_first, finding.lba_count) == (verify.LOST_DURABLE, lba, count)


def test_tear_of_a_block_whose_old_content_is_unknown_is_still_found() -> None:
    s = Scenario()
    data = s.write(3, 1, issue=0, complete=10, land=False)
    s.image[3 * BS : 3 * BS + 512] = data[:512]
    assert classes(s.check(cut=100)) == [verify.SHORN]  # leaves block 3 unknown
    s.new_cycle()
    data = s.write(3, 1, issue=200, complete=210, land=False)
    s.image[3 * BS : 3 * BS + 5 * 512] = data[: 5 * 512]
    (finding,) = failures(s.check(cut=300))
    assert finding.cls == verify.SHORN and finding.detail["tear_sectors"] == [5]


def test_a_block_of_unknown_content_may_not_go_back_past_what_it_was_known_to_hold() -> None:
    """An unreadable block with a write in flight: which version survived is unknown, but the
    durable one before it may not be lost. Found on the twin (fragile FTL): the drive later
    reverted such a block to a generation older than its last durable one."""
    s = Scenario()
    s.write(7, 1, issue=0, complete=1)
    s.flush(2, 3)
    assert classes(s.check(cut=10)) == []
    oldest = s.image[7 * BS : 8 * BS].copy()  # generation 1
    s.new_cycle()
    s.write(7, 1, issue=20, complete=21)
    s.flush(22, 23)
    assert classes(s.check(cut=30)) == []  # generation 2 is durable: the floor
    s.new_cycle()
    s.write(7, 1, issue=40, land=False)  # in flight at the cut ...
    s.failing = {7}  # ... and the block is unreadable: its content is unknown now
    assert classes(s.check(cut=50)) == [verify.READ_ERROR]
    s.new_cycle()
    s.failing = set()
    s.image[7 * BS : 8 * BS] = oldest  # back to generation 1: older than the floor
    (finding,) = failures(s.check(cut=70, extra=[7]))
    assert (finding.cls, finding.lba_first) == (verify.COLLATERAL, 7)
    assert (finding.expected_gen, finding.observed_gen) == (2, 1)
    # what it holds now is known again: the same content at the next check is no new finding
    s.new_cycle()
    assert classes(s.check(cut=90, extra=[7])) == []


def test_a_block_of_unknown_content_that_holds_its_floor_or_the_write_in_flight_is_fine() -> None:
    for survivor in ("floor", "in flight"):
        s = Scenario()
        s.write(7, 1, issue=0, complete=1)
        s.flush(2, 3)
        s.check(cut=10)
        s.new_cycle()
        data = s.write(7, 1, issue=20, land=False)
        s.failing = {7}
        s.check(cut=30)
        s.new_cycle()
        s.failing = set()
        if survivor == "in flight":
            s.image[7 * BS : 8 * BS] = data
        assert classes(s.check(cut=50, extra=[7])) == [], survivor


def test_a_write_surviving_in_part_inside_an_atomic_unit_is_shorn() -> None:
    """4-block atomic unit (e.g. a 512e drive's physical block): a write covering the aligned
    unit 4..7 that survives in blocks 4-5 only is torn; outside whole units, part survival is an
    allowed loss."""
    s = Scenario()
    data = s.write(4, 4, issue=0, complete=10, land=False)  # acknowledged, not flushed
    s.image[4 * BS : 6 * BS] = data[: 2 * BS]
    other = s.write(10, 4, issue=0, complete=10, land=False)  # no whole aligned unit of 4
    s.image[10 * BS : 12 * BS] = other[: 2 * BS]
    result = s.check(cut=100, atomic=4)
    shorn = [f for f in failures(result) if f.cls == verify.SHORN]
    assert [(f.lba_first, f.lba_count) for f in shorn] == [(6, 1), (7, 1)]
    assert shorn[0].detail["atomic_unit_tear"] is True
    assert classes(result) == [verify.SHORN, verify.SHORN]  # nothing else
    # the same image with one-block units: allowed partial survival only
    s2 = Scenario()
    data = s2.write(4, 4, issue=0, complete=10, land=False)
    s2.image[4 * BS : 6 * BS] = data[: 2 * BS]
    assert failures(s2.check(cut=100, atomic=1)) == []


def test_hanging_reads_are_recorded_as_hangs_and_the_check_goes_on() -> None:
    s = Scenario()
    s.write(0, 16, issue=0, complete=1)
    s.flush(2, 3)
    release = threading.Event()
    hanging = {5, 6}

    def read(lba: int, count: int) -> np.ndarray:
        if hanging & set(range(lba, lba + count)):
            release.wait(10)  # a drive sitting on the request
            raise OSError(5, "gave up")
        return s.read(lba, count)

    try:
        result = verify.check(
            11,
            s.state,
            s.log,
            s.log.durability(100, 0),
            np.zeros(0, dtype=np.int64),
            read,
            BS,
            policy=verify.ReadPolicy(timeout_s=0.3, max_hangs=20),  # a fine read: far below
        )
    finally:
        release.set()
    errors = [f for f in failures(result) if f.cls == verify.READ_ERROR]
    assert sorted((f.lba_first, f.lba_count) for f in errors) == [(5, 1), (6, 1)]
    assert {f.detail["kind"] for f in errors} == {"hang"}
    assert all(f.detail["attempts"] == 1 for f in errors)  # a hang is not retried
    assert classes(result) == [verify.READ_ERROR, verify.READ_ERROR]


def test_a_read_budget_bounds_the_time_spent_on_a_failing_drive() -> None:
    s = Scenario()
    s.write(0, 64, issue=0, complete=1)
    s.flush(2, 3)
    s.failing = set(range(64))
    calls = []

    def read(lba: int, count: int) -> np.ndarray:
        calls.append((lba, count))
        return s.read(lba, count)

    result = verify.check(
        11,
        s.state,
        s.log,
        s.log.durability(100, 0),
        np.zeros(0, dtype=np.int64),
        read,
        BS,
        policy=verify.ReadPolicy(max_reads=10),
    )
    assert len(calls) <= 1 + 10  # the chunk's own read, then the budget
    assert {f.detail["kind"] for f in failures(result)} == {"eio"}
    # a read error only where a read of that block alone failed; the rest is unchecked
    errors = blocks_of(failures(result))
    assert errors and all(count == 1 for count in single_reads(calls, errors))
    unchecked = blocks_of(result.unchecked)
    assert errors.isdisjoint(unchecked) and errors | unchecked == set(range(64))
    assert result.blocks_unchecked == len(unchecked)
    assert result.blocks_checked == 64 - len(unchecked)


def blocks_of(findings: Iterable[verify.Finding]) -> set[int]:
    return {lba for f in findings for lba in range(f.lba_first, f.lba_first + f.lba_count)}


def single_reads(calls: list[tuple[int, int]], blocks: set[int]) -> list[int]:
    """For each block, the length of the shortest read that covered it."""
    return [min(n for first, n in calls if first <= lba < first + n) for lba in blocks]


def test_a_spent_read_budget_never_calls_readable_blocks_read_errors() -> None:
    """A few bad blocks scattered in a failing range, and a budget too small to locate them all:
    every read error is a block whose own read failed; what the budget left unread is unchecked
    (counted, not a failure), and every block that was read is judged as usual."""
    s = Scenario(nblocks=256)
    s.write(0, 256, issue=0, complete=1)
    s.flush(2, 3)
    bad = {3, 77, 78, 150, 201, 255}
    s.failing = set(bad)
    result = verify.check(
        11,
        s.state,
        s.log,
        s.log.durability(100, 0),
        np.zeros(0, dtype=np.int64),
        s.read,
        BS,
        policy=verify.ReadPolicy(max_reads=24),
    )
    errors = blocks_of(f for f in failures(result) if f.cls == verify.READ_ERROR)
    unchecked = blocks_of(result.unchecked)
    assert errors and errors <= bad  # precision 1: never a block that reads fine
    assert unchecked and errors.isdisjoint(unchecked)
    assert bad <= errors | unchecked  # recall 1 over the blocks that were read
    assert [f.cls for f in failures(result)] == [verify.READ_ERROR] * len(
        [f for f in failures(result)]
    )
    assert result.blocks_unchecked == len(unchecked)
    assert result.blocks_checked == 256 - len(unchecked)
    assert all(f.cls == verify.UNCHECKED and not f.failure for f in result.unchecked)
    assert not [f for f in result.findings if f.cls == verify.UNCHECKED]  # not a finding
    # an unchecked block this cycle wrote is not known to hold its write: uncertain from now on
    assert all(is_uncertain(s.state.committed[lba]) for lba in unchecked)
    read_back = set(range(256)) - unchecked - errors
    assert all(s.state.committed[lba] == 1 for lba in read_back)


def test_a_drive_that_keeps_hanging_costs_a_bounded_number_of_timeouts() -> None:
    s = Scenario()
    s.write(0, 64, issue=0, complete=1)
    s.flush(2, 3)
    release = threading.Event()
    calls = []

    def read(lba: int, count: int) -> np.ndarray:
        calls.append(lba)
        release.wait(10)
        raise OSError(5, "gave up")

    try:
        result = verify.check(
            11,
            s.state,
            s.log,
            s.log.durability(100, 0),
            np.arange(64),
            read,
            BS,
            max_read_blocks=8,  # 8 chunks
            policy=verify.ReadPolicy(timeout_s=0.02, max_hangs=4),
        )
    finally:
        release.set()
    assert len(calls) == 4  # then the drive counts as hung: nothing more is read
    # the halving reached one block (8, 4, 2, 1): that block's own read hung, a read error;
    # the blocks no read of their own failed for are unchecked, not read errors
    assert [(f.lba_first, f.lba_count, f.detail["kind"]) for f in failures(result)] == [
        (0, 1, "hang")
    ]
    unchecked = result.unchecked
    assert {f.detail["reason"] for f in unchecked} == {"the drive hung too often in this check"}
    assert blocks_of(unchecked) == set(range(1, 64)) and result.blocks_unchecked == 63


def rewritten_after_flush(v0: str, survivor: str) -> verify.CheckResult:
    """Block 9: V0 durable (an earlier cycle's, or zeros: never written), then in one cycle V1
    written and flushed and V2 written over it unflushed; at the cut the drive keeps `survivor`
    (the brownout-reset profile's dropped cache: V0). docs/decisions.md, "Brownout tests read
    the truth through the ledger"."""
    s = Scenario()
    if v0 == "durable":
        s.write(9, 1, issue=0, complete=1)
        s.flush(2, 3)
        assert classes(s.check(cut=10)) == []
        s.new_cycle()
    old = s.image[9 * BS : 10 * BS].copy()
    v1 = s.write(9, 1, issue=20, complete=21, land=False)
    s.flush(22, 23)
    v2 = s.write(9, 1, issue=24, complete=25, land=False)  # acknowledged, no flush after it
    s.image[9 * BS : 10 * BS] = {"V0": old, "V1": v1, "V2": v2}[survivor]
    return s.check(cut=100)


def test_a_flushed_version_lost_with_its_unflushed_rewrite_is_a_lost_durable_write() -> None:
    """The rewrite's loss is allowed, not the flushed version's: a block read back older than
    its last durable version is a lost durable write, whatever was written after it."""
    for v0 in ("durable", "zeros"):
        result = rewritten_after_flush(v0, "V0")
        (finding,) = failures(result)
        assert (finding.cls, finding.lba_first, finding.lba_count) == (verify.LOST_DURABLE, 9, 1)
        v1_gen = 2 if v0 == "durable" else 1
        assert (finding.expected_gen, finding.observed_gen) == (v1_gen, v1_gen - 1), v0
        assert finding.detail["flush_to_cut_ns"] == 100 - 23


def test_a_flushed_version_or_its_unflushed_rewrite_read_back_is_no_failure() -> None:
    for v0 in ("durable", "zeros"):
        for survivor in ("V1", "V2"):
            result = rewritten_after_flush(v0, survivor)
            assert failures(result) == [], (v0, survivor)
            lost = [f for f in result.findings if f.cls == verify.ALLOWED_LOSS]
            assert len(lost) == (survivor == "V1"), (v0, survivor)  # V2's loss, allowed


def test_a_flush_issued_before_the_write_was_seen_complete_does_not_cover_it() -> None:
    """What the host can claim: the drive may take a flush that reached it after it
    acknowledged V1 as covering V1 (its truth log then says `lost_flushed`), but the host
    issued that flush before it saw V1 complete, so V1 was never durable to it and its loss,
    with the rewrite's, is allowed (docs/architecture.md, "The checker's contract"; the scorer maps
    the truth through the ledger for this reason, docs/checker.md)."""
    s = Scenario()
    s.write(9, 1, issue=0, complete=1)
    s.flush(2, 3)
    s.check(cut=10)
    s.new_cycle()
    s.write(9, 1, issue=20, complete=23, land=False)  # V1, seen complete after ...
    s.flush(22, 24)  # ... this flush was issued
    s.write(9, 1, issue=25, complete=26, land=False)  # V2, unflushed
    result = s.check(cut=100)
    assert failures(result) == []
    assert sorted(f.lba_first for f in result.findings if f.cls == verify.ALLOWED_LOSS) == [9, 9]
