"""HealthTracker: cadence, tool failures between readings, and no judgement across a rig error."""

from __future__ import annotations

from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.health.errors import ToolTimeout
from rig.health.snapshot import HealthSnapshot, SmartIdentity
from rig.health.tracker import HealthTracker, snapshot_fields

NODE = DriveNode(DriveIdentity("M", "S"), "/dev/nvme0n1", 1 << 30)
IDENT = SmartIdentity(model="M", serial="S", protocol="NVMe")


def snap(unsafe: int, cycles: int) -> HealthSnapshot:
    return HealthSnapshot(IDENT, "smartctl", unsafe_shutdowns=unsafe, power_cycles=cycles)


def tracker_over(answers: list[HealthSnapshot | Exception], every: int = 1) -> HealthTracker:
    queue = list(answers)

    def read(node: DriveNode) -> HealthSnapshot:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return HealthTracker(read, every)


def test_a_failed_reading_is_an_event_and_the_next_compares_over_both_cuts() -> None:
    t = tracker_over([snap(5, 10), ToolTimeout("smartctl: no answer", (), 30), snap(7, 12)])
    t.baseline(NODE)
    first = t.after_cut(NODE)
    assert first[0] is None and first[1] is None
    assert [(kind, d) for _, kind, d in first[2]] == [
        ("health_error", {"error": "smartctl: no answer", "kind": "ToolTimeout"})
    ]
    snapshot, delta, events = t.after_cut(NODE)
    assert snapshot is not None and delta is not None and events == []
    assert delta.cuts == 2 and delta.ok  # +2 over 2 cuts


def test_after_a_rig_error_the_next_reading_is_a_new_baseline() -> None:
    t = tracker_over([snap(5, 10), snap(5, 10), snap(6, 11)])
    t.baseline(NODE)
    t.cycle_failed_after_cut()  # power may not have gone off
    snapshot, delta, events = t.after_cut(NODE)
    assert snapshot is not None and delta is None
    assert [kind for _, kind, _ in events] == ["health_rebaseline"]
    _, delta, _ = t.after_cut(NODE)
    assert delta is not None and delta.ok and delta.cuts == 1


def test_cadence_reads_every_nth_cut_only() -> None:
    t = tracker_over([snap(0, 0), snap(2, 2)], every=2)
    t.baseline(NODE)
    assert t.after_cut(NODE) == (None, None, [])
    _, delta, _ = t.after_cut(NODE)
    assert delta is not None and delta.cuts == 2 and delta.ok


def test_a_power_off_between_cycles_is_expected_in_the_next_comparison() -> None:
    # an endurance retention check powers the drive off between two cuts: flushed, not shut
    # down, so the drive counts one more unsafe shutdown and power cycle than there were cuts
    told = tracker_over([snap(5, 10), snap(7, 12), snap(8, 13)])
    told.baseline(NODE)
    told.power_off_between_cycles()
    _, delta, _ = told.after_cut(NODE)
    assert delta is not None and delta.ok and delta.cuts == 2
    _, delta, _ = told.after_cut(NODE)  # counted once: the next delta is over its own cut
    assert delta is not None and delta.ok and delta.cuts == 1
    untold = tracker_over([snap(5, 10), snap(7, 12)])
    untold.baseline(NODE)
    _, delta, _ = untold.after_cut(NODE)
    assert delta is not None and not delta.ok  # +2 for 1 cut: what the twin campaign showed


def test_stored_fields_are_plain_json_values() -> None:
    fields = snapshot_fields(snap(3, 4))
    assert fields["unsafe_shutdowns"] == 3 and fields["identity"]["serial"] == "S"
    assert "raw" not in fields
