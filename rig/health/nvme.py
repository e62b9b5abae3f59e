"""nvme-cli (2.x) JSON: `nvme id-ctrl -o json` and `nvme smart-log -o json`.

Field names follow nvme-cli 2.3's nvme-print.c (json_nvme_id_ctrl, json_smart_log): the SMART
log uses avail_spare / spare_thresh / percent_used, prints 128-bit counters as decimal strings,
and prints the composite temperature in Kelvin (smartctl prints Celsius). With -H the
critical_warning field becomes an object with a "value" member; both shapes are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rig.health.counters import as_uint, counter, load_json_object
from rig.health.errors import HealthToolError, ToolOutputError, total_parser
from rig.health.smart import NVME_DATA_UNIT_BYTES
from rig.health.snapshot import HealthSnapshot, SmartIdentity
from rig.health.tools import Runner, run_checked

KELVIN_OFFSET = 273  # NVMe reports whole kelvins; nvme-cli and smartctl both subtract 273


@dataclass(frozen=True)
class NvmeIdCtrl:
    vid: int | None
    ssvid: int | None
    serial: str | None
    model: str | None
    firmware: str | None
    ieee_oui: int | None
    cntlid: int | None
    version: int | None  # VER register value, e.g. 0x10300 = 1.3
    total_capacity: int | None  # tnvmcap, bytes
    unallocated_capacity: int | None
    namespaces: int | None  # nn
    volatile_write_cache: bool | None  # vwc bit 0: a volatile write cache is present
    awupf: int | None  # atomic write unit power fail, 0's based, in logical blocks
    awun: int | None
    subnqn: str | None


@dataclass(frozen=True)
class NvmeSmartLog:
    critical_warning: int | None
    temperature_c: int | None
    available_spare: int | None
    available_spare_threshold: int | None
    percentage_used: int | None
    data_units_read: int | None
    data_units_written: int | None
    host_read_commands: int | None
    host_write_commands: int | None
    power_cycles: int | None
    power_on_hours: int | None
    unsafe_shutdowns: int | None
    media_errors: int | None
    error_log_entries: int | None


def _load(text: str, what: str) -> Mapping[str, Any]:
    return load_json_object(text, f"nvme {what}")


def _text(value: Any) -> str | None:
    # id-ctrl strings are fixed-width, space padded
    return value.strip() or None if isinstance(value, str) else None


@total_parser("nvme id-ctrl")
def parse_nvme_id_ctrl(text: str) -> NvmeIdCtrl:
    """Identify Controller from `nvme id-ctrl -o json`; ToolOutputError for anything else.

    Widths are the Identify Controller fields' (NVMe base spec): a value that does not fit is
    None, never a wrapped or huge number.
    """
    doc = _load(text, "id-ctrl")
    if "sn" not in doc and "mn" not in doc:
        raise ToolOutputError("nvme id-ctrl: JSON has neither sn nor mn")
    vwc = as_uint(doc.get("vwc"), 8)
    return NvmeIdCtrl(
        vid=as_uint(doc.get("vid"), 16),
        ssvid=as_uint(doc.get("ssvid"), 16),
        serial=_text(doc.get("sn")),
        model=_text(doc.get("mn")),
        firmware=_text(doc.get("fr")),
        ieee_oui=as_uint(doc.get("ieee"), 24),
        cntlid=as_uint(doc.get("cntlid"), 16),
        version=as_uint(doc.get("ver"), 32),
        total_capacity=counter(doc, "tnvmcap"),
        unallocated_capacity=counter(doc, "unvmcap"),
        namespaces=as_uint(doc.get("nn"), 32),
        volatile_write_cache=None if vwc is None else bool(vwc & 1),
        awupf=as_uint(doc.get("awupf"), 16),
        awun=as_uint(doc.get("awun"), 16),
        subnqn=_text(doc.get("subnqn")),
    )


@total_parser("nvme smart-log")
def parse_nvme_smart_log(text: str) -> NvmeSmartLog:
    """SMART / Health log from `nvme smart-log -o json`; ToolOutputError for anything else."""
    doc = _load(text, "smart-log")
    if "critical_warning" not in doc:
        raise ToolOutputError("nvme smart-log: JSON has no critical_warning")
    warning = doc.get("critical_warning")
    if isinstance(warning, Mapping):  # -H (human readable) form
        warning = warning.get("value")
    kelvin = as_uint(doc.get("temperature"), 16)  # a word in the log page
    return NvmeSmartLog(
        critical_warning=as_uint(warning, 8),
        temperature_c=None if not kelvin else kelvin - KELVIN_OFFSET,  # 0 K: not reported
        available_spare=as_uint(doc.get("avail_spare"), 8),
        available_spare_threshold=as_uint(doc.get("spare_thresh"), 8),
        percentage_used=as_uint(doc.get("percent_used"), 8),
        data_units_read=counter(doc, "data_units_read"),
        data_units_written=counter(doc, "data_units_written"),
        host_read_commands=counter(doc, "host_read_commands"),
        host_write_commands=counter(doc, "host_write_commands"),
        power_cycles=counter(doc, "power_cycles"),
        power_on_hours=counter(doc, "power_on_hours"),
        unsafe_shutdowns=counter(doc, "unsafe_shutdowns"),
        media_errors=counter(doc, "media_errors"),
        error_log_entries=counter(doc, "num_err_log_entries"),
    )


def snapshot_from_nvme(id_ctrl: NvmeIdCtrl, log: NvmeSmartLog, raw: str = "") -> HealthSnapshot:
    """A HealthSnapshot from nvme-cli alone (for hosts or drives where smartctl falls short).

    Identify Controller has no namespace identifiers, so wwn, capacity and block sizes are None
    here; the bus layer gets them from the namespace.
    """
    written = log.data_units_written
    return HealthSnapshot(
        identity=SmartIdentity(
            model=id_ctrl.model,
            serial=id_ctrl.serial,
            firmware=id_ctrl.firmware,
            protocol="NVMe",
            transport="nvme",
            is_ssd=True,
        ),
        source="nvme-cli",
        smart_passed=None,  # nvme-cli has no overall verdict; see critical_warning
        power_cycles=log.power_cycles,
        power_on_hours=log.power_on_hours,
        unsafe_shutdowns=log.unsafe_shutdowns,
        unsafe_shutdowns_source=None if log.unsafe_shutdowns is None else "nvme:unsafe_shutdowns",
        media_errors=log.media_errors,
        media_errors_source=None if log.media_errors is None else "nvme:media_errors",
        critical_warning=log.critical_warning,
        percentage_used=log.percentage_used,
        percentage_used_source=None if log.percentage_used is None else "nvme:percent_used",
        data_units_written=written,
        host_bytes_written=None if written is None else written * NVME_DATA_UNIT_BYTES,
        host_bytes_written_source=None if written is None else "nvme:data_units_written",
        temperature_c=log.temperature_c,
        available_spare=log.available_spare,
        available_spare_threshold=log.available_spare_threshold,
        error_log_entries=log.error_log_entries,
        raw=raw,
    )


def nvme_id_ctrl(dev: str, runner: Runner, timeout_s: float | None = None) -> NvmeIdCtrl:
    result = run_checked(["nvme", "id-ctrl", dev, "--output-format=json"], runner, timeout_s)
    return parse_nvme_id_ctrl(result.stdout)


def nvme_smart_log(dev: str, runner: Runner, timeout_s: float | None = None) -> NvmeSmartLog:
    result = run_checked(["nvme", "smart-log", dev, "--output-format=json"], runner, timeout_s)
    return parse_nvme_smart_log(result.stdout)


def nvme_snapshot(dev: str, runner: Runner, timeout_s: float | None = None) -> HealthSnapshot:
    """id-ctrl and smart-log; `raw` keeps both JSON texts (one object) for the store."""
    ctrl = run_checked(["nvme", "id-ctrl", dev, "--output-format=json"], runner, timeout_s)
    log = run_checked(["nvme", "smart-log", dev, "--output-format=json"], runner, timeout_s)
    raw = '{"id_ctrl": ' + ctrl.stdout.strip() + ', "smart_log": ' + log.stdout.strip() + "}"
    return snapshot_from_nvme(
        parse_nvme_id_ctrl(ctrl.stdout), parse_nvme_smart_log(log.stdout), raw
    )


@total_parser("nvme id-ns")
def parse_nvme_id_ns_zeroes(text: str) -> bool | None:
    """Whether a namespace reads zeroes after deallocation, from `nvme id-ns -o json`: DLFEAT
    bits 2:0 = 001b (NVMe base spec, Identify Namespace, byte 33); None when it says nothing
    (000b: not reported)."""
    doc = _load(text, "nvme id-ns")
    dlfeat = as_uint(doc.get("dlfeat"), 8)
    if dlfeat is None or dlfeat & 0x7 == 0:
        return None
    return dlfeat & 0x7 == 1


def nvme_zeroes_after_discard(
    dev: str, runner: Runner, timeout_s: float | None = None
) -> bool | None:
    """DLFEAT of the namespace (`nvme id-ns -o json`), which smartctl does not print; None when
    nvme-cli cannot say (not installed, refused, unreadable answer): no promise then."""
    try:
        result = run_checked(["nvme", "id-ns", dev, "--output-format=json"], runner, timeout_s)
        return parse_nvme_id_ns_zeroes(result.stdout)
    except HealthToolError:
        return None
