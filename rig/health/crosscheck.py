"""Cross-check the identity udev reports with what the drive itself answers.

udev's properties come from the kernel's view at enumeration time (and, for the simulated drives,
from a udev rule); the drive's own answer comes from IDENTIFY / INQUIRY through the health tools.
A destructive tool writes only when both agree:
- NVMe (`nvme*`): `nvme id-ctrl -o json` (model, serial, firmware);
- SATA and SAS (`sd*`): `smartctl -i --json`; for SCSI also `sg_inq` and `sg_vpd --page=di` (NAA);
- anything else (loop, simulated): `smartctl -i --json` if it can answer for the device (the
  simulator's smartctl does); a real smartctl that cannot tell the device type gives no answer,
  and udev's identity stands alone (a loop device is then proven by its backing file:
  rig/bus/proof.py).
Each answer says which fields that tool always reports for such a drive (`Answer.reports`): a
field one side has and the other lacks is a disagreement (`missing`), never a match by default.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from rig.drive.identity import DriveIdentity, normalise_wwn
from rig.health.errors import HealthToolError
from rig.health.nvme import nvme_id_ctrl
from rig.health.scsi import sg_inq, sg_vpd_wwn
from rig.health.tools import Runner, smartctl_identity


class IdentityUnavailable(Exception):
    """A drive that must answer identify did not; the message says which tool and why."""


class Answer(NamedTuple):
    """What one tool says a device is, and the fields it always reports for such a device."""

    tool: str
    identity: DriveIdentity
    reports: tuple[str, ...]  # of "model", "serial", "wwn"


SERIAL_MODEL = ("serial", "model")
# IDENTIFY DEVICE words 108-111 (ATA8-ACS on), VPD page 0x83 NAA: what udev's ID_WWN comes from
WITH_WWN = ("serial", "model", "wwn")


def drive_answers(devnode: str, runner: Runner) -> list[Answer]:
    """The answer of every tool that answered for this device.

    Raises IdentityUnavailable when a SATA/SAS/NVMe drive does not answer its tool: the caller
    must not write to a drive it could not identify.
    """
    name = os.path.basename(os.path.realpath(devnode))
    try:
        if name.startswith("nvme"):
            ctrl = nvme_id_ctrl(devnode, runner)
            ident = DriveIdentity(ctrl.model or "", ctrl.serial or "", "", ctrl.firmware or "")
            return [Answer("nvme id-ctrl", ident, SERIAL_MODEL)]  # (no WWN in id-ctrl)
        if name.startswith("sd"):
            smart = smartctl_identity(devnode, runner)
            ata = WITH_WWN if smart.protocol == "ATA" else SERIAL_MODEL
            answers = [Answer("smartctl -i", smart.to_drive_identity(), ata)]
            if smart.protocol == "SCSI":
                inq = sg_inq(devnode, runner)
                wwn = sg_vpd_wwn(devnode, runner) or ""
                model = " ".join(p for p in (inq.vendor, inq.product) if p)
                ident = DriveIdentity(model, inq.serial or "", wwn, inq.revision or "")
                answers.append(Answer("sg_inq/sg_vpd", ident, WITH_WWN))
            return answers
    except HealthToolError as error:
        raise IdentityUnavailable(str(error)) from error
    try:
        smart = smartctl_identity(devnode, runner)
    except HealthToolError:
        return []  # no tool knows this kind of device: udev's identity stands alone
    fields = WITH_WWN if smart.protocol == "ATA" else SERIAL_MODEL
    return [Answer("smartctl -i", smart.to_drive_identity(), fields)]


def missing(udev: DriveIdentity, answer: Answer) -> str | None:
    """A field that one side reports and the other lacks, among those the tool always reports
    for such a drive (and udev takes from the same place): a disagreement, not a match. A
    drive that stops reporting its serial, or a node whose record names a serial the device
    does not give, is not proven to be the drive."""
    for name in answer.reports:
        ours, theirs = getattr(udev, name).strip(), getattr(answer.identity, name).strip()
        if bool(ours) != bool(theirs):
            side = f"{answer.tool} gives none" if ours else "udev has none"
            return f"{name} {ours or theirs!r} only on one side ({side})"
    return None


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


def disagreement(udev: DriveIdentity, answer: Answer) -> str | None:
    """How udev's identity and a tool's answer for the same device disagree, or None: a field
    on one side only (`missing`), or a field that differs (`mismatch`)."""
    return missing(udev, answer) or mismatch(udev, answer.identity)
