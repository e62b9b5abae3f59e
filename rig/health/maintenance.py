"""Maintenance operations a campaign cuts power during (`[cut.maintenance]`, docs/campaign.md
"Cuts during maintenance"): a format, a sanitize (block erase, crypto erase, overwrite) or a
firmware download and commit, behind one small interface (`Maintenance`): what the drive says
it supports, start an operation, read its status back after the drive returns, the firmware
revision it identifies with. `ToolMaintenance` calls the tools (nvme-cli, sg3_utils; hdparm for
ATA's security erase); the in-process twin's lives in fixtures/virtual_maintenance.py.

What the standard promises, and the rig checks after the cut (rig/campaign/cutcycle/
maintenance.py): a sanitize resumes after a power cycle and reports its state in the Sanitize
Status log (NVMe log page 81h: SSTAT, SPROG); a completed sanitize or format leaves nothing of
the data before it readable; a firmware activation interrupted by power loss leaves the drive
on a valid image (the old revision or the new).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Protocol

from rig.config.tables import Table
from rig.drive.node import DriveNode
from rig.errors import UserError
from rig.health.errors import HealthToolError
from rig.health.tools import Runner, run_checked

FORMAT = "format"
SANITIZE_BLOCK = "sanitize_block"
SANITIZE_CRYPTO = "sanitize_crypto"
SANITIZE_OVERWRITE = "sanitize_overwrite"
FIRMWARE = "firmware"
OPERATIONS = (SANITIZE_BLOCK, SANITIZE_CRYPTO, SANITIZE_OVERWRITE, FORMAT, FIRMWARE)
ERASES = frozenset({FORMAT, SANITIZE_BLOCK, SANITIZE_CRYPTO, SANITIZE_OVERWRITE})

# an operation's state after the drive returns (NVMe SSTAT 0..3, and what a format or a firmware
# commit leaves: the rig reads the data or the revision)
IDLE = "idle"  # never ran, or no record of it (SSTAT 0)
COMPLETED = "completed"  # SSTAT 1 (and 4: completed without deallocation)
IN_PROGRESS = "in_progress"  # SSTAT 2: resumed after the power cycle
FAILED = "failed"  # SSTAT 3: reported failed (allowed: then the data is not judged)
_SSTAT = {0: IDLE, 1: COMPLETED, 2: IN_PROGRESS, 3: FAILED, 4: COMPLETED}
TOOL_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class OpStatus:
    state: str  # IDLE | COMPLETED | IN_PROGRESS | FAILED
    progress: float = 0.0  # 0..1 (SPROG / 65536)


@dataclass(frozen=True)
class MaintenanceSpec:
    operation: str  # OPERATIONS
    after_ms: tuple[float, float]  # the cut falls this long after the operation was issued
    firmware_file: str = ""  # FIRMWARE: the image downloaded and committed
    firmware_revision: str = ""  # FIRMWARE: the revision the new image identifies with
    firmware_slot: int = 1
    complete_timeout_s: float = 600.0  # a resumed operation must end within this


class Maintenance(Protocol):
    def supported(self, node: DriveNode) -> frozenset[str]:
        """The operations the drive's identify data says it can do."""
        ...

    def namespaces(self, node: DriveNode) -> int:
        """How many namespaces share what an operation erases (1 for SATA/SAS)."""
        ...

    def start(self, node: DriveNode, spec: MaintenanceSpec) -> None:
        """Issue the operation (it may run on in the drive after this returns)."""
        ...

    def status(self, node: DriveNode, operation: str) -> OpStatus: ...

    def revision(self, node: DriveNode) -> str:
        """The firmware revision the drive identifies with now."""
        ...


def settings(cut_t: Table) -> MaintenanceSpec | None:
    """[cut.maintenance], if given."""
    if "maintenance" not in cut_t.data:
        return None
    table = cut_t.table("maintenance")
    operation = table.get("operation", str)
    if operation not in OPERATIONS:
        raise UserError(
            f"campaign: [cut.maintenance].operation must be one of {', '.join(OPERATIONS)}"
        )
    spec = MaintenanceSpec(
        operation,
        table.range_ms("after_ms", [1.0, 100.0]),
        table.get("firmware_file", str, ""),
        table.get("firmware_revision", str, ""),
        table.whole("firmware_slot", 1, 1, 7),
        float(table.number("complete_timeout_s", 600.0, 0.01, 86_400)),
    )
    table.done()
    if operation == FIRMWARE and not (spec.firmware_file and spec.firmware_revision):
        raise UserError(
            'campaign: [cut.maintenance] operation = "firmware" needs firmware_file and'
            " firmware_revision (the revision the image identifies with)"
        )
    if operation != FIRMWARE and (spec.firmware_file or spec.firmware_revision):
        raise UserError(
            "campaign: [cut.maintenance].firmware_* keys are for the firmware operation"
        )
    return spec


def refusal(
    spec: MaintenanceSpec, maintenance: Maintenance | None, node: DriveNode, region: tuple[int, int]
) -> str:
    """Why the drive at `node` cannot take the campaign's operation ('' if it can): the station
    cannot run it, the drive does not support it, or it would erase beyond the test region
    (a format or sanitize erases the whole namespace; a sanitize every namespace)."""
    label = node.identity.label()
    if maintenance is None:
        return f"this station cannot run maintenance operations ({spec.operation})"
    try:
        supported = maintenance.supported(node)
        shared = maintenance.namespaces(node) if spec.operation in _SANACT else 1
    except HealthToolError as error:
        return f"drive {label}: cannot read which maintenance operations it supports: {error}"
    if spec.operation not in supported:
        return f"drive {label} does not support {spec.operation} (its identify data)"
    if spec.operation in ERASES:
        whole = node.size_bytes // node.logical_block
        if region != (0, whole):
            return (
                f"drive {label}: {spec.operation} erases its whole namespace, beyond the test"
                f" region (blocks {region[0]}..+{region[1]} of {whole}): give the whole drive"
            )
        if shared > 1:
            return (
                f"drive {label}: a sanitize erases all its namespaces, not only the test region's"
            )
    return ""


# the tools -----------------------------------------------------------------------------------
def sanitize_status(text: str) -> OpStatus:
    """`nvme sanitize-log --output-format=json`: SSTAT's low 3 bits, SPROG (of 65536)."""
    doc = json.loads(text)
    entry = next(iter(doc.values())) if doc and isinstance(next(iter(doc.values())), dict) else doc
    sstat = int(entry.get("sstat", 0)) & 0x7
    return OpStatus(_SSTAT.get(sstat, FAILED), int(entry.get("sprog", 0)) / 65536)


def nvme_capabilities(text: str) -> frozenset[str]:
    """From `nvme id-ctrl --output-format=json`: SANICAP bits 0-2 (crypto, block, overwrite),
    OACS bit 1 (Format NVM), bit 2 (Firmware Download and Commit), FRMW's slots."""
    doc = json.loads(text)
    sanicap, oacs = int(doc.get("sanicap", 0)), int(doc.get("oacs", 0))
    found = {op for bit, op in enumerate(_SANICAP) if sanicap >> bit & 1}
    if oacs & 0x2:
        found.add(FORMAT)
    if oacs & 0x4 and (int(doc.get("frmw", 0)) >> 1) & 0x7:
        found.add(FIRMWARE)
    return frozenset(found)


_SANICAP = (SANITIZE_CRYPTO, SANITIZE_BLOCK, SANITIZE_OVERWRITE)  # SANICAP bits 0, 1, 2
_SANACT = {SANITIZE_BLOCK: "2", SANITIZE_OVERWRITE: "3", SANITIZE_CRYPTO: "4"}
_SG_SANITIZE = {
    SANITIZE_BLOCK: "--block",
    SANITIZE_OVERWRITE: "--overwrite",
    SANITIZE_CRYPTO: "--crypto",
}


@dataclass
class ToolMaintenance:
    """Maintenance through nvme-cli (an nvme* node) or sg3_utils (sd*: SAS; SATA behind
    libata's SAT translates SANITIZE and FORMAT UNIT)."""

    runner: Runner

    def _run(self, argv: list[str], timeout_s: float = TOOL_TIMEOUT_S) -> str:
        return run_checked(argv, self.runner, timeout_s).stdout

    def _nvme(self, node: DriveNode) -> bool:
        return os.path.basename(os.path.realpath(node.devnode)).startswith("nvme")

    def supported(self, node: DriveNode) -> frozenset[str]:
        if self._nvme(node):
            return nvme_capabilities(self._run(["nvme", "id-ctrl", node.devnode, "-o", "json"]))
        # SCSI: what the device server lists as supported opcodes (SANITIZE 48h, FORMAT 04h)
        text = self._run(["sg_opcodes", "--compact", node.devnode])
        found = {FORMAT} if " 04 " in f" {text} " or "Format unit" in text else set()
        if "Sanitize" in text:
            found |= set(_SG_SANITIZE)
        return frozenset(found)

    def namespaces(self, node: DriveNode) -> int:
        if not self._nvme(node):
            return 1
        # the active namespaces (id-ctrl's NN is only the largest NSID the controller takes)
        doc = json.loads(self._run(["nvme", "list-ns", node.devnode, "-o", "json"]))
        return max(1, len(doc.get("nsid_list", [])))

    def start(self, node: DriveNode, spec: MaintenanceSpec) -> None:
        dev, op = node.devnode, spec.operation
        if self._nvme(node):
            if op in _SANACT:
                self._run(["nvme", "sanitize", dev, f"--sanact={_SANACT[op]}"])
            elif op == FORMAT:
                argv = ["nvme", "format", dev, "--ses=1", "--force"]  # user data erase
                self._run(argv, spec.complete_timeout_s)
            else:
                self._run(["nvme", "fw-download", dev, "-f", spec.firmware_file])
                slot = str(spec.firmware_slot)
                # commit action 3: activate now, without a reset (where FRMW allows it)
                self._run(["nvme", "fw-commit", dev, f"--slot={slot}", "--action=3"])
            return
        if op in _SG_SANITIZE:
            self._run(["sg_sanitize", "--quick", "--early", _SG_SANITIZE[op], dev])
        elif op == FORMAT:
            self._run(["sg_format", "--format", "--early", dev])
        else:
            self._run(["sg_write_buffer", "--mode=dmc_offs_defer", "--in", spec.firmware_file, dev])

    def status(self, node: DriveNode, operation: str) -> OpStatus:
        if self._nvme(node) and operation in _SANACT:
            return sanitize_status(self._run(["nvme", "sanitize-log", node.devnode, "-o", "json"]))
        # a format, a SCSI sanitize or a firmware commit: the drive's answer once back is all
        # there is (REQUEST SENSE progress while it runs); the rig judges the data or revision
        if not self._nvme(node):
            text = self._run(["sg_requests", "--progress", node.devnode])
            if "progress" in text.lower() and "%" in text:
                return OpStatus(IN_PROGRESS)
        return OpStatus(COMPLETED)

    def revision(self, node: DriveNode) -> str:
        if self._nvme(node):
            doc = json.loads(self._run(["nvme", "id-ctrl", node.devnode, "-o", "json"]))
            return str(doc.get("fr", "")).strip()
        text = self._run(["sg_inq", node.devnode])
        for line in text.splitlines():
            if "Product revision level" in line:
                return line.split(":", 1)[1].strip()
        return ""
