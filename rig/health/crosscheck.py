"""Cross-check the identity udev reports with what the drive itself answers.

udev's properties come from the kernel's view at enumeration time (and, for the simulated drives,
from a udev rule); the drive's own answer comes from IDENTIFY / INQUIRY through the health tools.
A destructive tool writes only when both agree:
- NVMe (`nvme*`): `nvme id-ctrl -o json` (model, serial, firmware);
- SATA and SAS (`sd*`): `smartctl -i --json`; for SCSI also `sg_inq` and `sg_vpd --page=di` (NAA);
- anything else (loop, simulated): `smartctl -i --json` if it can answer for the device (the
  simulator's smartctl does); a real smartctl that cannot tell the device type gives no answer,
  and udev's identity stands alone.
"""

from __future__ import annotations

import os
import re

from rig.health.errors import HealthToolError
from rig.health.nvme import nvme_id_ctrl
from rig.health.scsi import sg_inq, sg_vpd_wwn
from rig.health.tools import Runner, smartctl_identity
from rig.identity import DriveIdentity, normalise_wwn


class IdentityUnavailable(Exception):
    """A drive that must answer identify did not; the message says which tool and why."""


def drive_answers(devnode: str, runner: Runner) -> list[tuple[str, DriveIdentity]]:
    """(tool, identity) for every tool that answered for this device.

    Raises IdentityUnavailable when a SATA/SAS/NVMe drive does not answer its tool: the caller
    must not write to a drive it could not identify.
    """
    name = os.path.basename(os.path.realpath(devnode))
    try:
        if name.startswith("nvme"):
            ctrl = nvme_id_ctrl(devnode, runner)
            ident = DriveIdentity(ctrl.model or "", ctrl.serial or "", "", ctrl.firmware or "")
            return [("nvme id-ctrl", ident)]
        if name.startswith("sd"):
            smart = smartctl_identity(devnode, runner)
            answers = [("smartctl -i", smart.to_drive_identity())]
            if smart.protocol == "SCSI":
                inq = sg_inq(devnode, runner)
                wwn = sg_vpd_wwn(devnode, runner) or ""
                model = " ".join(p for p in (inq.vendor, inq.product) if p)
                answers.append(
                    (
                        "sg_inq/sg_vpd",
                        DriveIdentity(model, inq.serial or "", wwn, inq.revision or ""),
                    )
                )
            return answers
    except HealthToolError as error:
        raise IdentityUnavailable(str(error)) from error
    try:
        return [("smartctl -i", smartctl_identity(devnode, runner).to_drive_identity())]
    except HealthToolError:
        return []  # no tool knows this kind of device: udev's identity stands alone


def _words(text: str) -> str:
    return " ".join(re.split(r"[\s_]+", text.strip())).lower()


def _hex(wwn: str) -> str:
    text = normalise_wwn(wwn)
    return text if text and all(c in "0123456789abcdef" for c in text) else ""


def mismatch(udev: DriveIdentity, tool: DriveIdentity) -> str | None:
    """The first field on which two identities of one device disagree, or None.

    Only fields both sides report are compared. Models are compared by words (udev escapes
    spaces as "_"; for SCSI udev has the product and the tools vendor + product, so one may
    contain the other). WWNs are compared on their common hex prefix (udev's ID_WWN lacks the
    NAA 6 extension that ID_WWN_WITH_EXTENSION and VPD 0x83 carry).
    """
    if udev.serial and tool.serial and udev.serial.strip() != tool.serial.strip():
        return f"serial {udev.serial!r} vs {tool.serial!r}"
    a, b = _words(udev.model), _words(tool.model)
    if a and b and a not in b and b not in a:
        return f"model {udev.model!r} vs {tool.model!r}"
    x, y = _hex(udev.wwn), _hex(tool.wwn)
    common = min(len(x), len(y))
    if common and x[:common] != y[:common]:
        return f"wwn {udev.wwn!r} vs {tool.wwn!r}"
    if udev.firmware and tool.firmware and udev.firmware.strip() != tool.firmware.strip():
        return f"firmware {udev.firmware!r} vs {tool.firmware!r}"
    return None
