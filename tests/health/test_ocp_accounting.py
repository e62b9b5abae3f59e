"""Exact accounting of the OCP counters per cut, the readiness promise (show-regs) and the
`slow_ready` rule, on hand-built snapshots."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rig.health.delta import diff_snapshots
from rig.health.errors import ToolOutputError
from rig.health.readiness import ReadyTimes, ready_times, slow_ready
from rig.health.regs import parse_nvme_show_regs
from rig.health.snapshot import HealthSnapshot, SmartIdentity
from rig.health.tracker import HealthTracker

BIG = 1 << 100  # a PLP start count beyond 64 bits: compared exactly


def snap(cuts: int = 0, clean: int = 0, **changes: object) -> HealthSnapshot:
    """A PLP drive with the OCP log after `cuts` cuts and `clean` controlled power-offs."""
    base = HealthSnapshot(
        identity=SmartIdentity(model="M", serial="S", wwn="eui.1"),
        source="smartctl",
        power_cycles=10 + cuts + clean,
        unsafe_shutdowns=4 + cuts,
        unsafe_shutdowns_source="nvme:unsafe_shutdowns",
        critical_warning=0,
        incomplete_shutdowns=2 + cuts,
        plp_start_count=BIG + cuts,
        capacitor_health=95,
        ocp_log_version=4,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def fields(
    before: HealthSnapshot, after: HealthSnapshot, cuts: int = 1, clean: int = 0
) -> set[str]:
    return {a.field for a in diff_snapshots(before, after, cuts, clean).anomalies}


def test_an_honest_plp_drive_over_one_and_three_cuts() -> None:
    assert fields(snap(), snap(1)) == set()
    assert fields(snap(), snap(3), cuts=3) == set()
    delta = diff_snapshots(snap(), snap(1))
    assert delta.change("plp_start_count") == 1 and delta.change("incomplete_shutdowns") == 1


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("incomplete_shutdowns", 2, "incomplete-shutdown counter did not count the cut"),
        ("incomplete_shutdowns", 5, "incomplete-shutdown counter rose by 3 for 1 cut"),
        ("plp_start_count", BIG, "PLP start counter did not count the cut"),
        ("plp_start_count", BIG + 2, "PLP start counter rose by 2 for 1 cut"),
        ("plp_start_count", 0, "PLP start counter went down"),
    ],
)
def test_any_other_delta_is_an_anomaly_naming_the_field(name: str, value: int, reason: str) -> None:
    (anomaly,) = diff_snapshots(snap(), snap(1, **{name: value})).anomalies
    assert anomaly.field == name and anomaly.reason.startswith(reason)


def test_a_drive_without_plp_capacitors_is_not_held_to_a_plp_count() -> None:
    before, after = snap(capacitor_health=0xFFFF), snap(1, capacitor_health=0xFFFF)
    assert fields(before, dataclasses.replace(after, plp_start_count=0)) == set()
    # ... nor is a drive without the OCP log at all
    bare = {"incomplete_shutdowns": None, "plp_start_count": None, "capacitor_health": None}
    assert fields(snap(**bare), snap(1, **bare)) == set()


def test_failed_capacitors_by_the_drives_own_verdict() -> None:
    # critical warning bit 4: the volatile memory backup device (the capacitors) failed
    found = diff_snapshots(snap(), snap(1, critical_warning=0x10, capacitor_health=31)).anomalies
    assert {a.field for a in found} == {"capacitor_health", "critical_warning"}
    cap = next(a for a in found if a.field == "capacitor_health")
    assert (cap.before, cap.after) == (95, 31) and "failed" in cap.reason
    assert fields(snap(), snap(1, capacitor_health=0)) == {"capacitor_health"}
    # worn but above its threshold (no warning): not a finding
    assert fields(snap(), snap(1, capacitor_health=60)) == set()
    # still failed at the next cut: found again (the warning bit is history by then)
    failed = snap(1, critical_warning=0x10, capacitor_health=31)
    assert fields(failed, snap(2, critical_warning=0x10, capacitor_health=16)) == {
        "capacitor_health"
    }


def test_a_controlled_power_off_is_a_power_cycle_and_nothing_else() -> None:
    assert fields(snap(), snap(0, 1), cuts=0, clean=1) == set()
    assert fields(snap(), snap(2, 1), cuts=2, clean=1) == set()
    # a drive that counts a clean shutdown as unsafe, or starts its PLP on one: found
    assert fields(snap(), snap(0, 1, unsafe_shutdowns=5), cuts=0, clean=1) == {"unsafe_shutdowns"}
    assert fields(snap(), snap(0, 1, plp_start_count=BIG + 1), 0, 1) == {"plp_start_count"}
    with pytest.raises(ValueError):
        diff_snapshots(snap(), snap(), 1, -1)


def test_the_tracker_says_once_that_a_drive_has_no_ocp_log() -> None:
    readings = iter([snap(i, ocp_unavailable="no OCP C0h log (exit 2): x") for i in range(4)])
    tracker = HealthTracker(lambda node: next(readings), every=1)
    tracker.baseline(None)  # type: ignore[arg-type]
    said = [e for _ in range(3) for e in tracker.after_cut(None)[2]]  # type: ignore[arg-type]
    assert [kind for _, kind, _ in said] == ["ocp_unavailable"]


def _regs(cap: int, crto: int) -> str:
    return json.dumps({"cap": cap, "vs": 0x20000, "intms": 0, "cc": 0x460001, "crto": crto})


def test_the_drives_ready_timeout_from_cap_to_or_crto() -> None:
    to_30s = 60 << 24  # CAP.TO = 60 x 500 ms
    assert parse_nvme_show_regs(_regs(to_30s, 0)).timeout_ms == 30_000  # type: ignore[union-attr]
    crwms = 1 << 59
    promise = parse_nvme_show_regs(_regs(to_30s | crwms, (7 << 16) | 90))
    assert promise is not None and (promise.timeout_ms, promise.source) == (45_000, "crto.crwmt")
    # CRWMS clear: CRTO is not the promise even if set
    assert parse_nvme_show_regs(_regs(to_30s, 90)).source == "cap.to"  # type: ignore[union-attr]
    assert parse_nvme_show_regs(_regs(0, 0)) is None
    assert parse_nvme_show_regs(_regs(1 << 64, 0)) is None
    with pytest.raises(ToolOutputError):
        parse_nvme_show_regs('{"vs": 1}')
    with pytest.raises(ToolOutputError):
        parse_nvme_show_regs("NVMe status: Invalid")


def test_slow_ready_against_the_drives_promise_and_the_labs_limit() -> None:
    promise = snap(ready_timeout_ms=500, ready_timeout_source="crto.crwmt")
    times = ready_times(1_000_000_000, 2_900_000_000, 3_000_000_000)
    assert times == ReadyTimes(1.9, 2.0)
    detail = slow_ready(times, promise, None)
    assert detail is not None and detail["exceeded"] == ["drive"]
    assert (detail["seconds"], detail["drive_timeout_s"]) == (2.0, 0.5)
    # within the promise plus PCIe's 1 s for enumeration: kept
    assert slow_ready(ReadyTimes(1.2, 1.4), promise, None) is None
    # the lab's limit alone, on a drive that promises nothing
    assert slow_ready(ReadyTimes(1.2, 1.4), snap(), 1.0)["exceeded"] == ["lab"]  # type: ignore[index]
    assert slow_ready(ReadyTimes(1.2, None), None, 1.3) is None
    assert slow_ready(ReadyTimes(None, None), promise, 0.1) is None
    assert ready_times(None, 5, 6) == ReadyTimes(None, None)
