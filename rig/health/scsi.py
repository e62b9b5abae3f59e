"""sg3_utils (1.46): standard INQUIRY, the Device Identification VPD page and TEST UNIT READY.

The text formats parsed here were produced by the real sg_inq/sg_vpd 1.46 decoding synthetic
pages through --inhex (fixtures/recorded/sg3/), so they are the tools' own output.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from rig.health.errors import ToolFailed, ToolOutputError, total_parser
from rig.health.tools import Runner, first_line

# sg3_utils(8) EXIT STATUS values that matter for a readiness probe.
SG_NOT_READY = 2
SG_MEDIUM_HARDWARE = 3
SG_UNIT_ATTENTION = 6
SG_ABORTED = 11
SG_OPEN_FAILED_OLD = 15  # before 1.45 every open failure was 15
SG_TIMEOUT = 33
SG_OS_ERROR_BASE = 50  # 1.45+: open and other OS failures exit with 50 + errno
_GONE_ERRNOS = (2, 6, 19)  # ENOENT, ENXIO, ENODEV: the node or the device behind it is gone


@dataclass(frozen=True)
class ScsiInquiry:
    vendor: str | None
    product: str | None
    revision: str | None
    serial: str | None  # "Unit serial number" (VPD 0x80), printed by sg_inq when available


@dataclass(frozen=True)
class Designator:
    association: str  # "Addressed logical unit", "Target port", "Target device that contains..."
    kind: str  # "NAA", "T10 vendor identification", "EUI-64 based", ...
    value: str  # hex for binary designators ("0x5000..."), text otherwise


def _field(text: str, label: str) -> str | None:
    match = re.search(rf"^\s*{re.escape(label)}:\s?(.*)$", text, re.MULTILINE)
    if match is None:
        return None
    return match.group(1).strip() or None


@total_parser("sg_inq")
def parse_sg_inq(text: str) -> ScsiInquiry:
    if "Vendor identification:" not in text and "Product identification:" not in text:
        raise ToolOutputError("sg_inq: output has no vendor/product identification")
    return ScsiInquiry(
        vendor=_field(text, "Vendor identification"),
        product=_field(text, "Product identification"),
        revision=_field(text, "Product revision level"),
        serial=_field(text, "Unit serial number"),
    )


_DESIGNATOR = re.compile(r"^\s*designator type: ([^,]+),\s+code set: (\S+)")


@total_parser("sg_vpd")
def parse_sg_vpd_di(text: str) -> list[Designator]:
    """Designators of `sg_vpd --page=di`, in printed order, with their association."""
    if "Device Identification VPD page" not in text:
        raise ToolOutputError("sg_vpd: output is not a Device Identification VPD page")
    found: list[Designator] = []
    association = ""
    kind: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if line.startswith("  ") and not line.startswith("   ") and stripped.endswith(":"):
            association = stripped[:-1]
            continue
        match = _DESIGNATOR.match(line)
        if match:
            kind = match.group(1).strip()
            continue
        if kind is None or stripped.startswith("transport:"):
            continue
        if stripped.startswith("0x"):
            value = stripped.split()[0].lower()
        elif ":" in stripped:
            value = stripped.split(":", 1)[1].strip()
        else:
            value = stripped
        found.append(Designator(association=association, kind=kind, value=value))
        kind = None  # first value line is the designator; ignore decoded extras
    return found


def naa_wwn(designators: list[Designator]) -> str | None:
    """The logical unit's NAA designator as "naa.<hex>" (what the kernel's wwid shows)."""
    for d in designators:
        if d.kind == "NAA" and d.association == "Addressed logical unit":
            return "naa." + d.value.removeprefix("0x")
    return None


def _checked(argv: list[str], runner: Runner, timeout_s: float | None) -> str:
    result = runner.run(argv, timeout_s)
    if result.exit_code != 0:
        raise ToolFailed(
            f"{argv[0]} failed (exit {result.exit_code}): {first_line(result.stderr)}",
            result.argv,
            result.exit_code,
            result.stderr,
        )
    return result.stdout


def sg_inq(dev: str, runner: Runner, timeout_s: float | None = None) -> ScsiInquiry:
    return parse_sg_inq(_checked(["sg_inq", dev], runner, timeout_s))


def sg_vpd_wwn(dev: str, runner: Runner, timeout_s: float | None = None) -> str | None:
    text = _checked(["sg_vpd", "--page=di", dev], runner, timeout_s)
    return naa_wwn(parse_sg_vpd_di(text))


class Readiness(enum.Enum):
    READY = "ready"
    NOT_READY = "not ready"  # becoming ready (spin-up, firmware boot): poll again
    UNIT_ATTENTION = "unit attention"  # expected once after a power cycle/reset: poll again
    NO_DEVICE = "no device"  # the node cannot be opened: gone, or not back yet
    TIMEOUT = "timeout"  # the command timed out in the kernel
    FAILED = "failed"  # medium/hardware error or anything else


@dataclass(frozen=True)
class TurResult:
    readiness: Readiness
    exit_code: int
    detail: str

    @property
    def ready(self) -> bool:
        return self.readiness is Readiness.READY


def classify_sg_exit(exit_code: int) -> Readiness:
    if exit_code == 0:
        return Readiness.READY
    if exit_code == SG_NOT_READY:
        return Readiness.NOT_READY
    if exit_code == SG_UNIT_ATTENTION:
        return Readiness.UNIT_ATTENTION
    if exit_code == SG_TIMEOUT:
        return Readiness.TIMEOUT
    if exit_code == SG_OPEN_FAILED_OLD or exit_code - SG_OS_ERROR_BASE in _GONE_ERRNOS:
        return Readiness.NO_DEVICE
    return Readiness.FAILED


def sg_turs(dev: str, runner: Runner, timeout_s: float | None = None) -> TurResult:
    """One TEST UNIT READY. Never raises for what the drive answered; the caller polls."""
    result = runner.run(["sg_turs", dev], timeout_s)
    detail = first_line(result.stderr) or first_line(result.stdout)
    return TurResult(classify_sg_exit(result.exit_code), result.exit_code, detail)
