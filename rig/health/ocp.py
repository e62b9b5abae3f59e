"""The OCP Datacenter NVMe SSD SMART / Health Information Extended log (log page C0h).

Two sources, one typed result (`OcpSmartLog`):
- `nvme ocp smart-add-log DEV -o json` (nvme-cli's OCP plugin). Key names follow its printers:
  nvme-cli 2.3 (plugins/ocp/ocp-nvme.c `ocp_print_C0_log_json`) and the first JSON format of
  later versions print labels ("Incomplete shutdowns", "PLP start count"); nvme-cli 2.11 and
  later print snake_case keys by default (plugins/ocp/ocp-print-json.c
  `json_smart_extended_log_v2`). Both are read. 128-bit fields are decimal strings in 2.3 and
  bare JSON numbers later (nvme-json.c `util_json_object_new_uint128`); Python reads both exact.
- the raw 512-byte page (`nvme get-log DEV --log-id=0xc0 --log-len=512 -b`), decoded from the
  byte offsets of the log's layout (struct ocp_smart_extended_log in nvme-cli's
  ocp-smart-extended-log.h): `parse_ocp_c0_page`.

Either way the page must carry the OCP GUID AFD514C97C6F4F9CA4F2BFEA2810AFC5 (bytes 496-511,
little endian): anything else is another vendor's C0h page, not this log (ToolOutputError).
A field the page's log version does not define (later fields of an older log) is None: those
bytes are reserved in that version, whatever they hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rig.health.counters import as_uint, load_json_object
from rig.health.errors import ToolOutputError, total_parser
from rig.health.snapshot import HealthSnapshot
from rig.health.tools import Runner, first_line

OCP_C0_GUID = 0xAFD514C97C6F4F9CA4F2BFEA2810AFC5
OCP_C0_LEN = 512
# Capacitor Health of a drive without power-loss protection capacitors (OCP: FFFFh).
NO_CAPACITOR = 0xFFFF

# field -> (byte offset, width in bytes, first log version defining it, v2 key, label key)
FIELDS: dict[str, tuple[int, int, int, str, str]] = {
    "bad_user_nand_blocks": (
        32,
        6,
        0,
        "bad_user_nand_blocks_raw",
        "Bad user nand blocks - Raw",
    ),
    "bad_system_nand_blocks": (
        40,
        6,
        0,
        "bad_system_nand_blocks_raw",
        "Bad system nand blocks - Raw",
    ),
    "uncorrectable_read_errors": (
        56,
        8,
        0,
        "uncorrectable_read_errors",
        "Uncorrectable read error count",
    ),
    "pcie_correctable_errors": (
        104,
        8,
        0,
        "pcie_correctable_errors",
        "PCIe correctable error count",
    ),
    "incomplete_shutdowns": (112, 4, 0, "incomplete_shutdowns", "Incomplete shutdowns"),
    "capacitor_health": (128, 2, 0, "capacitor_health", "Capacitor health"),
    "plp_start_count": (160, 16, 0, "plp_start_count", "PLP start count"),
    "endurance_estimate": (176, 16, 0, "endurance_estimate", "Endurance estimate"),
    "pcie_link_retraining": (
        192,
        8,
        2,
        "pcie_link_retraining_count",
        "PCIe Link Retraining Count",
    ),
    "power_state_changes": (200, 8, 2, "power_state_change_count", "Power State Change Count"),
    "media_dies_offline": (220, 2, 5, "media_dies_offline", "Media dies offline"),
    "command_timeouts": (232, 4, 5, "command_timeouts", "Command timeouts"),
}
LOG_VERSION_AT = 494  # u16
GUID_AT = 496  # 16 bytes
PMUW_AT, PMUR_AT = 0, 16  # physical media units written / read, u128
VERSION_KEYS = ("log_page_version", "Log page version")
GUID_KEYS = ("log_page_guid", "Log page GUID")
PMUW_KEYS = ("physical_media_units_written", "Physical media units written")
PMUR_KEYS = ("physical_media_units_read", "Physical media units read")


@dataclass(frozen=True)
class OcpSmartLog:
    """The counters of log C0h the rig reads; None: not reported (or not in this version)."""

    log_version: int | None
    incomplete_shutdowns: int | None  # u32
    plp_start_count: int | None  # u128: times the drive ran on its hold-up energy
    capacitor_health: int | None  # percent; NO_CAPACITOR on a drive without PLP capacitors
    pcie_correctable_errors: int | None
    pcie_link_retraining: int | None  # version >= 2
    power_state_changes: int | None  # version >= 2
    bad_user_nand_blocks: int | None
    bad_system_nand_blocks: int | None
    uncorrectable_read_errors: int | None
    endurance_estimate: int | None  # u128
    media_dies_offline: int | None  # version >= 5
    command_timeouts: int | None  # version >= 5
    physical_media_units_written: int | None  # u128
    physical_media_units_read: int | None

    @property
    def declares_plp(self) -> bool:
        """The drive reports a capacitor health: it has power-loss protection capacitors."""
        return self.capacitor_health is not None and self.capacitor_health != NO_CAPACITOR


def _defined(version: int | None, since: int) -> bool:
    return since == 0 or (version is not None and version >= since)


def _pick(doc: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in doc:
            return doc[key]
    return None


def _hi_lo(value: Any) -> int | None:
    """A u128 printed as {"hi": u64, "lo": u64}."""
    if not isinstance(value, Mapping):
        return None
    hi, lo = as_uint(value.get("hi"), 64), as_uint(value.get("lo"), 64)
    return None if hi is None or lo is None else hi << 64 | lo


def _guid_of(text: Any) -> int | None:
    # printed "0x%PRIx64%PRIx64" (high then low half, the low half not zero-padded)
    return as_uint(text, 128) if isinstance(text, str) else None


@total_parser("nvme ocp smart-add-log")
def parse_ocp_smart_add_log(text: str) -> OcpSmartLog:
    """`nvme ocp smart-add-log -o json` (either key style); ToolOutputError for anything else."""
    doc = load_json_object(text, "nvme ocp smart-add-log")
    guid = _guid_of(_pick(doc, GUID_KEYS))
    if guid != OCP_C0_GUID:
        raise ToolOutputError("nvme ocp smart-add-log: no OCP C0h log GUID in the output")
    version = as_uint(_pick(doc, VERSION_KEYS), 16)
    values: dict[str, int | None] = {}
    for name, (_, width, since, key, label) in FIELDS.items():
        raw = _pick(doc, (key, label))
        values[name] = as_uint(raw, 8 * width) if _defined(version, since) else None
    return OcpSmartLog(
        log_version=version,
        physical_media_units_written=_hi_lo(_pick(doc, PMUW_KEYS)),
        physical_media_units_read=_hi_lo(_pick(doc, PMUR_KEYS)),
        **values,
    )


@total_parser("nvme get-log 0xc0")
def parse_ocp_c0_page(data: bytes) -> OcpSmartLog:
    """The raw 512-byte C0h page; ToolOutputError when it is not that page."""
    if not isinstance(data, bytes | bytearray) or len(data) != OCP_C0_LEN:
        size = len(data) if isinstance(data, bytes | bytearray) else type(data).__name__
        raise ToolOutputError(f"nvme get-log 0xc0: page of {size} bytes, not {OCP_C0_LEN}")
    if int.from_bytes(data[GUID_AT : GUID_AT + 16], "little") != OCP_C0_GUID:
        raise ToolOutputError("nvme get-log 0xc0: the page does not carry the OCP C0h GUID")
    version = int.from_bytes(data[LOG_VERSION_AT : LOG_VERSION_AT + 2], "little")

    def field(at: int, width: int) -> int:
        return int.from_bytes(data[at : at + width], "little")

    values = {
        name: field(at, width) if _defined(version, since) else None
        for name, (at, width, since, _, _) in FIELDS.items()
    }
    return OcpSmartLog(
        log_version=version,
        physical_media_units_written=field(PMUW_AT, 16),
        physical_media_units_read=field(PMUR_AT, 16),
        **values,
    )


def ocp_smart_log(dev: str, runner: Runner, timeout_s: float | None = None) -> OcpSmartLog | str:
    """The drive's C0h log, or the reason it has none (one line) when it does not offer it.

    nvme-cli exits non-zero when the drive has no C0h log (Invalid Log Page), a C0h page of
    another vendor (its "Unknown GUID"), or when this nvme-cli has no OCP plugin: all of them
    mean "no OCP log here", returned as text, never an error of the snapshot. Timeouts and a
    missing nvme raise as for every other health tool; output no parser accepts is
    ToolOutputError.
    """
    argv = ["nvme", "ocp", "smart-add-log", dev, "--output-format=json"]
    result = runner.run(argv, timeout_s)
    if result.exit_code != 0:
        said = first_line(result.stderr) or first_line(result.stdout)
        return f"no OCP C0h log (exit {result.exit_code}): {said or 'no message'}"
    return parse_ocp_smart_add_log(result.stdout)


def with_ocp(snapshot: HealthSnapshot, log: OcpSmartLog | str) -> HealthSnapshot:
    """The snapshot with the C0h counters (or the reason the drive has none) added."""
    if isinstance(log, str):
        return replace(snapshot, ocp_unavailable=log)
    return replace(
        snapshot,
        incomplete_shutdowns=log.incomplete_shutdowns,
        plp_start_count=log.plp_start_count,
        capacitor_health=log.capacitor_health,
        pcie_correctable_errors=log.pcie_correctable_errors,
        ocp_log_version=log.log_version,
    )
