"""`rig drives`: the candidate drives with their identity and whether the rig may use them."""

from __future__ import annotations

from dataclasses import dataclass

from rig.bus.recover import BusLocation, hotplug_label, locate
from rig.drive.node import DriveNode
from rig.health import crosscheck
from rig.health.tools import Runner
from rig.station import locks, safety


def refusal_reasons(node: DriveNode, runner: Runner, lock_dir: str = locks.LOCK_DIR) -> list[str]:
    """Everything that would stop a campaign from using this drive (empty: safe)."""
    reasons = safety.refusal_reasons(node.devnode)
    holder = locks.claimed_by(node.identity, lock_dir)
    if holder:
        reasons.append(f"claimed by a campaign ({holder})")
    if not (node.identity.wwn or node.identity.serial):
        reasons.append("no WWN or serial to name it by")
    try:
        for answer in crosscheck.drive_answers(node.devnode, runner):
            differs = crosscheck.disagreement(node.identity, answer)
            if differs:
                reasons.append(f"udev and {answer.tool} disagree ({differs})")
    except crosscheck.IdentityUnavailable as error:
        reasons.append(f"does not answer identify ({error})")
    return reasons


@dataclass(frozen=True)
class DriveRow:
    """One candidate drive as `rig drives` shows it (the table and `--json`)."""

    node: DriveNode
    slot: BusLocation | None  # its PCI or SCSI slot; None: not on a PCI or SCSI bus
    refusals: list[str]  # empty: safe to use

    @property
    def hotplug(self) -> str:
        return hotplug_label(self.slot)


def rows(
    nodes: list[DriveNode], runner: Runner, lock_dir: str = locks.LOCK_DIR, sysfs: str = "/sys"
) -> list[DriveRow]:
    return [
        DriveRow(node, locate(node.devnode, sysfs), refusal_reasons(node, runner, lock_dir))
        for node in nodes
    ]


def table(
    nodes: list[DriveNode], runner: Runner, lock_dir: str = locks.LOCK_DIR, sysfs: str = "/sys"
) -> list[str]:
    lines = [
        f"{'node':<14} {'size':>10} {'transport':<9} {'model':<28} {'serial':<24} "
        f"{'firmware':<9} {'wwn':<22} {'hot-plug':<8} safe"
    ]
    for row in rows(nodes, runner, lock_dir, sysfs):
        node, ident = row.node, row.node.identity
        verdict = "yes" if not row.refusals else f"no: {'; '.join(row.refusals)}"
        lines.append(
            f"{node.devnode:<14} {node.size_bytes / 1e9:>8.1f}GB {node.transport[:9]:<9} "
            f"{ident.model[:28]:<28} {ident.serial[:24]:<24} {ident.firmware[:9]:<9} "
            f"{ident.wwn[:22]:<22} {row.hotplug:<8} {verdict}"
        )
    lines.append(
        "hot-plug: whether the drive's slot can hot-plug (no: after a cut it returns only"
        ' through bus recovery, [station] recover = "rescan"; -: not on a PCI or SCSI bus)'
    )
    return lines


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def stanza(node: DriveNode, channel: int = 0, sysfs: str = "/sys") -> str:
    """The [[drive]] block that names this drive by identity (WWN and serial + model)."""
    ident = node.identity
    where = locate(node.devnode, sysfs)
    slot = f"; hot-plug {hotplug_label(where)} ({where.why})" if where is not None else ""
    size = f"{node.size_bytes / 1e9:.1f} GB"
    lines = [
        f"# {node.devnode} now; {size}, {node.transport or 'unknown'}{slot}",
        "[[drive]]",
        f"channel = {channel}",
        f"model = {_toml(ident.model)}",
        f"serial = {_toml(ident.serial)}",
    ]
    if ident.wwn:
        lines.append(f"wwn = {_toml(ident.wwn)}")
    if ident.firmware:
        lines.append(f"firmware = {_toml(ident.firmware)}")
    return "\n".join(lines)
