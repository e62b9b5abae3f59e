"""The checker's rules for discards (docs/checker.md, "Discards"), on hand-driven cycles."""

from __future__ import annotations

import numpy as np

from rig.check import verify
from rig.io.ledger import uncertain
from tests.checker_scenario import BS, Scenario


def failures(result: verify.CheckResult) -> list[verify.Finding]:
    return [f for f in result.findings if f.failure]


def durable_data(s: Scenario, lba: int, count: int) -> np.ndarray:
    """A durable write of the range, checked; a new cycle open. Returns what it wrote."""
    data = s.write(lba, count, issue=0, complete=1)
    s.flush(2, 3)
    assert failures(s.check(cut=10, zeroes=True)) == []
    s.new_cycle()
    return data


def test_a_flushed_discard_reading_its_old_data_is_a_resurrected_discard() -> None:
    s = Scenario()
    old = durable_data(s, 4, 2)
    s.discard(4, 2, issue=20, complete=21, land=False)  # acknowledged, flushed, undone
    s.flush(22, 23)
    (finding,) = failures(s.check(cut=100, zeroes=True))
    assert finding.cls == verify.RESURRECTED
    assert (finding.lba_first, finding.lba_count) == (4, 2)
    assert (finding.expected_gen, finding.observed_gen) == (2, 1)
    assert finding.detail["discard_gen"] == 2
    assert finding.detail["ack_to_cut_ns"] == 79 and finding.detail["flush_to_cut_ns"] == 77
    # a later cycle that did not touch the blocks finds them still resurrected (the promise
    # stands in the state), and one that reads the zeroes finds nothing
    s.new_cycle()
    s.image[4 * BS : 6 * BS] = old
    s.state.committed[np.array([4, 5])] = 2
    s.state.trimmed[np.array([4, 5])] = 2
    assert [f.cls for f in failures(s.check(cut=200, extra=[4, 5], zeroes=True))] == [
        verify.RESURRECTED
    ]
    s.new_cycle()
    s.state.committed[np.array([4, 5])] = 2
    s.state.trimmed[np.array([4, 5])] = 2
    s.image[4 * BS : 6 * BS] = 0
    assert failures(s.check(cut=300, extra=[4, 5], zeroes=True)) == []


def test_zeroes_of_a_flushed_discard_stay_allowed_in_later_cycles() -> None:
    s = Scenario()
    durable_data(s, 8, 1)
    s.discard(8, 1, issue=20, complete=21)
    s.flush(22, 23)
    assert failures(s.check(cut=100, zeroes=True)) == []
    s.new_cycle()
    assert failures(s.check(cut=200, extra=[8], zeroes=True)) == []
    assert int(s.state.trimmed[np.array([8])][0]) == 2


def test_without_the_promise_old_data_or_zeroes_are_allowed_never_another_lbas() -> None:
    s = Scenario()
    old = durable_data(s, 8, 2)
    s.discard(8, 2, issue=20, complete=21, land=False)
    s.flush(22, 23)
    assert failures(s.check(cut=100)) == []  # old data back: allowed without the promise
    for content in (np.zeros(2 * BS, np.uint8), old, np.zeros(2 * BS, np.uint8)):
        s.new_cycle()
        s.image[8 * BS : 10 * BS] = content  # a drive without the promise may change its mind
        assert failures(s.check(cut=200, extra=[8, 9])) == []
    s.new_cycle()
    s.image[8 * BS : 9 * BS] = s.image[0:BS]
    other = s.write(30, 1, issue=300, complete=301)  # another LBA's data lands at block 9
    s.image[9 * BS : 10 * BS] = other
    s.flush(302, 303)
    (finding,) = failures(s.check(cut=400, extra=[8, 9]))
    assert finding.cls == verify.FLYING and finding.lba_first == 9


def test_a_write_after_a_discard_lost_to_zeroes_is_a_lost_durable_write_naming_it() -> None:
    s = Scenario()
    durable_data(s, 12, 1)
    discard_op = s.discard(12, 1, issue=20, complete=21)
    s.flush(22, 23)
    s.write(12, 1, issue=30, complete=31, land=False)  # the discard landed after it
    s.flush(32, 33)
    (finding,) = failures(s.check(cut=100, zeroes=True))
    assert finding.cls == verify.LOST_DURABLE
    assert (finding.expected_gen, finding.observed_gen) == (3, 2)
    assert finding.observed_op == discard_op and finding.detail["observed_discard"] is True


def test_a_discard_in_flight_may_be_applied_or_not() -> None:
    for land in (True, False):
        s = Scenario()
        durable_data(s, 16, 4)
        s.discard(16, 4, issue=20, land=land)  # never acknowledged
        s.discard(24, 2, issue=21, complete=22, land=land)  # acknowledged, not flushed
        assert failures(s.check(cut=100, zeroes=True)) == []


def test_zeroes_after_an_unjudged_cycle_that_discarded_are_its_discard() -> None:
    """A cycle left unjudged (a rig error) makes its blocks uncertain and records its discards
    (rig/campaign/recording.py): zeroes there at the next check are that discard, never a
    mapping loss, and old data is allowed too."""
    for applied in (True, False):
        s = Scenario()
        durable_data(s, 20, 3)
        s.discard(20, 2, issue=20, complete=21, land=applied)
        s.discard(21, 2, issue=22, land=applied)  # overlapping: the newest counts at block 21
        lbas, gens = s.log.discarded_blocks()
        assert lbas.tolist() == [20, 21, 22] and gens.tolist() == [2, 3, 2]
        s.state.committed[lbas] = uncertain(s.state.committed[lbas])
        s.state.trimmed[lbas] = gens.astype(np.uint32)
        s.new_cycle()
        assert failures(s.check(cut=200, extra=[20, 21, 22], zeroes=True)) == []
