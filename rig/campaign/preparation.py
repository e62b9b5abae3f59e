"""Before a drive's first cycle: its test region and store row, its write-cache setting and
its health baseline (docs/campaign.md, docs/health.md)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from rig.campaign import recording
from rig.campaign.model import ResumePoint
from rig.check.baseline import foreign_blocks
from rig.config.campaign import Campaign, DriveSpec
from rig.drive.node import DriveNode
from rig.errors import RigError, UserError
from rig.health import maintenance
from rig.health.errors import HealthToolError, ToolMissing
from rig.health.tracker import HealthTracker
from rig.io.blockio import BlockTarget
from rig.io.ledger import UNKNOWN, LbaState
from rig.station.model import Station

if TYPE_CHECKING:
    from rig.campaign.model import CycleDrive

WRITE_CACHE = {"keep": None, "on": True, "off": False}  # [health] write_cache: what to set


class Attachment:
    """A drive found, claimed and opened through the interlocks, its region checked: all that
    can refuse it, done before the campaign writes any file. Released here unless a drive's
    run takes it over (`take`)."""

    def __init__(self, campaign: Campaign, spec: DriveSpec, station: Station) -> None:
        node = station.presence.find(spec.identity)
        if node is None:
            raise UserError(f"drive {spec.identity.label()} not found on the bus")
        self.node = node
        self.claims = ExitStack()  # the drive's claim
        try:
            if station.claim is not None:
                self.claims.enter_context(station.claim(node, campaign.name))
            self.target = station.open_target(node, spec)
            try:
                self.region = region_bounds(campaign, spec, self.target)
                wanted = campaign.cut.maintenance
                why = wanted and maintenance.refusal(wanted, station.maintenance, node, self.region)
                if why:
                    raise UserError(why)
            except BaseException:
                self.target.close()
                raise
        except BaseException:
            self.claims.close()
            raise
        self.taken = False

    def take(self) -> Attachment:
        """Hand the open target and the claim over to the caller, who closes them."""
        self.taken = True
        return self

    def release(self) -> None:
        if not self.taken:
            self.taken = True
            self.target.close()
            self.claims.close()


def check_station(campaign: Campaign, station: Station) -> None:
    """What the campaign asks of the station's drives that the station cannot do."""
    wanted = WRITE_CACHE[campaign.health.write_cache]
    if wanted is not None and station.write_cache is None:
        raise UserError(f"station '{station.name}' cannot set a drive's write cache")
    if campaign.health.required and station.health is None:
        raise UserError(f"station '{station.name}' cannot read drive health ([health])")


def region_bounds(campaign: Campaign, spec: DriveSpec, target: BlockTarget) -> tuple[int, int]:
    """The drive's test region in its blocks (first, count), checked against the drive."""
    block = target.block_size
    for what, size in (
        ("offset", campaign.region_offset_bytes),
        ("size", campaign.region_bytes),
    ):
        if size % block:
            raise UserError(
                f"drive {spec.identity.label()}: test region {what} {size} B is not a"
                f" multiple of its {block}-byte logical block"
            )
    first = campaign.region_offset_bytes // block
    available = target.nblocks - first
    if available <= 0:
        raise UserError(f"drive {spec.identity.label()}: test region lies beyond its end")
    count = campaign.region_bytes // block
    if count > available:
        if campaign.region_given:  # never test less than the campaign (and its report) says
            raise UserError(
                f"drive {spec.identity.label()}: test region of {_size(count * block)} does"
                f" not fit: the drive holds {_size(target.nblocks * block)}"
                + (f", {_size(available * block)} from the offset" if first else "")
            )
        count = available  # the default region, shortened: the drive row records it
    return first, count


def region(
    drive: CycleDrive, node: DriveNode, resume: ResumePoint | None, bounds: tuple[int, int]
) -> tuple[LbaState, int]:
    """The drive's expected state and store row for its region `bounds`: a resume's, or a new
    drive row."""
    first, count = bounds
    if resume is not None:
        if (resume.state.first_lba, resume.state.nblocks) != (first, count):
            raise UserError(f"drive {drive.spec.identity.label()}: test region differs from store")
        return resume.state, resume.drive_id
    ident = asdict(node.identity)
    return LbaState(first, count), recording.add_drive(drive, ident, node.size_bytes, first, count)


def baseline(drive: CycleDrive, target: BlockTarget, state: LbaState) -> None:
    """A fresh region read once before the first cycle ([cut] baseline): blocks holding bytes
    that are no record start as unknown, so a used drive's old contents are not reported as
    damage where a check reads a block the campaign never wrote, or a lost write of it shows
    them again (rig/check/baseline.py)."""
    if not drive.campaign.cut.baseline or drive.campaign.endurance:
        return
    started = time.monotonic()
    foreign = foreign_blocks(target.read, state.first_lba, state.nblocks, target.block_size)
    if len(foreign):
        state.committed[foreign] = np.full(len(foreign), UNKNOWN, dtype=np.uint32)
    detail: dict[str, Any] = {"blocks_read": state.nblocks, "foreign_blocks": len(foreign)}
    if len(foreign):
        detail["first_foreign_lba"] = int(foreign[0]) + state.first_lba
    detail["seconds"] = round(time.monotonic() - started, 3)
    recording.event(drive, "region_baseline", detail)
    if len(foreign):
        drive.progress(
            f"ch{drive.spec.channel}: {len(foreign)} blocks of the test region hold old data"
            " (no record): unknown until the campaign writes them"
        )


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB ({n} B)"


def start_health(drive: CycleDrive, node: DriveNode, after_seq: int = 0) -> HealthTracker | None:
    """Write-cache setting and the baseline snapshot, before the first cut."""
    options, station = drive.campaign.health, drive.station
    check_station(drive.campaign, station)
    if station.write_cache is not None:
        try:
            detail = write_cache(drive, node)
        except RigError as error:
            raise UserError(f"drive {drive.spec.identity.label()}: {error}") from error
        recording.event(drive, "write_cache", detail)
    if station.health is None or options.every == 0:
        return None
    tracker = HealthTracker(station.health, options.every)
    try:
        snapshot = tracker.baseline(node)
    except HealthToolError as error:
        _health_unavailable(drive, error)
        return None
    if not recording.has_snapshot(drive, after_seq):
        # a resume keeps the reading taken after that cycle before the stop
        recording.snapshot(drive, after_seq, snapshot)
    return tracker


def _health_unavailable(drive: CycleDrive, error: HealthToolError) -> None:
    """A baseline that cannot be read. With [health] the campaign asked for health: refused.
    Without it the drive runs without health: one warning line and one store event. Whatever
    the tool's exit status says (real smartctl exits 1, "command line did not parse", on a
    device it cannot type: a loop device, many USB bridges and HBAs); only a tool that is not
    installed is a set-up fault of the host, refused either way."""
    label = drive.spec.identity.label()
    if drive.campaign.health.required or isinstance(error, ToolMissing):
        raise UserError(f"drive {label}: health: {error}") from error
    drive.progress(
        f"ch{drive.spec.channel}: warning: {label}: health cannot be read ({error});"
        " running without health ([health] not in the campaign)"
    )
    recording.event(drive, "health_unavailable", {"error": str(error)})


def write_cache(drive: CycleDrive, node: DriveNode) -> dict[str, Any]:
    """Apply the campaign's write-cache setting (a power cycle may reset it); the state the
    drive reports afterwards, for the record."""
    assert drive.station.write_cache is not None
    wanted = WRITE_CACHE[drive.campaign.health.write_cache]
    try:
        state = drive.station.write_cache(node, wanted)
    except HealthToolError as error:
        if wanted is not None:
            raise RigError(f"write cache: {error}") from error
        return {"enabled": None, "wanted": None, "error": str(error)}
    return {"enabled": state, "wanted": wanted}
