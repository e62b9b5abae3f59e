"""One write interval's figures from its ledger (latency percentiles, PTS tracking values) and
its expected state after a completed flush: shared by the endurance loop (endurance.py) and the
PTS flow (pts_flow.py), which both write intervals."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rig.campaign.drive import DriveRun
from rig.campaign.endurance import pts
from rig.io.ledger import CycleLog, uncertain

# Samples an interval needs before a percentile is stated: at least 10 samples lie beyond a tail
# percentile (p99 from 1,000, p99.9 from 10,000), so one slow write cannot make it; the median is
# the middle sample of any non-empty set (docs/decisions.md, "A latency percentile only where its
# samples support it").
PERCENTILE_MIN_SAMPLES = ((50.0, 1), (99.0, 1_000), (99.9, 10_000))

Latency = tuple[float | None, float | None, float | None, float | None, int]


def latency_us(log: CycleLog) -> Latency:
    """p50, p99, p99.9 and max of completed writes' latency (completion - issue), in µs, and
    the number of samples; a percentile the samples cannot support (PERCENTILE_MIN_SAMPLES) is
    None, never a number."""
    ok = log.column("status") == 0
    latency = (log.column("complete_ns")[ok] - log.column("issue_ns")[ok]) / 1000.0
    n = len(latency)
    if n == 0:
        return None, None, None, None, 0
    p50, p99, p999 = (
        float(np.percentile(latency, q)) if n >= least else None
        for q, least in PERCENTILE_MIN_SAMPLES
    )
    return p50, p99, p999, float(latency.max()), n


def steady_state(values: list[float], window: int) -> bool:
    """SNIA PTS rule (campaign/endurance/pts.py) on one variable over the last `window` values."""
    return len(values) >= window and pts.check_steady_state(values[-window:]).ok


def mean_latency_us(log: CycleLog) -> float:
    """Mean latency of completed writes in µs (a PTS tracking variable); 0 without any."""
    ok = log.column("status") == 0
    latency = (log.column("complete_ns")[ok] - log.column("issue_ns")[ok]) / 1000.0
    return float(latency.mean()) if len(latency) else 0.0


Blocks = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]


def block_writes(log: CycleLog) -> Blocks:
    """Per block of every write: its LBA, its generation, whether the write completed."""
    nblocks = log.column("nblocks")
    within = np.arange(int(nblocks.sum())) - np.repeat(log.column("gen_offset"), nblocks)
    lbas = np.repeat(log.column("first_lba"), nblocks) + within
    ok = np.repeat(log.column("status") == 0, nblocks)
    return lbas.astype(np.int64), log.generations().astype(np.int64), ok


def commit_flushed(run: DriveRun, log: CycleLog) -> None:
    """Without a read-back, the expected state after a completed flush and no cut: each block
    holds its newest completed write; a block whose newest write failed is uncertain (it may
    hold that write or not, but nothing older than before)."""
    lbas, gens, ok = block_writes(log)
    if len(lbas) == 0:
        return
    order = np.lexsort((gens, lbas))  # by block, then generation: the last of each block wins
    lbas, gens, ok = lbas[order], gens[order], ok[order]
    last = np.r_[lbas[1:] != lbas[:-1], True]
    rel = lbas[last] - run.state.first_lba
    unsure = uncertain(run.state.committed[rel])  # a failed write: no older than before
    run.state.committed[rel] = np.where(ok[last], gens[last], unsure).astype(np.uint32)
