"""Continue a campaign from its store after a stop (SIGINT/SIGTERM) or a crash (kill, reboot).

What the store holds after any exit: every recorded cycle whole (one transaction each), the
drive's LBA state as of the last recorded cycle, and a `cycle_start` row written before the
first I/O of every cycle. A cycle started and never recorded is the one a crash interrupted.

Its writes are gone from the host's memory, so the expected state is rebuilt from the drive itself:
the test region is flushed and read back once, and every block takes what it holds now as its
committed generation when it reads back whole (valid, well placed, one generation), UNKNOWN
otherwise. Nothing read here is judged: the interrupted cycle is recorded as `interrupted` with no
findings, and blocks that differ from what the store expected are only counted in the record (see
docs/campaign.md, "What a resume does to the expected state"). A gap is added to every block's
issued generation after a crash, so no generation the lost cycle may have issued is ever reused
(docs/architecture.md, "The checker's contract"; docs/decisions.md, "No two requests in flight
overlap, and generations are never reused")."""

from __future__ import annotations

import dataclasses
import itertools
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rig.campaign.drive import DriveRun
from rig.campaign.model import ResumePoint
from rig.check import intent, readback
from rig.check.failures import ALLOWED_LOSS
from rig.config import campaign_file
from rig.config.campaign import Campaign
from rig.errors import UserError
from rig.io import media
from rig.io.ledger import UNKNOWN, LbaState, is_uncertain
from rig.store import CycleRow, Store

MIN_GENERATION_GAP = 1 << 16
SCAN_BLOCKS = 256  # blocks per read of the resume scan
Runs = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]  # region-relative (start, length)


@dataclass(frozen=True)
class LostCycle:
    """A cycle that started (its `cycle_start` row exists) and was never recorded."""

    seq: int
    started_at: float
    cut_delay_ns: int


@dataclass
class Resumable:
    campaign_id: int
    campaign: Campaign  # the stored campaign, only the drives that are still active
    points: dict[int, ResumePoint]  # by channel
    lost: dict[int, LostCycle]  # by channel
    gaps: dict[int, int]  # by channel: generations added to `issued` after a crash
    finished: list[str]  # labels of drives that are dead, stopped or done
    crashed: bool = False  # the campaign was still `running`: no orderly stop recorded


@dataclass(frozen=True)
class ScanResult:
    blocks: int
    unreadable: int  # read errors: left as they were
    unclear: int  # torn, corrupt or misplaced: now UNKNOWN
    unexpected: int  # whole, but not what the store expected (and not a newer generation)
    newer: int  # whole generations newer than the store knew (the lost cycle's writes)
    scope: str = "region"  # what was read: "region", or "intent" (the last cycle's ranges)

    def as_json(self) -> dict[str, int | str]:
        return dataclasses.asdict(self)


def load(store: Store) -> Resumable:
    """Everything needed to continue the store's last campaign; a clear error if it cannot."""
    head = store.latest_campaign()
    if head is None:
        raise UserError(f"{store.path}: no campaign to resume")
    campaign = campaign_file.parse(head["config"], f"{store.path} (stored campaign)")
    campaign_id = int(head["id"])
    points: dict[int, ResumePoint] = {}
    lost: dict[int, LostCycle] = {}
    gaps: dict[int, int] = {}
    finished: list[str] = []
    active = []
    for spec in campaign.drives:
        drive = store.drive_on_channel(campaign_id, spec.channel)
        if drive is None:  # the crash came before this drive's first cycle: it starts afresh
            active.append(spec)
            continue
        point, lost_cycle, gap = _drive_point(store, drive)
        if drive["status"] != "active" or point.counted >= campaign.cycles:
            finished.append(f"ch{spec.channel} {spec.identity.label()}: {drive['status']}")
            continue
        active.append(spec)
        points[spec.channel] = point
        gaps[spec.channel] = gap
        if lost_cycle is not None:
            lost[spec.channel] = lost_cycle
    remaining = dataclasses.replace(campaign, drives=tuple(active))
    crashed = head["status"] == "running"
    return Resumable(campaign_id, remaining, points, lost, gaps, finished, crashed)


def _drive_point(store: Store, row: sqlite3.Row) -> tuple[ResumePoint, LostCycle | None, int]:
    drive_id = int(row["id"])
    first, count = int(row["region_first_lba"]), int(row["region_blocks"])
    blob = store.lba_state_of(drive_id)
    state = LbaState.from_bytes(first, blob) if blob is not None else LbaState(first, count)
    totals = store.cycle_totals(drive_id)
    by_class = store.finding_totals_of_drive(drive_id)
    failures = {r["class"]: int(r["n"]) for r in by_class if r["failure"]}
    allowed = sum(int(r["n"]) for r in by_class if r["class"] == ALLOWED_LOSS)
    last = int(totals["last"])
    started = store.last_begun_after(drive_id, last)
    lost = LostCycle(*started) if started else None
    point = ResumePoint(
        drive_id=drive_id,
        state=state,
        next_seq=(lost.seq if lost else last) + 1,
        counted=int(totals["counted"] or 0),
        errors=int(totals["errors"] or 0),
        failing_cycles=int(totals["failing"] or 0),
        failures=failures,
        allowed_losses=allowed,
        elapsed_s=float(totals["elapsed"]),
    )
    return point, lost, max(MIN_GENERATION_GAP, 4 * int(totals["most"]))


def blocks_at_risk(run: DriveRun) -> Runs | None:
    """Region-relative (start, length) runs the last cycle begun may have written, from its
    intent log; None when the log cannot say (none, another boot, overflow, endurance)."""
    log = run.intent
    if log is None:
        return None
    last = run.next_seq - 1  # the lost (or last recorded) cycle
    found = log.ranges(last)
    if found is None:
        # begun, and the crash came before its `cycle_start` row: it issued nothing
        ahead = log.ranges(last + 1)
        if ahead is None or len(ahead[0]):
            return None
        found = ahead
    starts, lengths = intent.merged_runs(found[0] - run.state.first_lba, found[1])
    inside = (starts >= 0) & (starts + lengths <= run.state.nblocks)
    if not inside.all():  # not this region's ranges: do not trust the log
        return None
    return starts, lengths


def _chunks(runs: Runs) -> Iterator[tuple[int, int]]:
    for start, length in zip(runs[0].tolist(), runs[1].tolist(), strict=True):
        for at in range(start, start + length, SCAN_BLOCKS):
            yield at, min(SCAN_BLOCKS, start + length - at)


READ_AHEAD = 64  # chunks read ahead at once (16 MiB at 4 KiB blocks)


def _read_back(
    reader: readback.Reader, chunks: Iterator[tuple[int, int]], first_lba: int, block_size: int
) -> Iterator[tuple[int, int, npt.NDArray[np.uint8] | None]]:
    """(start, count, data or None when unreadable) per chunk, in order, read ahead in windows."""
    pending = list(itertools.islice(chunks, READ_AHEAD))
    while pending:
        sizes = [count * block_size for _, count in pending]
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
        out = media.aligned_buffer(sum(sizes))
        reader.read_ahead([(first_lba + s, c) for s, c in pending], out, offsets)
        for k, (start, count) in enumerate(pending):
            try:
                reader.take(k)
            except OSError:
                yield start, count, None
                continue
            yield start, count, out[offsets[k] : offsets[k] + sizes[k]]
        pending = list(itertools.islice(chunks, READ_AHEAD))


def scan(run: DriveRun, media_id: int, gap: int, only: Runs | None = None) -> ScanResult:
    """Flush, read back the test region (or only the runs `only` of it) and rebuild the
    committed state of what was read."""
    state, target = run.state, run.target
    target.flush()  # what reads back below is then what the drive holds durably
    per_block = target.block_size // media.SECTOR
    unreadable = unclear = unexpected = newer = 0
    whole_region = (np.zeros(1, dtype=np.int64), np.full(1, state.nblocks, dtype=np.int64))
    bs = target.block_size
    reader = readback.reader_for(target.read, bs, None)  # at queue depth on a real drive
    for start, count, data in _read_back(
        reader, _chunks(whole_region if only is None else only), state.first_lba, bs
    ):
        rows = slice(start, start + count)
        if data is None:
            unreadable += count
            continue
        sectors = media.parse(data)
        valid = sectors.state.reshape(count, per_block) == media.VALID
        ours = valid & (sectors.campaign.reshape(count, per_block) == np.uint64(media_id))
        gen = np.where(ours, sectors.generation.astype(np.int64).reshape(count, per_block), 0)
        lbas = sectors.lba.astype(np.int64).reshape(count, per_block)
        here = np.arange(state.first_lba + start, state.first_lba + start + count)[:, None]
        corrupt = (sectors.state.reshape(count, per_block) == media.CORRUPT).any(axis=1)
        misplaced = (ours & (lbas != here)).any(axis=1)
        mixed = (gen != gen[:, :1]).any(axis=1)
        whole = ~corrupt & ~misplaced & ~mixed
        observed = gen[:, 0]
        committed = state.committed[rows].astype(np.int64)
        issued = state.issued[rows].astype(np.int64)
        known = ~is_uncertain(committed)
        is_newer = whole & (observed > issued)
        newer += int(is_newer.sum())
        unexpected += int((whole & known & ~is_newer & (observed != committed)).sum())
        unclear += int((~whole).sum())
        state.committed[rows] = np.where(whole, observed, int(UNKNOWN)).astype(np.uint32)
        top = np.maximum(issued, np.where(whole, observed, 0))
        # The gap goes where something was ever issued or is found; a block still empty after
        # the flush stays sparse (a lost write to it never reached the media).
        state.issued[rows] = np.where(top > 0, top + gap, 0).astype(np.uint32)
    read = state.nblocks if only is None else int(only[1].sum())
    scope = "region" if only is None else "intent"
    return ScanResult(read, unreadable, unclear, unexpected, newer, scope)


def reconcile(run: DriveRun, resumable: Resumable, store: Store) -> ScanResult:
    """Rebuild one drive's state from its region and record the interrupted cycle, if any."""
    channel = run.spec.channel
    lost = resumable.lost.get(channel)
    # after a crash (the campaign still marked running), whatever ran last may have issued
    # generations the store never saw: a cut cycle, or an endurance interval
    gap = resumable.gaps.get(channel, 0) if lost or resumable.crashed else 0
    result = scan(run, run.media_id, gap, blocks_at_risk(run))
    detail = {"scan": result.as_json(), "generation_gap": gap}
    now = time.monotonic_ns()
    if lost is not None:
        row = CycleRow(
            drive_id=run.drive_id,
            seq=lost.seq,
            status="interrupted",
            cut_delay_ns=lost.cut_delay_ns,
            started_at=lost.started_at,
            error="rig stopped mid-cycle (crash or kill): not judged; region read back on resume",
        )
        store.record_cycle(row, [], [(now, "resume_scan", detail)], None, run.state.to_bytes())
        run.counts.interrupted += 1
    else:
        store.record_resume_scan(run.drive_id, now, detail, run.next_seq - 1, run.state.to_bytes())
    return result


def mark_resumed(store: Store, campaign_id: int) -> None:
    store.mark_resumed(campaign_id)
