"""The typed health snapshot every health source (smartctl, nvme-cli, the simulator) produces.

Absent or unknown fields are None. A field is filled only from an attribute whose meaning is
known for that drive (see docs/health.md for the mapping table); nothing is inferred.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rig.drive.identity import DriveIdentity


class SmartctlExit(enum.IntFlag):
    """smartctl exit status bits (smartctl(8), EXIT STATUS)."""

    CMDLINE_PARSE = 1  # bit 0: command line did not parse
    DEVICE_OPEN = 2  # bit 1: device open failed / no IDENTIFY / low-power mode
    COMMAND_FAILED = 4  # bit 2: some SMART/ATA command failed, or a checksum error
    DISK_FAILING = 8  # bit 3: SMART status "DISK FAILING"
    PREFAIL_AT_THRESHOLD = 16  # bit 4: prefail attributes <= threshold now
    PAST_THRESHOLD = 32  # bit 5: some attribute was <= threshold in the past
    ERROR_LOG = 64  # bit 6: device error log has records
    SELFTEST_LOG = 128  # bit 7: self-test log has errors

    @property
    def tool_failed(self) -> bool:
        """Bits 0-1: smartctl could not do its job; no health data was read."""
        return bool(self & (SmartctlExit.CMDLINE_PARSE | SmartctlExit.DEVICE_OPEN))

    @property
    def partial(self) -> bool:
        """Bit 2: output exists but at least one command or log read failed."""
        return bool(self & SmartctlExit.COMMAND_FAILED)

    @property
    def health_bits(self) -> SmartctlExit:
        """Bits 3-7: what the drive says about itself."""
        return self & SmartctlExit(0xF8)


# NVMe SMART / Health log byte 0 (NVMe base spec, Critical Warning).
NVME_CRITICAL_WARNING_BITS: dict[int, str] = {
    0: "available spare below threshold",
    1: "temperature outside threshold",
    2: "NVM subsystem reliability degraded",
    3: "media placed in read-only mode",
    4: "volatile memory backup device failed",
    5: "persistent memory region read-only",
}


def describe_critical_warning(bits: int) -> list[str]:
    return [
        NVME_CRITICAL_WARNING_BITS.get(i, f"reserved bit {i}") for i in range(8) if bits & (1 << i)
    ]


@dataclass(frozen=True)
class SmartIdentity:
    """What the drive says it is, as reported by the health tool."""

    model: str | None = None
    serial: str | None = None
    wwn: str | None = None  # "naa.<16 hex>" (ATA/SCSI NAA) or "eui.<16 hex>" (NVMe EUI-64)
    firmware: str | None = None
    capacity_bytes: int | None = None
    logical_block_size: int | None = None
    physical_block_size: int | None = None
    protocol: str | None = None  # "ATA", "NVMe", "SCSI" (smartctl device.protocol)
    transport: str | None = None  # smartctl device.type ("sat", "nvme", "scsi") or SCSI transport
    rotation_rate: int | None = None  # rpm; 0 = solid state (ATA/SCSI report it)
    is_ssd: bool | None = None

    def to_drive_identity(self) -> DriveIdentity:
        """The identity a campaign names a drive by (empty strings where unknown)."""
        return DriveIdentity(
            model=self.model or "",
            serial=self.serial or "",
            wwn=self.wwn or "",
            firmware=self.firmware or "",
        )


@dataclass(frozen=True)
class HealthSnapshot:
    """One reading of a drive's health counters. Counters are lifetime totals."""

    identity: SmartIdentity
    source: str  # "smartctl" or "nvme-cli"
    smart_passed: bool | None = None
    power_cycles: int | None = None
    power_on_hours: int | None = None
    unsafe_shutdowns: int | None = None
    unsafe_shutdowns_source: str | None = None  # e.g. "ata:174:Unexpect_Power_Loss_Ct"
    media_errors: int | None = None  # NVMe media_errors; SCSI total uncorrected errors
    media_errors_source: str | None = (
        None  # SCSI: the error-counter pages summed ("scsi:read+write")
    )
    reallocated_sectors: int | None = None  # ATA 5; SCSI grown defect list length
    reported_uncorrectable: int | None = None  # ATA 187
    offline_uncorrectable: int | None = None  # ATA 198
    pending_sectors: int | None = None  # ATA 197
    crc_errors: int | None = None  # ATA 199 (interface CRC, not media)
    critical_warning: int | None = None  # NVMe bit field
    percentage_used: int | None = None  # 0..255 (NVMe may exceed 100)
    percentage_used_source: str | None = None
    data_units_written: int | None = None  # NVMe, units of 512,000 bytes
    host_bytes_written: int | None = None
    host_bytes_written_source: str | None = None
    temperature_c: int | None = None
    available_spare: int | None = None  # NVMe percent
    available_spare_threshold: int | None = None
    error_log_entries: int | None = None  # NVMe num_err_log_entries
    smartctl_exit: SmartctlExit | None = None  # as recorded in the JSON, when smartctl made it
    # OCP SMART / Health Information Extended log (C0h, rig/health/ocp.py), where offered
    incomplete_shutdowns: int | None = None
    plp_start_count: int | None = None  # u128
    capacitor_health: int | None = None  # percent; 0xFFFF: no PLP capacitors
    pcie_correctable_errors: int | None = None
    ocp_log_version: int | None = None
    ocp_unavailable: str | None = None  # the drive's answer that it has no C0h log
    # the drive's own promise of readiness after power-on (rig/health/regs.py), milliseconds
    ready_timeout_ms: int | None = None
    ready_timeout_source: str | None = None  # "crto.crwmt" or "cap.to"
    # the drive promises that discarded blocks read zeroes (NVMe DLFEAT bits 2:0 = 001b, ATA
    # "deterministic read zeroes after TRIM", SCSI LBPRZ = 1); None: it does not say
    zeroes_after_discard: bool | None = None
    raw: str = field(default="", repr=False, compare=False)  # original tool output, for the store
