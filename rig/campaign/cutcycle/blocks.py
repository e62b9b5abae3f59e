"""Which blocks a cycle's check reads beyond its own writes (docs/checker.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rig.campaign.model import Cycle
from rig.check import verify
from rig.io.ledger import CycleLog

if TYPE_CHECKING:
    from rig.campaign.model import CycleDrive


def blocks_to_check(drive: CycleDrive, c: Cycle) -> np.ndarray:
    """Beyond this cycle's writes: recent cycles' writes, a sample of older blocks, and on
    schedule the whole region. O(writes at risk) except for the scheduled full scans."""
    written = c.log.column("first_lba"), c.log.column("nblocks")
    this_cycle = np.unique(np.repeat(written[0], written[1]) + _offsets(written[1]))
    recent = list(drive.recent)
    if drive.campaign.cut.recent_cycles:
        drive.recent.append(this_cycle)
    every = drive.campaign.cut.full_scan_every
    c.full_scan = bool(every) and c.seq % every == 0
    state = drive.state
    if c.full_scan and state.nblocks <= verify.SCAN_CHUNK_BLOCKS:
        return np.arange(state.nblocks, dtype=np.int64) + state.first_lba
    # a full scan of a larger region reads the rest in chunks after this check (`verify`)
    return np.concatenate([drive.sample_older_blocks(), *recent])


def written_lbas(log: CycleLog) -> np.ndarray:
    """Every block a cycle's writes addressed (one entry per block per write)."""
    nblocks = log.column("nblocks")
    within = np.arange(int(nblocks.sum())) - np.repeat(log.column("gen_offset"), nblocks)
    return np.repeat(log.column("first_lba"), nblocks) + within


def unchecked_detail(result: verify.CheckResult, kept: int = 256) -> dict[str, Any]:
    """The blocks a check left unread, for the store: how many, and where (first ranges)."""
    ranges = [[f.lba_first, f.lba_count, f.detail["reason"]] for f in result.unchecked[:kept]]
    return {
        "blocks": result.blocks_unchecked,
        "ranges": ranges,
        "ranges_total": len(result.unchecked),
    }


def _offsets(nblocks: np.ndarray) -> np.ndarray:
    """0..n-1 for each write of n blocks, concatenated."""
    total = int(nblocks.sum())
    starts = np.repeat(np.cumsum(nblocks) - nblocks, nblocks)
    return np.arange(total) - starts
