"""One test per way real drives' health output was misread, each on a real capture (or one derived
from a real capture and smartctl's own drive database, tests/health/drive_models.py) mutated as a
drive or a tool in a bad state would print it. Each of these failed on main at 75f4c29."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from drive_models import (
    KC400,
    SAMSUNG_PM893,
    SILICON_MOTION,
    capture,
    drivedb,
    from_drivedb,
    without_drivedb_entry,
)
from health_mutations import replace_at
from health_paths import RECORDED, real_file

from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.health.counters import as_uint
from rig.health.delta import diff_snapshots
from rig.health.errors import HealthToolError, ToolOutputError
from rig.health.nvme import parse_nvme_id_ctrl, parse_nvme_smart_log, snapshot_from_nvme
from rig.health.smart import parse_smartctl_json
from rig.health.snapshot import HealthSnapshot, SmartctlExit
from rig.health.tools import ToolRunner
from rig.health.tracker import HealthTracker, snapshot_fields
from rig.station.build import ToolDrives
from rig.store import Store

NVME = "INTEL_SSDPE2KX080T8_1.json"
SAS_WITH_ERRORS = "SEAGATE_ST373453LC_26.json"
DELL_S3520 = "sat-Dell_Certified_Intel_S3520_Series_SSDs-SSDSCKJB240G7R-sdm.json"
MICRON_SATA = "sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK1T9TDS-sda.json"
DEEP = "[" * 5000 + "]" * 5000
NODE = DriveNode(DriveIdentity(model="m", serial="s"), "/dev/nvme0", 1 << 30)


def new_store(path: Path) -> tuple[Store, int]:
    store = Store(str(path))
    campaign = store.new_campaign("c", "toml", 1, "simulated")
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    return store, store.add_drive(campaign, 0, ident, 1 << 30, 4096, (0, 100))


def text(name: str) -> str:
    return real_file(name).read_text()


def doc(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads(text(name))


def table_path(name: str, attr_id: int, *rest: str) -> tuple[object, ...]:
    rows = doc(name)["ata_smart_attributes"]["table"]
    index = next(i for i, row in enumerate(rows) if row["id"] == attr_id)
    return ("ata_smart_attributes", "table", index, *rest)


# --- untyped exceptions ---------------------------------------------------------------------


def test_4301_digit_integer_is_not_a_crash() -> None:
    mutated = replace_at(text(NVME), ("power_on_time", "hours"), "9" * 4301)
    snap = parse_smartctl_json(mutated)  # was ValueError from the int digit limit
    assert snap.power_on_hours == doc(NVME)["nvme_smart_health_information_log"]["power_on_hours"]


def test_4301_digit_integer_where_the_field_is_read() -> None:
    mutated = replace_at(
        text(NVME), ("nvme_smart_health_information_log", "unsafe_shutdowns"), "9" * 4301
    )
    snap = parse_smartctl_json(mutated)
    assert snap.unsafe_shutdowns is None and snap.unsafe_shutdowns_source is None


@pytest.mark.parametrize("digits", ["\u00b2", "\u0663", "\uff11"])
def test_unicode_digits_are_not_a_number(digits: str) -> None:
    assert digits.isdigit() and as_uint(digits) is None
    path = ("nvme_smart_health_information_log", "power_cycles")
    snap = parse_smartctl_json(replace_at(text(NVME), path, json.dumps(digits)))
    assert snap.power_cycles == doc(NVME)["power_cycle_count"]  # the top-level count instead


@pytest.mark.parametrize(
    "parse",
    [parse_smartctl_json, parse_nvme_id_ctrl, parse_nvme_smart_log],
    ids=["smartctl", "nvme id-ctrl", "nvme smart-log"],
)
def test_deeply_nested_json_is_a_typed_error(parse) -> None:  # type: ignore[no-untyped-def]
    for hostile in (DEEP, '{"a": ' + DEEP + "}"):
        with pytest.raises(ToolOutputError, match="nested deeper") as err:
            parse(hostile)
        assert not getattr(err.value, "unexpected", False)


def test_messages_that_are_not_a_list() -> None:
    mutated = replace_at(text(NVME), ("smartctl", "messages"), "5")
    mutated = replace_at(mutated, ("device",), None)
    with pytest.raises(ToolOutputError, match="no device section") as err:
        parse_smartctl_json(mutated)  # was TypeError
    assert not getattr(err.value, "unexpected", False)


@pytest.mark.parametrize("amount", ["9e999999", "-1", "1e3", "\u00b2", "NaN"])
def test_scsi_gigabytes_that_are_no_amount(amount: str) -> None:
    path = ("scsi_error_counter_log", "write", "gigabytes_processed")
    snap = parse_smartctl_json(replace_at(text(SAS_WITH_ERRORS), path, json.dumps(amount)))
    assert snap.host_bytes_written is None and snap.host_bytes_written_source is None


def test_critical_warning_of_4000_hex_digits_is_not_stored_as_a_number(tmp_path: Path) -> None:
    hostile = json.dumps("0x" + "f" * 4000)
    path = ("nvme_smart_health_information_log", "critical_warning")
    snap = parse_smartctl_json(replace_at(text(NVME), path, hostile))
    assert snap.critical_warning is None  # one byte in the log page
    store, drive = new_store(tmp_path / "s.sqlite")
    store.add_health(drive, 0, 0, snap.source, snapshot_fields(snap), snap.raw)  # was ValueError
    assert store.health_raw(1) == snap.raw


def test_store_add_health_never_fails_on_values(tmp_path: Path) -> None:
    store, drive = new_store(tmp_path / "s.sqlite")
    fields = {"huge": 1 << 20000, "nested": {"neg": -(1 << 20000)}, "text": "\ud800"}
    store.add_health(drive, 0, 0, "smartctl", fields, "raw \ud800 text")
    row = store.query("SELECT fields FROM health")[0]
    assert json.loads(row["fields"])["huge"] == hex(1 << 20000)
    assert store.health_raw(1) == "raw \\ud800 text"


def test_tracker_turns_any_slip_of_a_reading_into_a_health_error() -> None:
    good = parse_smartctl_json(text(NVME))
    answers: list[object] = [good, ValueError("Exceeds the limit (4300 digits)")]

    def read(node: DriveNode) -> HealthSnapshot:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, HealthSnapshot)
        return answer

    tracker = HealthTracker(read, every=1)
    tracker.baseline(NODE)
    snapshot, delta, events = tracker.after_cut(NODE)  # was: ValueError out of the cycle
    assert snapshot is None and delta is None
    ((_, kind, detail),) = events
    assert kind == "health_error" and "4300 digits" in detail["error"]


def test_tracker_reading_a_hostile_answer_is_a_health_error() -> None:
    outputs = [text(NVME), replace_at(text(NVME), ("power_on_time",), DEEP)]
    tracker = HealthTracker(lambda node: parse_smartctl_json(outputs.pop(0)), every=1)
    tracker.baseline(NODE)
    snapshot, _, events = tracker.after_cut(NODE)  # was RecursionError
    assert snapshot is None and [kind for _, kind, _ in events] == ["health_error"]


def test_nvme_cli_fallback_answers_a_typed_error(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """smartctl cannot open the NVMe drive; nvme-cli answers garbage: a typed health error."""
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "2")
    monkeypatch.setenv("FAKE_SMARTCTL_STDERR", "open failed")
    hostile = tmp_path / "hostile.json"
    for body in (DEEP, '{"sn": "x", "mn": "y", "vid": ' + "9" * 4301 + "}"):
        hostile.write_text(body)
        monkeypatch.setenv("FAKE_NVME_OUTPUT", str(hostile))
        try:
            ToolDrives(fake_tools).health(NODE)
        except HealthToolError as error:
            assert not getattr(error, "unexpected", False)
            continue
        # a 4,301-digit vid is dropped, not fatal; smart-log then has no critical_warning
        pytest.fail("nvme-cli printed no SMART log, yet a snapshot was returned")


# --- negative values and value/source pairs -------------------------------------------------


def test_negative_logical_block_size_gives_no_bytes_written() -> None:
    name = MICRON_SATA  # host writes from 246 Total_LBAs_Written x logical block size
    snap = parse_smartctl_json(replace_at(text(name), ("logical_block_size",), "-512"))
    assert snap.identity.logical_block_size is None
    assert snap.host_bytes_written is None and snap.host_bytes_written_source is None


def test_negative_exit_status_is_not_every_bit() -> None:
    snap = parse_smartctl_json(replace_at(text(NVME), ("smartctl", "exit_status"), "-1"))
    assert snap.smartctl_exit is None


def test_nvme_negative_unsafe_shutdowns_has_no_source_either() -> None:
    log = RECORDED / "nvme" / "smart-log" / "nvme0.json"
    ctrl = parse_nvme_id_ctrl((RECORDED / "nvme" / "id-ctrl" / "nvme0.json").read_text())
    smart_log = parse_nvme_smart_log(replace_at(log.read_text(), ("unsafe_shutdowns",), "-1"))
    snap = snapshot_from_nvme(ctrl, smart_log)
    assert snap.unsafe_shutdowns is None and snap.unsafe_shutdowns_source is None
    via_smartctl = parse_smartctl_json(
        replace_at(text(NVME), ("nvme_smart_health_information_log", "unsafe_shutdowns"), "-1")
    )
    assert via_smartctl.unsafe_shutdowns is None and via_smartctl.unsafe_shutdowns_source is None


# --- SCSI media errors from the same pages --------------------------------------------------


def test_scsi_snapshot_missing_a_page_is_not_compared() -> None:
    full = parse_smartctl_json(text(SAS_WITH_ERRORS))
    log = doc(SAS_WITH_ERRORS)["scsi_error_counter_log"]
    assert full.media_errors == sum(p["total_uncorrected_errors"] for p in log.values())
    partial = parse_smartctl_json(
        replace_at(text(SAS_WITH_ERRORS), ("scsi_error_counter_log", "write"), None)
    )
    assert partial.media_errors == log["read"]["total_uncorrected_errors"]
    kept = [page for page in ("read", "write", "verify") if page in log and page != "write"]
    assert partial.media_errors_source == "scsi:" + "+".join(kept)
    for before, after in ((full, partial), (partial, full)):
        delta = diff_snapshots(before, after)
        # was "went down by 535" / "rose by 535"; (the write page also carries the bytes
        # written, whose disappearance is flagged as such)
        assert "media_errors" not in [a.field for a in delta.anomalies], delta.anomalies
        assert "media_errors" in delta.not_reported
    # the same pages on both sides are still judged
    worse = replace(full, media_errors=(full.media_errors or 0) + 1)
    assert [a.field for a in diff_snapshots(full, worse).anomalies] == ["media_errors"]


# --- attribute meaning by id and name -------------------------------------------------------


def test_kingston_kc400_197_not_in_use_and_231_life_left_from_raw() -> None:
    family, presets = drivedb(KC400)
    assert family.startswith("Phison") and presets[197] == "Not_In_Use"
    snap = parse_smartctl_json(
        from_drivedb(KC400, {231: (100, 74), 197: (100, 12), 192: (100, 41), 199: (100, 0)})
    )
    assert snap.pending_sectors is None  # 197 is Not_In_Use on this model
    assert (snap.percentage_used, snap.percentage_used_source) == (26, "ata:231:SSD_Life_Left")
    assert (snap.unsafe_shutdowns, snap.unsafe_shutdowns_source) == (
        41,
        "ata:192:Unsafe_Shutdown_Count",
    )
    assert snap.crc_errors == 0  # 199 SATA_CRC_Error_Count


def test_silicon_motion_wear_from_169_raw_and_uncorrectables_from_160() -> None:
    family, presets = drivedb(SILICON_MOTION)
    assert family == "Silicon Motion based SSDs" and presets[169] == "Remaining_Lifetime_Perc"
    snap = parse_smartctl_json(from_drivedb(SILICON_MOTION, {169: (100, 96), 160: (100, 3)}))
    assert (snap.percentage_used, snap.percentage_used_source) == (
        4,
        "ata:169:Remaining_Lifetime_Perc",
    )
    assert snap.reported_uncorrectable == 3


def test_crucial_m4_wear_from_202_raw_percent_used() -> None:
    _, presets = drivedb("M4-CT256M4SSD2")
    assert presets[202] == "Perc_Rated_Life_Used"
    snap = parse_smartctl_json(from_drivedb("M4-CT256M4SSD2", {202: (97, 3), 173: (96, 120)}))
    assert (snap.percentage_used, snap.percentage_used_source) == (
        3,
        "ata:202:Perc_Rated_Life_Used",
    )


def test_sandforce_style_231_still_reads_the_normalised_value() -> None:
    names = {231: "SSD_Life_Left"}
    snap = parse_smartctl_json(capture("X", {231: (91, 0)}, "SandForce Driven SSDs", names))
    assert snap.percentage_used == 9


def test_samsung_pm893_without_drive_database_entry_has_no_counter() -> None:
    real = parse_smartctl_json(text(SAMSUNG_PM893))
    assert real.unsafe_shutdowns_source == "ata:235:POR_Recovery_Count"
    snap = parse_smartctl_json(without_drivedb_entry(SAMSUNG_PM893, 235))
    assert snap.unsafe_shutdowns is None and snap.unsafe_shutdowns_source is None
    assert diff_snapshots(snap, snap).not_reported[0] == "unsafe_shutdowns"


def test_unnamed_192_on_an_ssd_is_not_guessed() -> None:
    names = {192: "Power-Off_Retract_Count"}  # smartctl's default name: no entry for the model
    snap = parse_smartctl_json(capture("SOME SSD", {192: (100, 17)}, None, names))
    assert snap.identity.rotation_rate == 0 and snap.unsafe_shutdowns is None


def test_dell_s3520_without_225_reads_241_in_32mib_units() -> None:
    without_225 = replace_at(text(DELL_S3520), table_path(DELL_S3520, 225), None)
    snap = parse_smartctl_json(without_225)
    raw_241 = next(
        a["raw"]["value"]
        for a in doc(DELL_S3520)["ata_smart_attributes"]["table"]
        if a["id"] == 241
    )
    assert snap.host_bytes_written_source == "ata:241:Total_LBAs_Written"
    assert snap.host_bytes_written == raw_241 * 32 * 2**20  # 4.3 TB, not 66 MB
    assert snap.host_bytes_written > 4 * 10**12


# --- delta rules ----------------------------------------------------------------------------


def test_16_bit_unsafe_counter_wrap_is_a_rise_not_a_reset() -> None:
    before = replace(parse_smartctl_json(text(MICRON_SATA)), unsafe_shutdowns=65535)
    assert before.power_cycles is not None
    after = replace(before, unsafe_shutdowns=0, power_cycles=before.power_cycles + 1)
    delta = diff_snapshots(before, after)
    assert delta.ok, delta.anomalies
    assert delta.change("unsafe_shutdowns") == 1
    missed = replace(after, unsafe_shutdowns=65535)
    assert [a.field for a in diff_snapshots(before, missed).anomalies] == ["unsafe_shutdowns"]


def test_media_error_counter_wrapping_has_risen() -> None:
    before = replace(parse_smartctl_json(text(NVME)), media_errors=65535)
    after = replace(before, media_errors=2, unsafe_shutdowns=(before.unsafe_shutdowns or 0) + 1)
    after = replace(after, power_cycles=(before.power_cycles or 0) + 1)
    (a,) = diff_snapshots(before, after).anomalies
    assert a.field == "media_errors" and "rose by 3" in a.reason and "wrapped" in a.reason


def _clean_cut(s: HealthSnapshot, **changes: object) -> HealthSnapshot:
    moved = {
        "unsafe_shutdowns": (s.unsafe_shutdowns or 0) + 1,
        "power_cycles": (s.power_cycles or 0) + 1,
    }
    return replace(s, **{**moved, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "before_value", "after_value", "reason"),
    [
        ("percentage_used", 7, 6, "wear indicator went down"),
        ("error_log_entries", 0, 3, "rose by 3"),
        ("available_spare", 100, 96, "available spare dropped by 4"),
    ],
)
def test_nvme_counters_that_must_not_move_so(
    field: str, before_value: int, after_value: int, reason: str
) -> None:
    before = replace(parse_smartctl_json(text(NVME)), **{field: before_value})  # type: ignore[arg-type]
    (a,) = diff_snapshots(before, _clean_cut(before, **{field: after_value})).anomalies
    assert a.field == field and reason in a.reason


def test_available_spare_drop_without_the_warning_bit() -> None:
    before = parse_smartctl_json(text(NVME))
    assert before.available_spare == 100 and before.critical_warning == 0
    (a,) = diff_snapshots(before, _clean_cut(before, available_spare=99)).anomalies
    assert a.field == "available_spare"


@pytest.mark.parametrize(
    "bit", [SmartctlExit.ERROR_LOG, SmartctlExit.SELFTEST_LOG, SmartctlExit.PAST_THRESHOLD]
)
def test_new_smartctl_health_exit_bit(bit: SmartctlExit) -> None:
    before = parse_smartctl_json(text(NVME))
    assert before.smartctl_exit == SmartctlExit(0)
    (a,) = diff_snapshots(before, _clean_cut(before, smartctl_exit=bit)).anomalies
    assert a.field == "smartctl_exit" and a.after == int(bit)
    # a bit already set before is history, not news
    assert diff_snapshots(
        replace(before, smartctl_exit=bit), _clean_cut(before, smartctl_exit=bit)
    ).ok


def test_disk_failing_bit_with_smart_status_failed_is_one_anomaly() -> None:
    before = parse_smartctl_json(text(NVME))
    after = _clean_cut(before, smart_passed=False, smartctl_exit=SmartctlExit.DISK_FAILING)
    assert [a.field for a in diff_snapshots(before, after).anomalies] == ["smart_passed"]
    # the exit bit alone (smart_status not printed) is still reported
    alone = _clean_cut(before, smart_passed=None, smartctl_exit=SmartctlExit.DISK_FAILING)
    assert [a.field for a in diff_snapshots(before, alone).anomalies] == ["smartctl_exit"]


def test_nvme_drive_swapped_for_one_with_the_same_serial() -> None:
    before = parse_smartctl_json(text(NVME))
    assert before.identity.wwn is None and before.power_on_hours is not None
    # the same model and serial (a swap from a batch with duplicated serials), fewer hours
    other = _clean_cut(before, power_on_hours=before.power_on_hours - 5000)
    delta = diff_snapshots(before, other)
    assert [a.field for a in delta.anomalies] == ["drive_replaced"]
    assert "power-on hours went back" in delta.anomalies[0].reason and delta.changes == ()


def test_drive_swapped_with_same_serial_and_another_capacity() -> None:
    before = parse_smartctl_json(text("KXG60ZNV512G_TOSHIBA_2.json"))
    ident = replace(before.identity, wwn=None)
    before = replace(before, identity=ident)
    other = _clean_cut(
        before, identity=replace(ident, capacity_bytes=(ident.capacity_bytes or 0) * 2)
    )
    fields = [a.field for a in diff_snapshots(before, other).anomalies]
    assert "drive_replaced" in fields


def test_negative_cuts_are_refused_and_zero_expects_no_power_count() -> None:
    snap = parse_smartctl_json(text(NVME))
    with pytest.raises(ValueError, match="cuts"):
        diff_snapshots(snap, snap, cuts=-1)
    assert diff_snapshots(snap, snap, cuts=0).ok  # ridden-through sags only: nothing counted
