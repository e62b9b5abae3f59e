"""Most of what a cut campaign writes to (and reads back from) the store: campaign and drive
rows, set-up events, health snapshots, `cycle_start` and the record phase. Resume, endurance, the
runner and the start-up call the store too (docs/architecture.md, "One cycle, as data flows");
SQL itself lives in rig/store/. The record phase, `record`, always ends a cycle: the cycle, its
findings, events, ledger, LBA state and rail-sense capture in one transaction."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from rig.campaign.cutcycle import cuts, recovery
from rig.campaign.cutcycle.blocks import written_lbas
from rig.campaign.model import CycleRecord
from rig.check import exposure, failures, verify
from rig.config.campaign import Campaign
from rig.health.snapshot import HealthSnapshot
from rig.health.tracker import snapshot_fields
from rig.io.ledger import uncertain
from rig.power.base import RailResult
from rig.station.model import Station
from rig.store import CycleRow, RailSenseRow, Store

if TYPE_CHECKING:
    from rig.campaign.model import CycleDrive


# the campaign --------------------------------------------------------------------------------
def new_campaign(store: Store, campaign: Campaign, station: Station) -> int:
    campaign_id = store.new_campaign(campaign.name, campaign.source, campaign.seed, station.name)
    store.set_criteria(campaign_id, campaign.criteria.as_json())
    return campaign_id


def end_campaign(store: Store, campaign_id: int, status: str, power_not_safe: str = "") -> None:
    store.end_campaign(campaign_id, status, power_not_safe)


def cut_outcomes(
    store: Store, campaign_id: int
) -> list[tuple[str, int, str, list[str], frozenset[str] | None]]:
    """Every recorded cycle of the campaign in record order: (the drive's model, its channel,
    the cycle's status, its failure classes, its exposure), for a resumed sequential plan."""
    return [
        (
            str(row["model"]),
            int(row["channel"]),
            str(row["status"]),
            [c for c in (row["failure_classes"] or "").split(",") if c],
            exposure.from_text(row["exposed"]),
        )
        for row in store.cut_outcomes(campaign_id)
    ]


# a drive -------------------------------------------------------------------------------------
def media_id(drive: CycleDrive) -> int:
    return drive.store.media_id(drive.campaign_id)


def add_drive(
    drive: CycleDrive, identity: dict[str, str], size_bytes: int, first: int, n: int
) -> int:
    block = drive.target.block_size
    channel, profile = drive.spec.channel, drive.spec.profile
    return drive.store.add_drive(
        drive.campaign_id, channel, identity, size_bytes, block, (first, n), profile
    )


def drive_status(drive: CycleDrive, status: str) -> None:
    drive.store.set_drive_status(drive.drive_id, status)


def event(drive: CycleDrive, kind: str, detail: dict[str, Any]) -> None:
    """An event of the drive outside any cycle's record (set-up, warnings)."""
    drive.store.add_event(drive.drive_id, time.monotonic_ns(), kind, detail)


def has_snapshot(drive: CycleDrive, after_seq: int) -> bool:
    return drive.store.has_health(drive.drive_id, after_seq)


def snapshot(drive: CycleDrive, after_seq: int, taken: HealthSnapshot) -> None:
    fields = snapshot_fields(taken)
    drive.store.add_health(
        drive.drive_id, after_seq, time.monotonic_ns(), taken.source, fields, taken.raw
    )


# a cycle -------------------------------------------------------------------------------------
def begin_cycle(drive: CycleDrive, c: CycleRecord) -> None:
    """Written before any I/O of the cycle: after a crash, resume finds this cycle and records
    it as interrupted instead of forgetting it."""
    drive.store.begin_cycle(drive.drive_id, c.seq, c.started_at, int(c.cut_delay_s * 1e9))


def record(drive: CycleDrive, c: CycleRecord) -> None:
    """The record phase: the cycle as it ended, whatever ended it; then the drive's counts."""
    log, result, state = c.log, c.result, drive.state
    if result is None and log.write_count:
        # Verify did not complete (interrupted, rig error, dead): what this cycle's writes
        # left is unknown, so those blocks are not judged until read back whole (or read
        # back by a resume), rather than reported as flying writes by a later cycle.
        written = np.unique(written_lbas(log)) - state.first_lba
        state.committed[written] = uncertain(state.committed[written])
        # ... and zeroes where it discarded may be its discard (docs/checker.md, "Discards")
        lbas, gens = log.discarded_blocks()
        rel = lbas - state.first_lba
        state.trimmed[rel] = np.maximum(state.trimmed[rel], gens).astype(np.uint32)
    rows = [asdict(f) for f in c.findings]
    power_ons = [
        (p.n, p.on_ns, p.back_ns, p.ready_ns, p.cut_ns, p.state_at_cut)
        for p in recovery.power_on_rows(c)
    ]
    drive.store.record_cycle(
        _cycle_row(drive, c),
        rows,
        c.events,
        log.to_bytes(),
        state.to_bytes(),
        _rail_sense(c),
        power_ons,
    )
    drive.counts.elapsed_s += max(0.0, time.time() - c.started_at)
    drive.counts.add(c)


def _cycle_row(drive: CycleDrive, c: CycleRecord) -> CycleRow:
    log, result = c.log, c.result
    durability = c.durability
    if durability is None and c.edge is not None:  # the cycle ended before verify
        durability = c.log.durability(c.edge.host_ns, c.edge.error_ns)
    ack_ns, flush_ns = (
        log.last_ack_and_flush_to_cut(c.edge.host_ns) if c.edge is not None else (None, None)
    )
    scheduled = next((d for _, kind, d in c.events if kind == "cut_scheduled"), None)
    timing = cuts.fidelity(drive.campaign.cut, scheduled, c.edge)
    return CycleRow(
        drive_id=drive.drive_id,
        seq=c.seq,
        status=c.status,
        error=c.error,
        cut_delay_ns=int(c.cut_delay_s * 1e9),
        started_at=c.started_at,
        write_start_ns=c.write_start_ns,
        cut_ns=c.edge.host_ns if c.edge else None,
        cut_error_ns=c.edge.error_ns if c.edge else None,
        gone_ns=c.gone_ns,
        back_ns=c.back_ns,
        writes=log.write_count - log.discard_count,  # (writes alone: discards are not)
        writes_acked=int(durability.acked.sum()) if durability else 0,
        writes_durable=int(durability.durable.sum()) if durability else 0,
        flushes=log.flush_count,
        bytes_written=int(log.column("nblocks").sum()) * drive.target.block_size,
        blocks_checked=result.blocks_checked if result else 0,
        blocks_unchecked=result.blocks_unchecked if result else 0,
        nondurable_writes=result.nondurable_writes if result else 0,
        nondurable_survived=result.nondurable_survived if result else 0,
        failures=sum(1 for f in c.findings if f.failure),
        full_scan=int(c.full_scan),
        unserializable_writes=sum(
            int(f.detail["lost_writes"]) for f in c.findings if f.cls == verify.UNSERIALIZABLE
        ),
        last_ack_to_cut_ns=ack_ns,
        last_flush_to_cut_ns=flush_ns,
        realized_delay_ns=timing.realized_ns,
        timed_from=timing.timed_from,
        delay_error_ns=timing.error_ns,
        delay_in_range=timing.in_range,
        exposed=exposure.to_text(exposure_of(c)),
    )


def exposure_of(c: CycleRecord) -> frozenset[str] | None:
    """What the cut was a trial of: as the verify phase found, or for a drive that did not come
    back the drive-scope classes alone; None for a cycle that is no cut (rig error, stop)."""
    judged = frozenset({failures.SLOW_READY}) if c.ready_judged else frozenset()
    if c.exposure is not None:
        return c.exposure | judged
    return exposure.of_dead_cut() if c.status == "dead" else None


def _rail_sense(c: CycleRecord) -> RailSenseRow | None:
    """How the rail fell after this cycle's off edge, if the switch measures it (asked by then:
    cutcycle/runon.py:cut_rail)."""
    return None if c.rail is None else _rail_row(c.rail)


def _rail_row(r: RailResult) -> RailSenseRow:
    mapped = r.error_ns >= 0
    return RailSenseRow(
        r.channel,
        r.edge_us,
        r.host_ns if mapped else None,
        r.error_ns if mapped else None,
        r.hi_threshold,
        r.lo_threshold,
        r.window_ms,
        r.v0,
        r.hi_us,
        r.lo_us,
        r.minimum,
        r.end,
        r.dt_us,
        r.samples,
    )
