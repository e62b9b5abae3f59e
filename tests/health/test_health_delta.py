"""Before/after deltas and the counter-anomaly rules, on real captures with moved counters."""

from __future__ import annotations

from dataclasses import replace

import pytest
from health_paths import real_file

from rig.health.delta import diff_snapshots
from rig.health.smart import parse_smartctl_json
from rig.health.snapshot import HealthSnapshot, SmartctlExit


def snap(name: str) -> HealthSnapshot:
    return parse_smartctl_json(real_file(name).read_text())


NVME = "INTEL_SSDPE2KX080T8_1.json"
MICRON_SATA = "sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK1T9TDS-sda.json"
HDD = "WDC_WD20EFRX-68EUZN0_17.json"
SAS = "HITACHI_H109060SESUN600G_10.json"


def after_cut(
    s: HealthSnapshot, unsafe: int = 1, cycles: int = 1, **changes: object
) -> HealthSnapshot:
    moved: dict[str, object] = {}
    if s.unsafe_shutdowns is not None:
        moved["unsafe_shutdowns"] = s.unsafe_shutdowns + unsafe
    if s.power_cycles is not None:
        moved["power_cycles"] = s.power_cycles + cycles
    moved.update(changes)
    return replace(s, **moved)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [NVME, MICRON_SATA])
def test_clean_cut_has_no_anomaly(name: str) -> None:
    before = snap(name)
    delta = diff_snapshots(before, after_cut(before))
    assert delta.ok and delta.anomalies == ()
    assert delta.change("unsafe_shutdowns") == 1 and delta.change("power_cycles") == 1
    assert delta.not_reported == ()


def test_unsafe_counter_not_moving_is_an_anomaly() -> None:
    before = snap(NVME)
    delta = diff_snapshots(before, after_cut(before, unsafe=0))
    (a,) = delta.anomalies
    assert (a.field, a.before, a.after, a.expected) == ("unsafe_shutdowns", 8, 8, "+1 (= 9)")
    assert "did not count" in a.reason


def test_unsafe_counter_rising_by_two_is_an_anomaly() -> None:
    before = snap(MICRON_SATA)
    (a,) = diff_snapshots(before, after_cut(before, unsafe=2)).anomalies
    assert (a.field, a.before, a.after) == ("unsafe_shutdowns", 16, 18)
    assert "rose by 2" in a.reason


def test_unsafe_counter_going_down() -> None:
    before = snap(MICRON_SATA)
    (a,) = diff_snapshots(before, after_cut(before, unsafe=-16)).anomalies
    assert a.after == 0 and "went down" in a.reason


def test_cadence_of_several_cuts() -> None:
    before = snap(NVME)
    assert diff_snapshots(before, after_cut(before, unsafe=5, cycles=5), cuts=5).ok
    (a,) = diff_snapshots(before, after_cut(before, unsafe=4, cycles=5), cuts=5).anomalies
    assert "missed 1 of 5 cuts" in a.reason


def test_power_cycles_must_rise_by_one() -> None:
    before = snap(NVME)
    (a,) = diff_snapshots(before, after_cut(before, cycles=0)).anomalies
    assert a.field == "power_cycles" and a.expected == "+1 (= 23)"


def test_hdd_without_unsafe_counter_is_not_reported_not_anomalous() -> None:
    before = snap(HDD)
    delta = diff_snapshots(before, after_cut(before))
    assert delta.ok and delta.not_reported == ("unsafe_shutdowns",)


def test_sas_reports_neither_counter() -> None:
    before = snap(SAS)
    delta = diff_snapshots(before, before)
    assert delta.ok and delta.not_reported == ("unsafe_shutdowns", "power_cycles")


@pytest.mark.parametrize(
    ("field", "name"),
    [
        ("media_errors", NVME),
        ("crc_errors", MICRON_SATA),
        ("reallocated_sectors", MICRON_SATA),
        ("reported_uncorrectable", MICRON_SATA),
        ("offline_uncorrectable", MICRON_SATA),
        ("pending_sectors", MICRON_SATA),
        ("media_errors", SAS),
    ],
)
def test_error_counters_must_not_rise(field: str, name: str) -> None:
    before = snap(name)
    after = after_cut(before, **{field: getattr(before, field) + 3})
    (a,) = diff_snapshots(before, after).anomalies
    assert a.field == field and a.after == a.before + 3 and "rose by 3" in a.reason


def test_pending_sectors_may_fall_but_reallocated_may_not() -> None:
    before = replace(snap(MICRON_SATA), pending_sectors=4, reallocated_sectors=2)
    assert diff_snapshots(before, after_cut(before, pending_sectors=0)).ok
    (a,) = diff_snapshots(before, after_cut(before, reallocated_sectors=1)).anomalies
    assert a.field == "reallocated_sectors" and "went down" in a.reason


def test_critical_warning_newly_set() -> None:
    before = snap(NVME)
    (a,) = diff_snapshots(before, after_cut(before, critical_warning=0b1100)).anomalies
    assert a.field == "critical_warning" and a.after == 12
    assert "reliability degraded" in a.reason and "read-only" in a.reason
    # a bit that was already set before the cut is not new
    before_set = replace(before, critical_warning=4)
    (b,) = diff_snapshots(before_set, after_cut(before_set, critical_warning=12)).anomalies
    assert "read-only" in b.reason and "reliability" not in b.reason


def test_smart_status_turning_failed() -> None:
    before = snap(MICRON_SATA)
    (a,) = diff_snapshots(before, after_cut(before, smart_passed=False)).anomalies
    assert (a.field, a.before, a.after) == ("smart_passed", True, False)


def test_prefail_threshold_bit_newly_set() -> None:
    before = snap(MICRON_SATA)
    after = after_cut(before, smartctl_exit=SmartctlExit.PREFAIL_AT_THRESHOLD)
    (a,) = diff_snapshots(before, after).anomalies
    assert a.field == "smartctl_exit" and "threshold" in a.reason


def test_counter_lost_after_cut() -> None:
    before = snap(NVME)
    after = after_cut(before, media_errors=None)
    (a,) = diff_snapshots(before, after).anomalies
    assert a.field == "media_errors" and "not after" in a.reason


def test_capacity_change_is_flagged() -> None:
    before = snap(MICRON_SATA)
    after = after_cut(before, identity=replace(before.identity, capacity_bytes=0))
    (a,) = diff_snapshots(before, after).anomalies
    assert a.field == "capacity_bytes" and "geometry" in a.reason


def test_other_drive_is_not_compared() -> None:
    before = snap(MICRON_SATA)
    other = snap("sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK3T8TDS-sdc.json")
    delta = diff_snapshots(before, other)
    # serial and wwn are redacted alike in these captures; the model differs
    assert {a.field for a in delta.anomalies} == {"model", "capacity_bytes", "drive_replaced"}
    assert delta.changes == ()


def test_lifetime_writes_going_down() -> None:
    before = snap(NVME)
    assert before.host_bytes_written is not None
    after = after_cut(before, host_bytes_written=before.host_bytes_written - 1)
    (a,) = diff_snapshots(before, after).anomalies
    assert a.field == "host_bytes_written"


@pytest.mark.parametrize("cuts", [-1, -5])
def test_negative_cuts_rejected(cuts: int) -> None:  # (0: only ridden-through sags)
    with pytest.raises(ValueError):
        diff_snapshots(snap(NVME), snap(NVME), cuts=cuts)
