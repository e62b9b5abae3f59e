"""Every real smartctl capture parses; the fields a power-fault campaign needs are exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from health_paths import REAL_SMARTCTL, real_file

from rig.health.smart import parse_smartctl_json
from rig.health.snapshot import HealthSnapshot, SmartctlExit

ALL = sorted(REAL_SMARTCTL.glob("*.json")) if REAL_SMARTCTL.is_dir() else []


def test_the_real_captures_are_all_there() -> None:
    # a missing folder must fail, not silently parametrize zero cases
    assert len(ALL) >= 130, f"only {len(ALL)} real captures under {REAL_SMARTCTL}"


@pytest.mark.parametrize("path", ALL, ids=[p.name for p in ALL])
def test_every_real_capture_parses(path: Path) -> None:
    snap = parse_smartctl_json(path.read_text())
    assert snap.identity.protocol in ("ATA", "NVMe", "SCSI")
    assert snap.identity.model
    assert snap.raw == path.read_text()
    if snap.identity.protocol != "SCSI":  # one old SAS disk has no power-on time log
        assert snap.power_on_hours is not None and snap.power_on_hours >= 0
    # an unsafe-shutdown count always says which attribute it came from, and vice versa
    assert (snap.unsafe_shutdowns is None) == (snap.unsafe_shutdowns_source is None)
    if snap.identity.rotation_rate and snap.identity.rotation_rate > 1:
        assert snap.unsafe_shutdowns is None, "a hard disk has no unsafe-shutdown counter"


def load(name: str) -> HealthSnapshot:
    return parse_smartctl_json(real_file(name).read_text())


def test_nvme_intel_p4510() -> None:
    s = load("INTEL_SSDPE2KX080T8_1.json")
    assert (s.identity.model, s.identity.protocol, s.identity.transport) == (
        "INTEL SSDPE2KX080T8",
        "NVMe",
        "nvme",
    )
    assert s.identity.is_ssd is True and s.identity.wwn is None
    assert s.identity.capacity_bytes is None  # no namespace section in this capture
    assert (s.power_cycles, s.power_on_hours, s.unsafe_shutdowns) == (22, 12164, 8)
    assert s.unsafe_shutdowns_source == "nvme:unsafe_shutdowns"
    assert (s.media_errors, s.critical_warning, s.percentage_used) == (0, 0, 0)
    assert s.data_units_written == 184919244
    assert s.host_bytes_written == 184919244 * 512000
    assert (s.temperature_c, s.available_spare, s.available_spare_threshold) == (29, 100, 10)
    assert s.smart_passed is True and s.smartctl_exit == SmartctlExit(0)
    assert s.reallocated_sectors is None and s.crc_errors is None


def test_nvme_samsung_pm9a3() -> None:
    s = load("nvme-null-SAMSUNG_MZQL23T8HCLS-00A07-nvme9.json")
    assert s.identity.model == "SAMSUNG MZQL23T8HCLS-00A07"
    assert (s.power_cycles, s.power_on_hours, s.unsafe_shutdowns) == (4, 4369, 1)
    assert (s.media_errors, s.percentage_used, s.temperature_c) == (0, 3, 22)
    assert s.host_bytes_written == 639454618 * 512000
    assert s.error_log_entries == 0


def test_nvme_micron_7450() -> None:
    s = load("nvme-null-Micron_7450_MTFDKCC3T2TFS-nvme1.json")
    assert s.identity.model == "Micron_7450_MTFDKCC3T2TFS"
    assert (s.power_cycles, s.power_on_hours, s.unsafe_shutdowns) == (32, 2884, 30)
    assert s.data_units_written == 1248078
    assert (s.media_errors, s.percentage_used, s.temperature_c) == (0, 0, 33)


def test_nvme_with_namespace_has_eui64_and_capacity() -> None:
    s = load("KXG60ZNV512G_TOSHIBA_2.json")
    # eui64 {oui: 9233294 = 0x8ce38e, ext_id: 21483710645 = 0x05008768b5}
    assert s.identity.wwn == "eui.8ce38e05008768b5"
    assert (s.identity.capacity_bytes, s.identity.logical_block_size) == (512110190592, 4096)


def test_intel_sata_s4510_uses_174_not_duplicate_192() -> None:
    s = load("sat-Intel_S4510_S4610_S4500_S4600_Series_SSDs-INTEL_SSDSC2KB480G8-sdm.json")
    i = s.identity
    assert (i.model, i.protocol, i.transport, i.rotation_rate, i.is_ssd) == (
        "INTEL SSDSC2KB480G8",
        "ATA",
        "sat",
        0,
        True,
    )
    # wwn {naa 5, oui 0x5cd2e4, id 1234567890 (redacted)}
    assert i.wwn == "naa.55cd2e40499602d2"
    assert (i.capacity_bytes, i.logical_block_size, i.physical_block_size) == (
        480103981056,
        512,
        4096,
    )
    assert (s.power_cycles, s.power_on_hours) == (10, 13017)
    assert s.unsafe_shutdowns == 7 and s.unsafe_shutdowns_source == "ata:174:Unsafe_Shutdown_Count"
    # 233 Media_Wearout_Indicator normalised 100 -> 0 % used
    assert (s.percentage_used, s.percentage_used_source) == (0, "ata:233:Media_Wearout_Indicator")
    # 225/241 Host_Writes_32MiB raw 14308
    assert s.host_bytes_written == 14308 * 32 * 2**20
    assert s.host_bytes_written_source == "ata:225:Host_Writes_32MiB"
    assert (s.reallocated_sectors, s.reported_uncorrectable, s.pending_sectors) == (0, 0, 0)
    assert s.offline_uncorrectable is None  # this model has no 198
    assert (s.crc_errors, s.temperature_c, s.media_errors, s.critical_warning) == (
        0,
        30,
        None,
        None,
    )


def test_intel_sata_dc_s3500_wear() -> None:
    s = load("sat-Intel_730_and_DC_S35x0_3610_3700_Series_SSDs-INTEL_SSDSC2BB240G4-sde.json")
    assert (s.unsafe_shutdowns, s.power_cycles) == (49, 55)
    assert s.percentage_used == 78  # 233 normalised 22
    assert s.host_bytes_written == 15376617 * 32 * 2**20


def test_dell_s3520_prefers_32mib_unit_over_mislabelled_lbas() -> None:
    # 241 is named Total_LBAs_Written here but equals 225 Host_Writes_32MiB (129493);
    # 233 is named Total_LBAs_Written too, so it is not a wear indicator on this model.
    s = load("sat-Dell_Certified_Intel_S3520_Series_SSDs-SSDSCKJB240G7R-sdm.json")
    assert s.host_bytes_written == 129493 * 32 * 2**20
    assert s.host_bytes_written_source == "ata:225:Host_Writes_32MiB"
    assert s.percentage_used_source == "ata:245:Percent_Life_Remaining"
    assert (s.percentage_used, s.unsafe_shutdowns) == (0, 167)


def test_micron_5300_sata() -> None:
    s = load("sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK1T9TDS-sda.json")
    assert s.identity.model == "Micron_5300_MTFDDAK1T9TDS"
    assert s.identity.wwn == "naa.500a0750499602d2"
    assert s.identity.capacity_bytes == 1920383410176
    assert (s.power_cycles, s.power_on_hours) == (19, 4175)
    assert s.unsafe_shutdowns == 16
    assert s.unsafe_shutdowns_source == "ata:174:Unexpect_Power_Loss_Ct"
    assert s.crc_errors == 24  # 199 UDMA_CRC_Error_Count
    assert (s.reallocated_sectors, s.reported_uncorrectable) == (0, 0)
    assert (s.pending_sectors, s.offline_uncorrectable) == (0, 0)
    assert s.percentage_used == 0 and s.percentage_used_source == "ata:202:Percent_Lifetime_Remain"
    assert s.host_bytes_written == 130006927240 * 512  # 246 Total_LBAs_Written
    assert s.temperature_c == 24


def test_micron_5300_wear_from_202() -> None:
    s = load("sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK960TDS-sdi.json")
    assert s.percentage_used == 1  # 202 normalised 99 (raw 1 = percent used, consistent)
    assert s.unsafe_shutdowns == 2


def test_samsung_sata_uses_235_por_recovery() -> None:
    s = load("SAMSUNG_MZ7WD240HAFV-00003_21.json")
    assert s.identity.model == "SAMSUNG MZ7WD240HAFV-00003"
    assert (s.identity.rotation_rate, s.identity.is_ssd) == (0, True)
    assert s.unsafe_shutdowns == 1 and s.unsafe_shutdowns_source == "ata:235:POR_Recovery_Count"
    assert s.power_cycles == 6 and s.power_on_hours == 84619
    assert s.percentage_used == 9  # 177 Wear_Leveling_Count normalised 91
    assert s.host_bytes_written == 216456537880 * 512
    assert (s.reallocated_sectors, s.reported_uncorrectable, s.crc_errors) == (0, 0, 0)
    assert s.pending_sectors is None and s.temperature_c == 27


def test_samsung_pm883_235() -> None:
    s = load("sat-Samsung_based_SSDs-SAMSUNG_MZ7LH480HAHQ-00005-sda.json")
    assert (s.unsafe_shutdowns, s.power_cycles, s.percentage_used) == (161, 168, 1)


@pytest.mark.parametrize(
    ("name", "model", "cycles", "hours", "rpm", "crc"),
    [
        ("ST3500418AS_11.json", "ST3500418AS", 26, 44670, 7200, 0),
        ("WDC_WD20EFRX-68EUZN0_17.json", "WDC WD20EFRX-68EUZN0", 3, 47657, 5400, 0),
        ("HGST_HUS724020ALE640_28.json", "HGST HUS724020ALE640", 81, 83425, 7200, 12),
        (
            "sat-HGST_Ultrastar_7K6000-HGST_HUS726040ALE614-sdb.json",
            "HGST HUS726040ALE614",
            121,
            None,
            7200,
            0,
        ),
    ],
)
def test_hard_disks_192_is_not_unsafe_shutdowns(
    name: str, model: str, cycles: int, hours: int | None, rpm: int, crc: int | None
) -> None:
    s = load(name)
    assert s.identity.model == model and s.identity.rotation_rate == rpm
    assert s.identity.is_ssd is False
    assert s.power_cycles == cycles
    if hours is not None:
        assert s.power_on_hours == hours
    if crc is not None:
        assert s.crc_errors == crc
    assert s.unsafe_shutdowns is None and s.unsafe_shutdowns_source is None
    assert s.percentage_used is None


def test_hgst_192_raw_1703_never_becomes_unsafe_shutdowns() -> None:
    s = load("sat-HGST_Ultrastar_7K6000-HGST_HUS726040ALE614-sdb.json")
    table = json.loads(s.raw)["ata_smart_attributes"]["table"]
    assert [a["raw"]["value"] for a in table if a["id"] == 192] == [1703]
    assert s.unsafe_shutdowns is None


def test_hgst_has_192_retract_count_which_is_ignored() -> None:
    s = load("HGST_HUS724020ALE640_28.json")
    table = json.loads(s.raw)["ata_smart_attributes"]["table"]
    assert {a["id"]: a["name"] for a in table}[192] == "Power-Off_Retract_Count"
    assert s.unsafe_shutdowns is None
    assert s.smartctl_exit == SmartctlExit.ERROR_LOG  # exit 64: error log has entries


def test_seagate_hdd_241_lbas_written() -> None:
    s = load("ST3500418AS_11.json")
    assert s.reallocated_sectors == 1
    assert s.host_bytes_written_source == "ata:241:Total_LBAs_Written"
    assert s.host_bytes_written == 543343366 * 512


def test_sas_hitachi() -> None:
    s = load("HITACHI_H109060SESUN600G_10.json")
    i = s.identity
    assert (i.model, i.firmware, i.protocol, i.transport) == (
        "HITACHI H109060SESUN600G",
        "A31A",
        "SCSI",
        "scsi",
    )
    assert (i.wwn, i.capacity_bytes, i.logical_block_size) == (
        "naa.1234567890abcdef",
        600127266816,
        512,
    )
    assert (i.rotation_rate, i.is_ssd) == (10020, False)
    assert s.power_on_hours == 22364
    assert s.power_cycles is None and s.unsafe_shutdowns is None  # SCSI: not reported
    assert (s.media_errors, s.reallocated_sectors) == (0, 0)
    assert s.host_bytes_written == 127551260 * 10**6  # "127551.260" GB
    assert s.temperature_c == 26 and s.smart_passed is True


def test_sas_seagate_with_errors() -> None:
    s = load("SEAGATE_ST373453LC_26.json")
    assert s.identity.model == "SEAGATE ST373453LC" and s.identity.firmware == "DX10"
    assert s.identity.wwn is None
    assert s.media_errors == 536  # read 1 + write 535 uncorrected
    assert s.reallocated_sectors == 260  # grown defect list
    assert s.host_bytes_written == 11151772 * 10**6
    assert (s.power_on_hours, s.temperature_c) == (102880, 33)


def test_identity_converts_to_campaign_identity() -> None:
    s = load("sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK1T9TDS-sda.json")
    ident = s.identity.to_drive_identity()
    assert ident.model == "Micron_5300_MTFDDAK1T9TDS"
    assert ident.wwn == "naa.500a0750499602d2"
    from rig.drive.identity import DriveIdentity

    assert ident.matches(DriveIdentity(model="x", serial="y", wwn="0x500a0750499602d2"))
