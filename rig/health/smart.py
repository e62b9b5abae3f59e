"""Parse `smartctl --json` output (ATA, NVMe and SCSI flavours) into a HealthSnapshot.

ATA attribute numbers are not a standard: the same number means different things on different
models (192 is an unsafe-shutdown count on Intel SSDs and Power-Off_Retract_Count on hard disks;
233 is a wear indicator on Intel and Total_LBAs_Written on Dell-branded S3520s). So every ATA
field below is mapped from (id, name) pairs as smartctl's drive database names them, in a fixed
order of preference, and the attribute used is recorded in the snapshot (`*_source`). The
table and the reasoning are in docs/health.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from rig.health.counters import as_uint, counter, get_path
from rig.health.errors import ToolOutputError
from rig.health.snapshot import HealthSnapshot, SmartctlExit, SmartIdentity

NVME_DATA_UNIT_BYTES = 512_000  # NVMe: one data unit = 1000 * 512 bytes

# Unsafe-shutdown counters, in order of preference.
UNSAFE_SHUTDOWN_NAMES = frozenset({"Unsafe_Shutdown_Count", "Unexpect_Power_Loss_Ct"})
SAMSUNG_POR_RECOVERY = (235, "POR_Recovery_Count")
HDD_RETRACT_NAME = "Power-Off_Retract_Count"

# Wear attributes whose normalised value is "percent of rated life remaining" (100 = new).
# percentage_used = 100 - normalised. Preference order as listed.
WEAR_REMAINING_ATTRS: tuple[tuple[int, str], ...] = (
    (233, "Media_Wearout_Indicator"),  # Intel
    (177, "Wear_Leveling_Count"),  # Samsung (raw = average P/E cycles, not a percent)
    (202, "Percent_Lifetime_Remain"),  # Micron/Crucial (raw = percent used)
    (231, "SSD_Life_Left"),  # SandForce-based, Kingston, ADATA...
    (245, "Percent_Life_Remaining"),  # Dell-branded Intel S3520
    (169, "Remaining_Lifetime_Perc"),
)

# Host-write attributes by name; a unit stated in the name wins over "LBAs" (see module doc).
_MIB = 1 << 20
WRITE_ATTRS_BY_UNIT: tuple[tuple[str, int | None], ...] = (
    ("Host_Writes_32MiB", 32 * _MIB),
    ("Host_Writes_GiB", 1 << 30),
    ("Lifetime_Writes_GiB", 1 << 30),
    ("Host_Writes_MiB", _MIB),
    ("Total_LBAs_Written", None),  # None: times the logical block size
)


@dataclass(frozen=True)
class AtaAttribute:
    id: int
    name: str
    normalized: int | None
    raw: int | None


def parse_smartctl_json(text: str) -> HealthSnapshot:
    """A HealthSnapshot from the JSON text of `smartctl --json ...` (any of -i, -a, -x).

    Raises ToolOutputError when the text is not a smartctl JSON object with a device section.
    """
    doc = _load(text)
    protocol = get_path(doc, "device", "protocol")
    if not isinstance(protocol, str):
        messages = get_path(doc, "smartctl", "messages") or []
        detail = "; ".join(str(m.get("string", m)) for m in messages if isinstance(m, Mapping))
        raise ToolOutputError(
            f"smartctl JSON has no device section{': ' + detail if detail else ''}"
        )
    identity = _identity(doc, protocol)
    common: dict[str, Any] = {
        "identity": identity,
        "source": "smartctl",
        "smart_passed": _bool(get_path(doc, "smart_status", "passed")),
        "power_on_hours": as_uint(get_path(doc, "power_on_time", "hours")),
        "temperature_c": _int(get_path(doc, "temperature", "current")),
        "smartctl_exit": _exit_status(doc),
        "raw": text,
    }
    if protocol == "NVMe":
        common.update(_nvme_fields(doc))
    elif protocol == "ATA":
        common.update(_ata_fields(doc, identity))
    elif protocol == "SCSI":
        common.update(_scsi_fields(doc))
    # any other protocol: identity and the common fields only, counters unknown
    return HealthSnapshot(**common)


def smartctl_messages(text: str) -> list[str]:
    """The `smartctl.messages[].string` lines of an output; [] if it is not JSON."""
    try:
        doc = json.loads(text)
    except ValueError:
        return []
    messages = get_path(doc, "smartctl", "messages")
    if not isinstance(messages, list):
        return []
    return [str(m["string"]) for m in messages if isinstance(m, Mapping) and "string" in m]


def _load(text: str) -> Mapping[str, Any]:
    if not text.strip():
        raise ToolOutputError("smartctl printed nothing")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        head = text[:60].replace("\n", " ")
        raise ToolOutputError(
            f"smartctl output is not JSON (truncated or garbage) at char {exc.pos}: {head!r}"
        ) from exc
    if not isinstance(doc, dict):
        raise ToolOutputError(f"smartctl JSON is a {type(doc).__name__}, not an object")
    return doc


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _exit_status(doc: Mapping[str, Any]) -> SmartctlExit | None:
    status = _int(get_path(doc, "smartctl", "exit_status"))
    return None if status is None else SmartctlExit(status & 0xFF)


# --- identity -------------------------------------------------------------------------------


def _identity(doc: Mapping[str, Any], protocol: str) -> SmartIdentity:
    rotation = _int(doc.get("rotation_rate"))
    if rotation is not None:
        # ATA and SCSI both define 1 as "non-rotating medium"; smartctl prints 0 for it.
        is_ssd: bool | None = rotation in (0, 1)
    else:
        is_ssd = True if protocol == "NVMe" else None
    if protocol == "SCSI":
        model = _str(doc.get("scsi_model_name")) or _str(doc.get("model_name"))
        firmware = _str(doc.get("scsi_revision")) or _str(doc.get("firmware_version"))
    else:
        model = _str(doc.get("model_name"))
        firmware = _str(doc.get("firmware_version"))
    return SmartIdentity(
        model=model,
        serial=_str(doc.get("serial_number")),
        wwn=_wwn(doc),
        firmware=firmware,
        capacity_bytes=as_uint(get_path(doc, "user_capacity", "bytes")),
        logical_block_size=_int(doc.get("logical_block_size")),
        physical_block_size=_int(doc.get("physical_block_size")),
        protocol=protocol,
        transport=_str(get_path(doc, "device", "type")),
        rotation_rate=rotation,
        is_ssd=is_ssd,
    )


def _wwn(doc: Mapping[str, Any]) -> str | None:
    ata = doc.get("wwn")
    if isinstance(ata, Mapping):
        naa, oui, ident = (_int(ata.get(k)) for k in ("naa", "oui", "id"))
        if naa is not None and oui is not None and ident is not None:
            # ATA IDENTIFY words 108-111: NAA (4 bits) | IEEE OUI (24) | unique id (36)
            value = (naa << 60) | (oui << 36) | (ident & ((1 << 36) - 1))
            return f"naa.{value:016x}"
    lu_id = _str(doc.get("logical_unit_id"))
    if lu_id:
        digits = lu_id.lower().removeprefix("0x")
        if digits and all(c in "0123456789abcdef" for c in digits):
            return f"naa.{digits}"
    namespaces = doc.get("nvme_namespaces")
    if isinstance(namespaces, list) and namespaces and isinstance(namespaces[0], Mapping):
        ns = namespaces[0]
        eui = ns.get("eui64")
        if isinstance(eui, Mapping):
            oui, ext = _int(eui.get("oui")), _int(eui.get("ext_id"))
            if oui is not None and ext is not None:
                return f"eui.{(oui << 40) | ext:016x}"
        nguid = _str(ns.get("nguid"))
        if nguid:
            return "eui." + nguid.lower().replace("-", "")
    return None


# --- NVMe -----------------------------------------------------------------------------------


def _nvme_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    log = doc.get("nvme_smart_health_information_log")
    log = log if isinstance(log, Mapping) else {}
    written = counter(log, "data_units_written")
    power_cycles = counter(log, "power_cycles")
    if power_cycles is None:
        power_cycles = as_uint(doc.get("power_cycle_count"))
    power_on = counter(log, "power_on_hours")
    fields: dict[str, Any] = {
        "power_cycles": power_cycles,
        "unsafe_shutdowns": counter(log, "unsafe_shutdowns"),
        "unsafe_shutdowns_source": "nvme:unsafe_shutdowns" if "unsafe_shutdowns" in log else None,
        "media_errors": counter(log, "media_errors"),
        "critical_warning": as_uint(log.get("critical_warning")),
        "percentage_used": as_uint(log.get("percentage_used")),
        "percentage_used_source": "nvme:percentage_used" if "percentage_used" in log else None,
        "data_units_written": written,
        "host_bytes_written": None if written is None else written * NVME_DATA_UNIT_BYTES,
        "host_bytes_written_source": None if written is None else "nvme:data_units_written",
        "available_spare": as_uint(log.get("available_spare")),
        "available_spare_threshold": as_uint(log.get("available_spare_threshold")),
        "error_log_entries": counter(log, "num_err_log_entries"),
    }
    if power_on is not None:
        fields["power_on_hours"] = power_on
    temp = _int(log.get("temperature"))  # smartctl converts the log's Kelvin to Celsius
    if temp is not None:
        fields["temperature_c"] = temp
    return fields


# --- ATA ------------------------------------------------------------------------------------


def ata_attributes(doc: Mapping[str, Any]) -> dict[int, AtaAttribute]:
    table = get_path(doc, "ata_smart_attributes", "table")
    attrs: dict[int, AtaAttribute] = {}
    if not isinstance(table, list):
        return attrs
    for row in table:
        if not isinstance(row, Mapping) or _int(row.get("id")) is None:
            continue
        attr_id = int(row["id"])
        attrs[attr_id] = AtaAttribute(
            id=attr_id,
            name=str(row.get("name", "")),
            normalized=_int(row.get("value")),
            raw=as_uint(get_path(row, "raw", "value")),
        )
    return attrs


def _src(attr: AtaAttribute) -> str:
    return f"ata:{attr.id}:{attr.name}"


def _raw(attrs: Mapping[int, AtaAttribute], attr_id: int) -> int | None:
    attr = attrs.get(attr_id)
    return None if attr is None else attr.raw


def ata_unsafe_shutdowns(
    attrs: Mapping[int, AtaAttribute], rotation_rate: int | None
) -> AtaAttribute | None:
    """The attribute that counts unsafe shutdowns on this drive, or None if it has none."""
    for attr_id in (174, 192):
        attr = attrs.get(attr_id)
        if attr is None or attr.raw is None:
            continue
        if attr.name in UNSAFE_SHUTDOWN_NAMES:
            return attr
        # An SSD without a drive-database entry gets smartctl's default name for 192; an SSD
        # has no heads to retract, and vendors reuse 192 for unexpected power loss. Only when
        # the drive itself says it does not rotate: on a hard disk 192 is a head retract count.
        if attr_id == 192 and attr.name == HDD_RETRACT_NAME and rotation_rate == 0:
            return attr
    attr = attrs.get(SAMSUNG_POR_RECOVERY[0])
    if attr is not None and attr.name == SAMSUNG_POR_RECOVERY[1] and attr.raw is not None:
        return attr
    return None


def ata_percentage_used(attrs: Mapping[int, AtaAttribute]) -> AtaAttribute | None:
    for attr_id, name in WEAR_REMAINING_ATTRS:
        attr = attrs.get(attr_id)
        # 0..100 only: some firmware reports sentinels (e.g. 253) before the value is known
        if attr is None or attr.name != name or attr.normalized is None:
            continue
        if 0 <= attr.normalized <= 100:
            return attr
    return None


def ata_host_bytes_written(
    attrs: Mapping[int, AtaAttribute], logical_block_size: int | None
) -> tuple[int, AtaAttribute] | None:
    for name, unit in WRITE_ATTRS_BY_UNIT:
        for attr in sorted(attrs.values(), key=lambda a: a.id):
            if attr.name != name or attr.raw is None:
                continue
            size = unit if unit is not None else logical_block_size
            if size is None:
                continue
            return attr.raw * size, attr
    return None


def _ata_fields(doc: Mapping[str, Any], identity: SmartIdentity) -> dict[str, Any]:
    attrs = ata_attributes(doc)
    unsafe = ata_unsafe_shutdowns(attrs, identity.rotation_rate)
    wear = ata_percentage_used(attrs)
    written = ata_host_bytes_written(attrs, identity.logical_block_size)
    power_cycles = as_uint(doc.get("power_cycle_count"))
    if power_cycles is None:
        power_cycles = _raw(attrs, 12)
    return {
        "power_cycles": power_cycles,
        "unsafe_shutdowns": None if unsafe is None else unsafe.raw,
        "unsafe_shutdowns_source": None if unsafe is None else _src(unsafe),
        "reallocated_sectors": _raw(attrs, 5),
        "reported_uncorrectable": _raw(attrs, 187),
        "pending_sectors": _raw(attrs, 197),
        "offline_uncorrectable": _raw(attrs, 198),
        "crc_errors": _raw(attrs, 199),
        "percentage_used": None
        if wear is None or wear.normalized is None
        else 100 - wear.normalized,
        "percentage_used_source": None if wear is None else _src(wear),
        "host_bytes_written": None if written is None else written[0],
        "host_bytes_written_source": None if written is None else _src(written[1]),
    }


# --- SCSI -----------------------------------------------------------------------------------


def _scsi_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    log = doc.get("scsi_error_counter_log")
    log = log if isinstance(log, Mapping) else {}
    uncorrected = [
        as_uint(get_path(log, direction, "total_uncorrected_errors"))
        for direction in ("read", "write", "verify")
    ]
    known = [u for u in uncorrected if u is not None]
    written = _scsi_gigabytes(get_path(log, "write", "gigabytes_processed"))
    wear = as_uint(doc.get("scsi_percentage_used_endurance_indicator"))
    return {
        # SCSI has no power-cycle or unsafe-shutdown counter in its standard log pages; the
        # start-stop cycle counter counts spindle starts, which is not the same thing.
        "media_errors": sum(known) if known else None,
        "reallocated_sectors": as_uint(doc.get("scsi_grown_defect_list")),
        "host_bytes_written": written,
        "host_bytes_written_source": None if written is None else "scsi:write.gigabytes_processed",
        "percentage_used": wear,
        "percentage_used_source": None if wear is None else "scsi:percentage_used_endurance",
    }


def _scsi_gigabytes(value: Any) -> int | None:
    """smartctl prints SCSI 'gigabytes processed' (10**9 bytes) as a decimal string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value * 10**9
    if not isinstance(value, str):
        return None
    try:
        amount = Decimal(value.strip())
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount < 0:
        return None
    return int(amount * 10**9)
