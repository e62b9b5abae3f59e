"""Parse `smartctl --json` output (ATA, NVMe and SCSI flavours) into a HealthSnapshot.

Which ATA attribute holds which counter (attribute numbers are no standard: they are read only
under smartctl's drive-database names) is rig.health.ata's; the table and the reasoning are in
docs/health.md.

The parser is total: any text gives a HealthSnapshot or raises ToolOutputError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rig.health.ata import ata_fields
from rig.health.counters import (
    UINT64_MAX,
    as_int,
    as_uint,
    counter,
    get_path,
    load_json_object,
)
from rig.health.errors import ToolOutputError, total_parser
from rig.health.snapshot import HealthSnapshot, SmartctlExit, SmartIdentity

NVME_DATA_UNIT_BYTES = 512_000  # NVMe: one data unit = 1000 * 512 bytes

_GIGABYTES = re.compile(r"([0-9]{1,20})(?:\.([0-9]{0,9}))?", re.ASCII)
_HEX_ID = re.compile(r"(?:0x)?([0-9a-f]{1,32})", re.ASCII)
_NGUID = re.compile(r"[0-9a-f]{32}", re.ASCII)


@total_parser("smartctl")
def parse_smartctl_json(text: str) -> HealthSnapshot:
    """A HealthSnapshot from the JSON text of `smartctl --json ...` (any of -i, -a, -x).

    Raises ToolOutputError when the text is not a smartctl JSON object with a device section,
    and for nothing else.
    """
    doc = load_json_object(text, "smartctl")
    protocol = _str(get_path(doc, "device", "protocol"))
    if protocol is None:
        detail = "; ".join(_messages(doc))
        raise ToolOutputError(
            f"smartctl JSON has no device section{': ' + detail if detail else ''}"
        )
    identity = _identity(doc, protocol)
    common: dict[str, Any] = {
        "identity": identity,
        "source": "smartctl",
        "smart_passed": _bool(get_path(doc, "smart_status", "passed")),
        "power_on_hours": as_uint(get_path(doc, "power_on_time", "hours"), 64),
        "temperature_c": as_int(get_path(doc, "temperature", "current"), 16),
        "smartctl_exit": _exit_status(doc),
        "raw": text,
    }
    if protocol == "NVMe":
        common.update(_nvme_fields(doc))
    elif protocol == "ATA":
        common.update(ata_fields(doc, identity.logical_block_size, _family(doc)))
    elif protocol == "SCSI":
        common.update(_scsi_fields(doc))
    # any other protocol: identity and the common fields only, counters unknown
    common["zeroes_after_discard"] = zeroes_after_discard(doc, protocol)
    return HealthSnapshot(**common)


def zeroes_after_discard(doc: Mapping[str, Any], protocol: str) -> bool | None:
    """Whether the drive promises zeroes after a discard, where smartctl prints it: ATA IDENTIFY
    word 69 ("trim": deterministic and zeroed), SCSI LBPRZ (the logical block provisioning
    VPD page; 1: zeroes, 2: a provisioning pattern). smartctl does not print NVMe's DLFEAT
    (rig/health/nvme.py reads it from `nvme id-ns`): None there."""
    if protocol == "ATA":
        trim = doc.get("trim")
        if not isinstance(trim, Mapping) or not isinstance(trim.get("supported"), bool):
            return None
        return bool(trim["supported"] and trim.get("deterministic") and trim.get("zeroed"))
    if protocol == "SCSI":
        lbprz = as_uint(get_path(doc, "scsi_lb_provisioning", "read_zeros", "value"), 8)
        return None if lbprz is None else lbprz == 1
    return None


def smartctl_messages(text: str) -> list[str]:
    """The `smartctl.messages[].string` lines of an output; [] if it is not JSON."""
    try:
        doc = load_json_object(text, "smartctl")
    except ToolOutputError:
        return []
    return _messages(doc)


def _messages(doc: Mapping[str, Any]) -> list[str]:
    messages = get_path(doc, "smartctl", "messages")
    if not isinstance(messages, list):
        return []
    return [
        m["string"][:200]
        for m in messages
        if isinstance(m, Mapping) and isinstance(m.get("string"), str)
    ]


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _exit_status(doc: Mapping[str, Any]) -> SmartctlExit | None:
    status = as_uint(get_path(doc, "smartctl", "exit_status"), 8)  # an exit status is 0..255
    return None if status is None else SmartctlExit(status)


def _family(doc: Mapping[str, Any]) -> str:
    return _str(doc.get("model_family")) or ""


# --- identity -------------------------------------------------------------------------------


def _identity(doc: Mapping[str, Any], protocol: str) -> SmartIdentity:
    rotation = as_uint(doc.get("rotation_rate"), 16)
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
        capacity_bytes=as_uint(get_path(doc, "user_capacity", "bytes"), 64),
        logical_block_size=_block_size(doc.get("logical_block_size")),
        physical_block_size=_block_size(doc.get("physical_block_size")),
        protocol=protocol,
        transport=_str(get_path(doc, "device", "type")),
        rotation_rate=rotation,
        is_ssd=is_ssd,
    )


def _block_size(value: Any) -> int | None:
    size = as_uint(value, 32)
    return size or None  # 0 bytes is no block size


def _wwn(doc: Mapping[str, Any]) -> str | None:
    ata = doc.get("wwn")
    if isinstance(ata, Mapping):
        # ATA IDENTIFY words 108-111: NAA (4 bits) | IEEE OUI (24) | unique id (36)
        naa, oui, ident = (as_uint(ata.get(k), b) for k, b in (("naa", 4), ("oui", 24), ("id", 36)))
        if naa is not None and oui is not None and ident is not None:
            return f"naa.{(naa << 60) | (oui << 36) | ident:016x}"
    lu_id = _str(doc.get("logical_unit_id"))
    if lu_id and (match := _HEX_ID.fullmatch(lu_id.lower())):
        return f"naa.{match.group(1)}"
    namespaces = doc.get("nvme_namespaces")
    if isinstance(namespaces, list) and namespaces and isinstance(namespaces[0], Mapping):
        ns = namespaces[0]
        eui = ns.get("eui64")
        if isinstance(eui, Mapping):
            oui, ext = as_uint(eui.get("oui"), 24), as_uint(eui.get("ext_id"), 40)
            if oui is not None and ext is not None:
                return f"eui.{(oui << 40) | ext:016x}"
        nguid = (_str(ns.get("nguid")) or "").lower().replace("-", "")
        if _NGUID.fullmatch(nguid):
            return "eui." + nguid
    return None


# --- NVMe -----------------------------------------------------------------------------------


def _nvme_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    log = doc.get("nvme_smart_health_information_log")
    log = log if isinstance(log, Mapping) else {}
    written = counter(log, "data_units_written")
    power_cycles = counter(log, "power_cycles")
    if power_cycles is None:
        power_cycles = as_uint(doc.get("power_cycle_count"), 64)
    unsafe = counter(log, "unsafe_shutdowns")
    media = counter(log, "media_errors")
    wear = as_uint(log.get("percentage_used"), 8)  # one byte in the log page
    fields: dict[str, Any] = {
        "power_cycles": power_cycles,
        "unsafe_shutdowns": unsafe,
        "unsafe_shutdowns_source": None if unsafe is None else "nvme:unsafe_shutdowns",
        "media_errors": media,
        "media_errors_source": None if media is None else "nvme:media_errors",
        "critical_warning": as_uint(log.get("critical_warning"), 8),
        "percentage_used": wear,
        "percentage_used_source": None if wear is None else "nvme:percentage_used",
        "data_units_written": written,
        "host_bytes_written": None if written is None else written * NVME_DATA_UNIT_BYTES,
        "host_bytes_written_source": None if written is None else "nvme:data_units_written",
        "available_spare": as_uint(log.get("available_spare"), 8),
        "available_spare_threshold": as_uint(log.get("available_spare_threshold"), 8),
        "error_log_entries": counter(log, "num_err_log_entries"),
    }
    power_on = counter(log, "power_on_hours")
    if power_on is not None:
        fields["power_on_hours"] = power_on
    temp = as_int(log.get("temperature"), 16)  # smartctl converts the log's Kelvin to Celsius
    if temp is not None:
        fields["temperature_c"] = temp
    return fields


# --- ATA ------------------------------------------------------------------------------------


# --- SCSI -----------------------------------------------------------------------------------

SCSI_ERROR_PAGES = ("read", "write", "verify")


def _scsi_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    log = doc.get("scsi_error_counter_log")
    log = log if isinstance(log, Mapping) else {}
    pages = {
        page: as_uint(get_path(log, page, "total_uncorrected_errors"), 64)
        for page in SCSI_ERROR_PAGES
    }
    known = {page: value for page, value in pages.items() if value is not None}
    written = _scsi_gigabytes(get_path(log, "write", "gigabytes_processed"))
    wear = as_uint(doc.get("scsi_percentage_used_endurance_indicator"), 8)
    return {
        # SCSI has no power-cycle or unsafe-shutdown counter in its standard log pages; the
        # start-stop cycle counter counts spindle starts, which is not the same thing.
        # media_errors is a sum over the error-counter pages the drive returned this time; the
        # source names them, so a delta compares only sums over the same pages.
        "media_errors": sum(known.values()) if known else None,
        "media_errors_source": "scsi:" + "+".join(known) if known else None,
        "reallocated_sectors": as_uint(doc.get("scsi_grown_defect_list"), 32),
        "host_bytes_written": written,
        "host_bytes_written_source": None if written is None else "scsi:write.gigabytes_processed",
        "percentage_used": wear,
        "percentage_used_source": None if wear is None else "scsi:percentage_used_endurance",
    }


def _scsi_gigabytes(value: Any) -> int | None:
    """smartctl prints SCSI 'gigabytes processed' (10**9 bytes) as a decimal string ("127.3")."""
    if isinstance(value, int) and not isinstance(value, bool):
        whole = as_uint(value, 64)
        return None if whole is None else whole * 10**9
    if not isinstance(value, str):
        return None
    match = _GIGABYTES.fullmatch(value.strip())
    if match is None:
        return None
    whole, fraction = int(match.group(1)), match.group(2) or ""
    amount = whole * 10**9 + int(fraction.ljust(9, "0"))
    return amount if amount <= UINT64_MAX * 10**9 else None
