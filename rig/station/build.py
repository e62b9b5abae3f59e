"""Wiring of a station: a power backend, udev presence, interlocked O_DIRECT targets."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager

from rig.bus import proof
from rig.bus.ready import wait_ready
from rig.bus.recover import RecoveringPresence
from rig.bus.udev import UdevPresence
from rig.config.campaign import Campaign, DriveSpec
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.errors import UnsafeDeviceError
from rig.health import crosscheck
from rig.health.errors import HealthToolError, ToolFailed
from rig.health.maintenance import ToolMaintenance
from rig.health.nvme import nvme_snapshot, nvme_zeroes_after_discard
from rig.health.ocp import ocp_smart_log, with_ocp
from rig.health.regs import nvme_ready_promise, with_promise
from rig.health.snapshot import HealthSnapshot
from rig.health.tools import Runner, ToolRunner, smartctl_snapshot
from rig.health.wcache import CacheTool, read_write_cache, set_write_cache
from rig.io.blockio import BlockTarget, DirectTarget
from rig.power.base import Edge, PowerSwitch
from rig.station import backends, locks, purge, safety
from rig.station.backends import StationKind
from rig.station.model import Station, Wiring


class ToolDrives:
    """What a real station does with a drive beyond block I/O, through the real tools.

    Every method takes the node found by identity (never a /dev name from the user) and runs
    the tools with `runner` (the real ToolRunner; tests give it fake tools on PATH).
    """

    def __init__(self, runner: Runner | None = None, lock_dir: str = locks.LOCK_DIR) -> None:
        self.runner: Runner = runner or ToolRunner()
        self.lock_dir = lock_dir

    def open_target(self, node: DriveNode, spec: DriveSpec) -> BlockTarget:
        """Identity (udev, then the drive's own answer), interlocks, then O_DIRECT + O_EXCL, and
        the open descriptor proven to be the attachment identified (rig/bus/proof.py)."""
        if not spec.identity.matches(node.identity):
            raise UnsafeDeviceError(
                f"refusing {node.devnode}: it is {node.identity.label()}, and the campaign"
                f" names {spec.identity.label()}"
            )
        try:
            answers = crosscheck.drive_answers(node.devnode, self.runner)
        except crosscheck.IdentityUnavailable as error:
            raise UnsafeDeviceError(
                f"refusing {node.devnode} ({spec.identity.label()}): it does not answer"
                f" identify: {error}"
            ) from error
        for answer in answers:
            differs = crosscheck.disagreement(node.identity, answer)
            if differs:
                raise UnsafeDeviceError(
                    f"refusing {node.devnode}: udev and {answer.tool} disagree on its identity"
                    f" ({differs})"
                )
            if not spec.identity.matches(_merged(node.identity, answer.identity)):
                raise UnsafeDeviceError(
                    f"refusing {node.devnode}: {answer.tool} says it is"
                    f" {answer.identity.label()}, and the campaign names {spec.identity.label()}"
                )
        safety.check(node.devnode, spec.identity.label(), spec.allow_wipe)
        target = DirectTarget(node.devnode, node.logical_block)
        try:
            _check_attachment(target.fileno(), node)
        except BaseException:
            target.close()
            raise
        return target

    def health(self, node: DriveNode) -> HealthSnapshot:
        """smartctl -x (ATA, SCSI, NVMe); for NVMe, nvme-cli when smartctl cannot answer, and
        the OCP C0h log where the drive offers it (rig/health/ocp.py), and nvme-cli's id-ns for
        what smartctl does not print (DLFEAT: zeroes after a discard)."""
        nvme = _kind(node).startswith("nvme")
        try:
            snapshot = smartctl_snapshot(node.devnode, self.runner).snapshot
        except HealthToolError:
            if not nvme:
                raise
            snapshot = nvme_snapshot(node.devnode, self.runner)
        # an NVMe drive on a node not named nvme (behind a USB bridge, or the full twin's NVMe
        # flavour on a loop device) is asked for DLFEAT too: no answer leaves no promise
        speaks_nvme = nvme or snapshot.identity.protocol == "NVMe"
        if speaks_nvme and snapshot.zeroes_after_discard is None:
            zeroes = nvme_zeroes_after_discard(node.devnode, self.runner)
            snapshot = dataclasses.replace(snapshot, zeroes_after_discard=zeroes)
        if not nvme:
            return snapshot
        snapshot = with_ocp(snapshot, ocp_smart_log(node.devnode, self.runner))
        return with_promise(snapshot, nvme_ready_promise(node.devnode, self.runner))

    def purge(self, node: DriveNode, wanted: str) -> str:
        """Purge the drive as it says it can (rig/station/purge.py); returns the method run.
        "discard" is left to the caller, which discards the test region through its open target."""
        caps = purge.probe(
            node.devnode,
            _purge_kind(node),
            self.runner,
            purge.sysfs_discard_max_bytes(node.devnode),
        )
        method = purge.choose(wanted, caps)
        if method != "discard":
            purge.run(method, node.devnode, self.runner)
        return method

    def ready(self, node: DriveNode, timeout_s: float) -> int:
        return wait_ready(node, self.runner, timeout_s)

    def write_cache(self, node: DriveNode, wanted: bool | None) -> bool | None:
        """Set the volatile write cache (unless `wanted` is None), then read what the drive says.

        None: this kind of device has no write-cache control (loop, simulated)."""
        tool = _cache_tool(node)
        if tool is None:
            if wanted is not None:
                raise ToolFailed(
                    f"{node.devnode}: no write-cache control for this device", (), 1, ""
                )
            return None
        if wanted is None:
            return read_write_cache(tool, node.devnode, self.runner).enabled
        return set_write_cache(tool, node.devnode, wanted, self.runner).enabled

    def claim(self, node: DriveNode, campaign: str) -> AbstractContextManager[object]:
        return locks.claim(node.identity, campaign, self.lock_dir)


def _check_attachment(fd: int, node: DriveNode) -> None:
    """The descriptor just opened belongs to the attachment that was identified: same disk
    sequence number (a node reused since has another), same backing file for a loop device."""
    seq = proof.fd_diskseq(fd)
    if node.diskseq and seq != node.diskseq:
        raise UnsafeDeviceError(
            f"refusing {node.devnode}: it changed after it was identified"
            f" (disk sequence {seq}, identified as {node.diskseq})"
        )
    if node.backing and proof.fd_backing(fd) != node.backing:
        raise UnsafeDeviceError(
            f"refusing {node.devnode}: its backing file changed after it was identified"
        )


def _kind(node: DriveNode) -> str:
    return os.path.basename(os.path.realpath(node.devnode))


def _purge_kind(node: DriveNode) -> str:
    tool = _cache_tool(node)
    return {"nvme": "nvme", "hdparm": "ata", "sdparm": "scsi"}.get(tool or "", "other")


def _cache_tool(node: DriveNode) -> CacheTool | None:
    name = _kind(node)
    if name.startswith("nvme"):
        return "nvme"
    if name.startswith("sd"):
        # libata disks take ATA SET FEATURES (hdparm); SAS takes the caching mode page (sdparm)
        return "hdparm" if os.path.exists(f"/sys/class/block/{name}/device/vpd_pg89") else "sdparm"
    return None


def _merged(udev: DriveIdentity, tool: DriveIdentity) -> DriveIdentity:
    """The drive as both sources describe it (the tool fills what udev lacks)."""
    return DriveIdentity(
        udev.model or tool.model,
        udev.serial or tool.serial,
        udev.wwn or tool.wwn,
        udev.firmware or tool.firmware,
    )


def build(
    campaign: Campaign,
    on_edge: Callable[[Edge], None] | None = None,
    store_path: str = "",
    kinds: Mapping[str, StationKind] = backends.STATION_KINDS,
) -> Station:
    """The station of the campaign's kind, built by its row in `kinds` (rig/station/backends.py): a
    power backend on the real bus gets udev presence (with the bus recovery the campaign asks for)
    and the real tools. `on_edge` receives every switching edge the power backend reports (for the
    store); `store_path` is the campaign's store."""
    kind = backends.lookup(campaign.station.kind, kinds)
    if kind.station is not None:
        return kind.station(campaign, Wiring(on_edge, store_path))
    assert kind.power is not None
    spec = campaign.station
    recovery = RecoveringPresence(UdevPresence(), spec.recover, dict(spec.recover_wait_s))
    return udev_station(spec.label(), kind.power(campaign, on_edge), ToolDrives(), recovery)


def udev_station(
    name: str, power: PowerSwitch, drives: ToolDrives, presence: RecoveringPresence | None = None
) -> Station:
    """Drives found through udev and served by the real tools, on any power switch; departures
    of stale nodes and bus recovery as `presence` says (rig/bus/recover.py; none by default)."""
    return Station(
        name,
        power,
        presence or RecoveringPresence(UdevPresence()),
        drives.open_target,
        health=drives.health,
        ready=drives.ready,
        write_cache=drives.write_cache,
        claim=drives.claim,
        purge=drives.purge,
        maintenance=ToolMaintenance(drives.runner),
    )
