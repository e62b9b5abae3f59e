"""The drive's own promise of readiness after power-on: NVMe CAP.TO and CRTO.

`nvme show-regs DEV -o json` (nvme-cli 2.3 `json_ctrl_registers`, nvme-print.c: `"cap"` as a
64-bit number, `"crto"` as a 32-bit one; later versions the same without -H) gives:
- CAP.TO (CAP bits 31:24): the worst-case time from CC.EN set to CSTS.RDY, in 500 ms units;
- CAP.CRMS (bits 60:59): CRWMS (59) says CRTO.CRWMT (CRTO bits 15:0, 500 ms units) is the
  ready-with-media timeout, and CAP.TO then only a legacy 8-bit cap of it; CRIMS (60) the same
  for CRTO.CRIMT (bits 31:16, ready independent of media), which a host must ask for.
The rig waits for the drive with its media (it reads data next), so the promise is CRWMT where
CRWMS is set, else CAP.TO (NVMe base spec 2.0, 3.1.4.1 and 3.1.4.20). A TO or CRWMT of 0 is
no promise (None).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rig.health.counters import as_uint, load_json_object
from rig.health.errors import ToolOutputError, total_parser
from rig.health.snapshot import HealthSnapshot
from rig.health.tools import Runner

UNIT_MS = 500
CRWMS = 1 << 59


@dataclass(frozen=True)
class ReadyPromise:
    timeout_ms: int
    source: str  # "crto.crwmt" or "cap.to"


@total_parser("nvme show-regs")
def parse_nvme_show_regs(text: str) -> ReadyPromise | None:
    """The drive's ready timeout from `nvme show-regs -o json`; None when it states none."""
    doc = load_json_object(text, "nvme show-regs")
    if "cap" not in doc:
        raise ToolOutputError("nvme show-regs: JSON has no cap register")
    cap = as_uint(doc.get("cap"), 64)
    if cap is None:
        return None
    crto = as_uint(doc.get("crto"), 32)
    if cap & CRWMS and crto is not None and crto & 0xFFFF:
        return ReadyPromise((crto & 0xFFFF) * UNIT_MS, "crto.crwmt")
    to = (cap >> 24) & 0xFF
    return ReadyPromise(to * UNIT_MS, "cap.to") if to else None


def nvme_ready_promise(
    dev: str, runner: Runner, timeout_s: float | None = None
) -> ReadyPromise | None:
    """The promise where nvme-cli can read the registers; None where it cannot (not a PCIe
    controller, no access to its BAR): the drive is then held to the lab's limit alone."""
    result = runner.run(["nvme", "show-regs", dev, "--output-format=json"], timeout_s)
    if result.exit_code != 0:
        return None
    return parse_nvme_show_regs(result.stdout)


def with_promise(snapshot: HealthSnapshot, promise: ReadyPromise | None) -> HealthSnapshot:
    if promise is None:
        return snapshot
    return replace(
        snapshot, ready_timeout_ms=promise.timeout_ms, ready_timeout_source=promise.source
    )
