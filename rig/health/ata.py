"""ATA SMART attributes: which attribute, under which drive-database name, holds each counter.

ATA attribute numbers are not a standard: the same number means different things on different
models (192 is an unsafe-shutdown count on Intel SSDs and Power-Off_Retract_Count on hard disks;
197 is Current_Pending_Sector on most drives and Not_In_Use on Phison ones; 233 is a wear
indicator on Intel and Total_LBAs_Written on Dell-branded S3520s). So every ATA field below is
mapped from (id, name) pairs as smartctl's drive database names them (its presets show in the
JSON as the names and as `model_family`), in a fixed order of preference, and the attribute used
is recorded in the snapshot (`*_source`). An attribute smartctl could not name (no drive-database
entry: `Unknown_Attribute`, or a default name such as `Power-Off_Retract_Count` on an SSD) is
never read. The table and the reasoning are in docs/health.md; rig.health.smart parses the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from rig.health.counters import as_uint, get_path

# Unsafe-shutdown counters: these ids, under one of these drive-database names.
UNSAFE_SHUTDOWN_IDS = (174, 192)
UNSAFE_SHUTDOWN_NAMES = frozenset(
    {
        "Unsafe_Shutdown_Count",  # Intel, Phison (Kingston KC400)
        "Unexpect_Power_Loss_Ct",  # Micron/Crucial
        "Unexpected_Pwr_Loss_Ct",
        "Unexpected_Pwr_Loss_Cnt",
        "Unexpected_Power_Loss",
        "Unexpect_PwrLoss_Ct",
        "Unexpect_Power_Loss",
        "Pwr_Cycle_Ct_Unplanned",
        "Unclean_Shutdown_Ct",
    }
)
# Samsung SATA has no 174/192; 235 counts recoveries from sudden power-off (real-data README).
SAMSUNG_POR_RECOVERY = (235, "POR_Recovery_Count")
HDD_RETRACT_NAME = "Power-Off_Retract_Count"
UNNAMED = frozenset({"Unknown_Attribute", "Unknown_SSD_Attribute", "Unknown_HDD_Attribute"})

# Counters that keep one meaning under several names; an id under any other name is not read
# (a Kingston KC400 names 197 Not_In_Use).
NamedIds = tuple[tuple[int, frozenset[str]], ...]
REALLOCATED: NamedIds = (
    (
        5,
        frozenset(
            {
                "Reallocated_Sector_Ct",
                "Retired_Block_Count",
                "Reallocated_Block_Count",
                "Reallocate_NAND_Blk_Cnt",
            }
        ),
    ),
)
REPORTED_UNCORRECTABLE: NamedIds = (
    (
        187,
        frozenset(
            {
                "Reported_Uncorrect",
                "Uncorrectable_Error_Cnt",  # Intel S3520/S4510, Samsung
                "Uncorrectable_ECC_Ct",
                "Reported_UE_Counts",
            }
        ),
    ),
    (160, frozenset({"Uncorrectable_Error_Cnt"})),  # Silicon Motion, Innodisk, StorFly
    (195, frozenset({"Uncorrectable_Error_Cnt"})),  # Dell-branded Intel S3520
)
PENDING: NamedIds = (
    (197, frozenset({"Current_Pending_Sector", "Pending_Sector_Count", "Current_Pending_ECC_Cnt"})),
)
OFFLINE_UNCORRECTABLE: NamedIds = (
    (198, frozenset({"Offline_Uncorrectable", "Uncorrectable_Sector_Ct"})),
)
CRC_ERRORS: NamedIds = (
    (
        199,
        frozenset(
            {"UDMA_CRC_Error_Count", "CRC_Error_Count", "SATA_CRC_Error_Count", "SATA_CRC_Error"}
        ),
    ),
)
POWER_CYCLES: NamedIds = ((12, frozenset({"Power_Cycle_Count"})),)


class WearReading(Enum):
    """How a wear attribute says how much of the rated life is left."""

    NORMALIZED_REMAINING = "normalised value = percent of life left"
    RAW_REMAINING = "raw value = percent of life left"
    RAW_USED = "raw value = percent of life used"


@dataclass(frozen=True)
class WearAttr:
    id: int
    name: str
    reading: WearReading


INTEL_233 = WearAttr(233, "Media_Wearout_Indicator", WearReading.NORMALIZED_REMAINING)
SAMSUNG_177 = WearAttr(177, "Wear_Leveling_Count", WearReading.NORMALIZED_REMAINING)
SILICON_MOTION_169 = WearAttr(169, "Remaining_Lifetime_Perc", WearReading.RAW_REMAINING)
PHISON_231 = WearAttr(231, "SSD_Life_Left", WearReading.RAW_REMAINING)

# percentage_used = 100 - life left; first match wins. For a drive of no family below.
WEAR_ATTRS: tuple[WearAttr, ...] = (
    INTEL_233,
    SAMSUNG_177,  # also smartctl's DEFAULT name for 177 on any SSD: see WEAR_BY_FAMILY
    WearAttr(202, "Perc_Rated_Life_Used", WearReading.RAW_USED),  # Crucial/Micron m4 era
    WearAttr(173, "Wear_Leveling_Count", WearReading.NORMALIZED_REMAINING),  # Crucial/Micron m4
    WearAttr(202, "Percent_Lifetime_Remain", WearReading.NORMALIZED_REMAINING),  # Micron
    WearAttr(245, "Percent_Life_Remaining", WearReading.NORMALIZED_REMAINING),  # Dell S3520
    SILICON_MOTION_169,  # only a drive-database preset names 169 so
    WearAttr(231, "SSD_Life_Left", WearReading.NORMALIZED_REMAINING),  # SandForce and others
)


@dataclass(frozen=True)
class FamilyWear:
    """The wear attributes of one controller family (smartctl's `model_family`), in order;
    any other attribute, however it is named, is not read as wear on these drives."""

    family: re.Pattern[str]
    attrs: tuple[WearAttr, ...]
    evidence: str


# Per-family rules, from smartctl's drive database (drivedb.h) and captures (docs/health.md,
# "Wear"). First matching family wins; a drive of none of them uses WEAR_ATTRS.
WEAR_BY_FAMILY: tuple[FamilyWear, ...] = (
    FamilyWear(
        re.compile(r"^Silicon Motion based"),
        (SILICON_MOTION_169,),
        "drivedb presets 169 Remaining_Lifetime_Perc and leaves 177 to the DEFAULT name;"
        " 177's normalised value stays 100 while 169's raw counts life left (a capture: 169's"
        " raw 96 where 177 read 0 % used)",
    ),
    FamilyWear(
        re.compile(r"^Innodisk (3IE2|1IE3)/"),  # the two Innodisk entries that name 169 so
        (SILICON_MOTION_169,),
        "drivedb presets 169 Remaining_Lifetime_Perc; 177 has only the DEFAULT name",
    ),
    FamilyWear(
        re.compile(r"^Phison Driven"),
        (PHISON_231,),
        "231 SSD_Life_Left's raw is life left, its normalised value stays 100 (Kingston KC400:"
        " raw 74 = 26 % used)",
    ),
    FamilyWear(
        re.compile(r"^Samsung based"),
        (SAMSUNG_177,),
        "the real captures: 177 normalised 99..90 while its raw is the P/E count (25..1773)",
    ),
)


def wear_attrs_of(family: str) -> tuple[WearAttr, ...]:
    """The wear attributes to try, in order, on a drive of smartctl model family `family`."""
    for rule in WEAR_BY_FAMILY:
        if rule.family.search(family):
            return rule.attrs
    return WEAR_ATTRS


# Host-write attributes by name; a unit stated in the name wins over "LBAs" (see module doc).
_MIB = 1 << 20
WRITE_ATTRS_BY_UNIT: tuple[tuple[str, int | None], ...] = (
    ("Host_Writes_32MiB", 32 * _MIB),
    ("Host_Writes_GiB", 1 << 30),
    ("Lifetime_Writes_GiB", 1 << 30),
    ("Host_Writes_MiB", _MIB),
    ("Total_LBAs_Written", None),  # None: times the logical block size (but see INTEL_FAMILY)
)
# Total_LBAs_Written is read from these ids only (233 carries the name on Dell S3520s, where
# it is a copy of 225 in 32 MiB units).
LBAS_WRITTEN_IDS = (241, 246)
# Intel counts 241 in 32 MiB units on every SATA SSD it made; where smartctl's entry does not
# name 241 (Dell-certified S3520), the default name Total_LBAs_Written would read 66 MB for 4 TB.
INTEL_FAMILY = re.compile(r"\bIntel\b")


@dataclass(frozen=True)
class AtaAttribute:
    id: int
    name: str
    normalized: int | None
    raw: int | None


def ata_attributes(doc: Mapping[str, Any]) -> dict[int, AtaAttribute]:
    table = get_path(doc, "ata_smart_attributes", "table")
    attrs: dict[int, AtaAttribute] = {}
    if not isinstance(table, list):
        return attrs
    for row in table:
        if not isinstance(row, Mapping):
            continue
        attr_id = as_uint(row.get("id"), 8)  # attribute ids are one byte; 0 is "unused"
        name = row.get("name")
        if not attr_id or not isinstance(name, str):
            continue
        attrs[attr_id] = AtaAttribute(
            id=attr_id,
            name=name,
            normalized=as_uint(row.get("value"), 8),
            raw=as_uint(get_path(row, "raw", "value"), 64),
        )
    return attrs


def _src(attr: AtaAttribute) -> str:
    return f"ata:{attr.id}:{attr.name}"


def _named(attrs: Mapping[int, AtaAttribute], choices: NamedIds) -> AtaAttribute | None:
    """The first attribute present under an id and one of the names its meaning has."""
    for attr_id, names in choices:
        attr = attrs.get(attr_id)
        if attr is not None and attr.raw is not None and attr.name in names:
            return attr
    return None


def _raw(attrs: Mapping[int, AtaAttribute], choices: NamedIds) -> int | None:
    attr = _named(attrs, choices)
    return None if attr is None else attr.raw


def ata_unsafe_shutdowns(
    attrs: Mapping[int, AtaAttribute], rotation_rate: int | None = None
) -> AtaAttribute | None:
    """The attribute that counts unsafe shutdowns on this drive, or None if it has none.

    Only a drive-database name says so. 192 under smartctl's default name
    Power-Off_Retract_Count counts head retracts on a disk; on an SSD it means the drive is not
    in the database, and whatever the vendor counts there is not guessed (`rotation_rate` is
    kept in the signature for callers; it no longer changes the answer).
    """
    del rotation_rate
    unsafe = tuple((attr_id, UNSAFE_SHUTDOWN_NAMES) for attr_id in UNSAFE_SHUTDOWN_IDS)
    por_id, por_name = SAMSUNG_POR_RECOVERY
    return _named(attrs, (*unsafe, (por_id, frozenset({por_name}))))


def ata_percentage_used(
    attrs: Mapping[int, AtaAttribute], family: str = ""
) -> tuple[int, AtaAttribute] | None:
    """(percent of rated life used, the attribute read), or None."""
    for wear in wear_attrs_of(family):
        attr = attrs.get(wear.id)
        if attr is None or attr.name != wear.name:
            continue
        normalised = wear.reading is WearReading.NORMALIZED_REMAINING
        value = attr.normalized if normalised else attr.raw
        # 0..100 only: some firmware reports sentinels (e.g. 253) before the value is known
        if value is None or not 0 <= value <= 100:
            continue
        return (value if wear.reading is WearReading.RAW_USED else 100 - value), attr
    return None


def ata_host_bytes_written(
    attrs: Mapping[int, AtaAttribute], logical_block_size: int | None, family: str = ""
) -> tuple[int, AtaAttribute] | None:
    for name, unit in WRITE_ATTRS_BY_UNIT:
        for attr in sorted(attrs.values(), key=lambda a: a.id):
            if attr.name != name or attr.raw is None:
                continue
            size = unit
            if unit is None:
                if attr.id not in LBAS_WRITTEN_IDS:
                    continue
                size = 32 * _MIB if attr.id == 241 and INTEL_FAMILY.search(family) else None
                size = size or logical_block_size
            if size is None:
                continue
            return attr.raw * size, attr
    return None


def ata_fields(
    doc: Mapping[str, Any], logical_block_size: int | None, family: str
) -> dict[str, Any]:
    """The snapshot's counter fields of an ATA drive (`family`: smartctl's model family)."""
    attrs = ata_attributes(doc)
    unsafe = ata_unsafe_shutdowns(attrs)
    wear = ata_percentage_used(attrs, family)
    written = ata_host_bytes_written(attrs, logical_block_size, family)
    power_cycles = as_uint(doc.get("power_cycle_count"), 64)
    if power_cycles is None:
        power_cycles = _raw(attrs, POWER_CYCLES)
    return {
        "power_cycles": power_cycles,
        "unsafe_shutdowns": None if unsafe is None else unsafe.raw,
        "unsafe_shutdowns_source": None if unsafe is None else _src(unsafe),
        "reallocated_sectors": _raw(attrs, REALLOCATED),
        "reported_uncorrectable": _raw(attrs, REPORTED_UNCORRECTABLE),
        "pending_sectors": _raw(attrs, PENDING),
        "offline_uncorrectable": _raw(attrs, OFFLINE_UNCORRECTABLE),
        "crc_errors": _raw(attrs, CRC_ERRORS),
        "percentage_used": None if wear is None else wear[0],
        "percentage_used_source": None if wear is None else _src(wear[1]),
        "host_bytes_written": None if written is None else written[0],
        "host_bytes_written_source": None if written is None else _src(written[1]),
    }
