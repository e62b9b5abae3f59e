"""The class table (rig/check/failures.py): well-formed, the only source of class facts, and the
checker resolves blocks that several rules claim by its precedence."""

from __future__ import annotations

import pytest

from rig.check import failures, verify
from tests.checker_scenario import BS, Scenario


def test_names_are_unique_and_precedence_is_a_total_order() -> None:
    names = [row.name for row in failures.TABLE]
    assert len(set(names)) == len(names)
    precedences = [row.precedence for row in failures.TABLE]
    assert len(set(precedences)) == len(precedences)  # unique: every pair of classes is ordered
    strongest_first = failures.by_precedence(reversed(names))
    ranks = [failures.row(name).precedence for name in strongest_first]
    assert ranks == sorted(ranks) and set(strongest_first) == set(names)


def test_every_row_has_a_scope_and_a_summary() -> None:
    for row in failures.TABLE:
        assert row.scope in ("block", "cut", "drive"), row
        assert row.summary.strip(), row


def test_failure_names_leave_out_the_allowed_and_informational_classes() -> None:
    assert failures.ALLOWED_LOSS not in failures.failure_names()
    assert failures.UNCHECKED not in failures.failure_names()
    assert failures.DEAD in failures.failure_names("drive")
    assert failures.DEAD not in failures.failure_names("block", "cut")
    assert failures.UNSERIALIZABLE in failures.failure_names("cut")
    assert failures.is_failure(failures.SHORN) and not failures.is_failure(failures.ALLOWED_LOSS)


def test_every_class_the_checker_names_is_in_the_table() -> None:
    classes = {v for k, v in vars(verify).items() if k.isupper() and isinstance(v, str)}
    assert classes <= set(failures.names())
    assert classes, "verify re-exports the class names its callers use"


def test_a_finding_of_a_class_the_table_does_not_hold_is_refused() -> None:
    with pytest.raises(KeyError, match="no_such_class"):
        verify.drive_finding("no_such_class", {})
    with pytest.raises(KeyError, match="no_such_class"):
        verify.Finding("no_such_class", 0, 1, 0, 0)


def test_drive_findings_carry_no_block_range() -> None:
    finding = verify.drive_finding(verify.DEAD, {"phase": "power_on"})
    assert (finding.lba_first, finding.lba_count) == (0, 0)
    assert (finding.expected_gen, finding.observed_gen) == (-1, -1)
    assert finding.failure and finding.detail == {"phase": "power_on"}


def test_ordered_lists_table_order_then_unknown_names() -> None:
    present = ["zz_future", failures.DEAD, failures.SHORN, "aa_future", failures.LOST_DURABLE]
    assert failures.ordered(present) == [
        failures.LOST_DURABLE,
        failures.SHORN,
        failures.DEAD,
        "aa_future",
        "zz_future",
    ]


def test_a_misplaced_and_torn_block_is_a_flying_write_by_precedence() -> None:
    """Sectors of another LBA's write (misplaced) beside zeros (mixed generations): both the
    flying and the shorn rule claim the block; the table says flying wins."""
    assert failures.row(verify.FLYING).precedence < failures.row(verify.SHORN).precedence
    s = Scenario()
    data = s.write(5, 1, issue=0, complete=10, land=False)
    s.image[9 * BS : 9 * BS + 3 * 512] = data[: 3 * 512]
    found = [(f.cls, f.lba_first) for f in s.check(cut=100, extra=[9]).findings if f.failure]
    assert found == [(verify.FLYING, 9)]


def test_old_damage_under_a_lost_durable_write_is_that_lost_write_by_precedence() -> None:
    """A block of unknown content still shows its old corrupt sector after a durable write of
    this cycle that never landed: the corruption and the lost-write rules both claim it; the
    lost durable write wins, and the corrupt sector is named in its detail."""
    assert failures.row(verify.LOST_DURABLE).precedence < failures.row(verify.CORRUPTION).precedence
    s = Scenario()
    s.unknown_content(9)  # a read error: block 9's content is unknown from now on
    s.image[9 * BS + 1000] ^= 0x10  # the old data, now with a corrupt sector
    s.write(9, 1, issue=40, complete=41, land=False)
    s.flush(42, 43)
    (finding,) = [f for f in s.check(cut=100).findings if f.failure]
    assert (finding.cls, finding.lba_first) == (verify.LOST_DURABLE, 9)
    assert finding.detail["corrupt_sectors"] == [1]  # byte 1000: sector 1
