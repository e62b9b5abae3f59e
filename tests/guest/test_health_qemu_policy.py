"""Health policy on devices that keep no power accounting: QEMU's NVMe and ATA disks (real
smartctl captures from the guest station, fixtures/recorded/qemu) report a power-cycle count of
0, an unsafe-shutdown count that never moves and, for NVMe, counters that start again when the
device is added back. The rig says "not reported" for them instead of inventing anomalies; a
drive that does keep power accounting and misses a cut is still caught, and so is a rise in
media errors on any device."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.health.delta import diff_snapshots
from rig.health.smart import parse_smartctl_json
from rig.health.snapshot import HealthSnapshot
from rig.health.tracker import HealthTracker
from tests.health.health_paths import real_file

QEMU = Path(__file__).resolve().parents[2] / "fixtures" / "recorded" / "qemu"


def qemu(name: str) -> HealthSnapshot:
    return parse_smartctl_json((QEMU / name).read_text())


def test_qemu_nvme_counters_are_not_reported_across_a_cut_and_a_re_add() -> None:
    before = qemu("smartctl-x-nvme.json")
    assert (before.power_cycles, before.unsafe_shutdowns) == (0, 0)
    worn = replace(before, data_units_written=5000, host_bytes_written=5000 * 512_000)
    # the device was removed at the cut and added back: its counters start again at 0
    delta = diff_snapshots(worn, before, cuts=1)
    assert delta.ok, delta.anomalies
    assert {"power_cycles", "unsafe_shutdowns", "data_units_written"} <= set(delta.not_reported)


def test_qemu_ata_disk_without_power_accounting_is_not_an_anomaly() -> None:
    before = qemu("smartctl-x-ide-hd.json")
    assert before.power_cycles == 0
    delta = diff_snapshots(before, before, cuts=3)
    assert delta.ok and "power_cycles" in delta.not_reported


def test_a_media_error_rise_is_still_an_anomaly_without_power_accounting() -> None:
    before = qemu("smartctl-x-nvme.json")
    after = replace(before, media_errors=2)
    (anomaly,) = diff_snapshots(before, after).anomalies
    assert anomaly.field == "media_errors"


def test_a_drive_with_power_accounting_that_misses_a_cut_is_still_caught() -> None:
    before = parse_smartctl_json(real_file("INTEL_SSDPE2KX080T8_1.json").read_text())
    assert before.power_cycles and before.power_cycles > 0
    after = replace(before, power_cycles=before.power_cycles + 1)  # unsafe count did not move
    fields = {a.field for a in diff_snapshots(before, after).anomalies}
    assert fields == {"unsafe_shutdowns"}


def test_the_tracker_says_once_what_is_not_reported() -> None:
    snapshot = qemu("smartctl-x-nvme.json")
    tracker = HealthTracker(lambda node: snapshot, every=1)
    node = DriveNode(DriveIdentity("QEMU NVMe Ctrl", "GHN0001"), "/dev/nvme0n1", 1 << 28)
    tracker.baseline(node)
    events = [tracker.after_cut(node)[2] for _ in range(3)]
    said = [e for cycle in events for e in cycle if e[1] == "health_not_reported"]
    assert len(said) == 1
    assert {"power_cycles", "unsafe_shutdowns"} <= set(said[0][2]["fields"])
