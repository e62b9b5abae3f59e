"""The SNIA PTS test flow of an endurance run (docs/campaign.md, "PTS test flow"): the purge,
workload-independent preconditioning, and each write interval as a steady-state round (the rule
itself is rig/campaign/endurance/pts.py). Functions of the drive's EnduranceRun
(rig/campaign/endurance/endurance.py)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Protocol

from rig.campaign.drive import DriveRun
from rig.campaign.endurance import intervals, pts
from rig.campaign.endurance.intervals import Latency
from rig.config.campaign import EnduranceSpec
from rig.errors import RigError
from rig.io.ledger import CycleLog
from rig.io.workload import Workload, Writer, WriterContext
from rig.store import IntervalRow

PRECONDITION_WRITE_BYTES = 128 * 1024  # PTS workload-independent preconditioning: 128 KiB SEQ
PRECONDITION_PASSES = 2  # ... twice the tested capacity


class IntervalRun(Protocol):
    """What the PTS flow uses of a drive's endurance run (endurance.py:EnduranceRun, which
    calls the flow: a Protocol here, so the two files do not import each other)."""

    run: DriveRun
    spec: EnduranceSpec
    rounds: pts.SteadyState
    seq: int  # the last interval's number
    host_bytes: int  # written by the host so far
    write_intervals: int  # write intervals so far

    def discard_region(self, kind: str) -> None: ...

    def store_row(
        self,
        started_at: float,
        seconds: float,
        log: CycleLog,
        written: int,
        mb_per_s: float,
        latency: Latency,
        steady: bool,
        verified: int,
        failures: int,
        kind: str,
        detail: dict[str, Any],
    ) -> IntervalRow: ...


def purge(e: IntervalRun) -> None:
    """Purge before anything else, as the drive says it can; refused with the reason (the
    drive's run stops: a PTS run without its purge would not be one)."""
    wanted = e.spec.purge
    if wanted == "none":
        return
    run = e.run
    if run.station.purge is None:
        raise RigError(f"purge {wanted} refused: station {run.station.name} cannot purge drives")
    started = time.monotonic_ns()
    method = run.station.purge(run.node, wanted)
    if method == "discard":
        e.discard_region("blkdiscard")
    detail: dict[str, Any] = {"wanted": wanted, "method": method}
    detail["ns"] = time.monotonic_ns() - started
    run.store.add_event(run.drive_id, started, "purge", detail)
    run.progress(f"ch{run.spec.channel}: purged ({method})")


def precondition(e: IntervalRun, stop: threading.Event) -> None:
    """Workload-independent preconditioning: PRECONDITION_PASSES x the region in 128 KiB
    sequential writes, one `precondition` row per pass (they take no interval number and
    are no round: rounds start after it). A resumed run does the passes not yet complete (one a
    stop or a kill cut short is done again in full): no round starts before all are done."""
    if not e.spec.precondition:
        return
    run = e.run
    done = run.store.precondition_passes_done(run.drive_id)
    if done >= PRECONDITION_PASSES:
        return
    block = run.target.block_size
    per_write = max(1, PRECONDITION_WRITE_BYTES // block)
    load = Workload(
        workers=run.campaign.workload.workers,
        write_blocks=(per_write,),
        flush_every=0,
        sequential=True,
        layout="stream",
        engine=run.campaign.workload.engine,
    )
    writes_per_pass = -(-run.state.nblocks // per_write)
    for number in range(done + 1, PRECONDITION_PASSES + 1):
        if stop.is_set():
            return
        if not _precondition_pass(e, load, number, writes_per_pass, stop):
            if stop.is_set():
                return  # (a resume does it again)
            # no round may start on a drive that was not preconditioned
            raise RigError(f"preconditioning pass {number} could not write the whole region")
    run.store.add_event(
        run.drive_id, time.monotonic_ns(), "precondition", {"passes": PRECONDITION_PASSES}
    )


def _precondition_pass(
    e: IntervalRun, load: Workload, number: int, writes: int, stop: threading.Event
) -> bool:
    """One pass; whether it wrote the whole region (a stop, or slots that failed, cut it
    short: recorded as what it was, with `complete: false`)."""
    run = e.run
    e.seq += 1
    log = CycleLog()
    halt = threading.Event()
    context = WriterContext(run.media_id, run.target, run.state, log, halt)
    writer = Writer(
        load, context, seed=random.Random(f"{run.campaign.seed}/pc{number}").randrange(1 << 30)
    )
    started_at = time.time()
    t0 = time.monotonic()
    writer.start()
    while writer.live.acks < writes and not stop.is_set() and not halt.is_set():
        time.sleep(0.01)
    halt.set()
    writer.join(30.0)
    seconds = time.monotonic() - t0
    run.target.flush()
    ok = log.column("status") == 0
    written = int(log.column("nblocks")[ok].sum()) * run.target.block_size
    e.host_bytes += written
    intervals.commit_flushed(run, log)
    mb_per_s = written / seconds / 1e6 if seconds > 0 else 0.0
    complete = int(ok.sum()) >= writes
    detail: dict[str, Any] = {
        "pass": number,
        "write_bytes": PRECONDITION_WRITE_BYTES,
        "complete": complete,
    }
    latency = intervals.latency_us(log)
    row = e.store_row(
        started_at, seconds, log, written, mb_per_s, latency, False, 0, 0, "precondition", detail
    )
    fill = row.fill_fraction
    run.progress(
        f"ch{run.spec.channel} preconditioning pass {number}/{PRECONDITION_PASSES}:"
        f" {mb_per_s:8.1f} MB/s  fill {fill * 100:5.1f}%"
        + ("" if complete else "  (cut short: done again on resume)")
    )
    return complete


def track_round(
    e: IntervalRun, mb_per_s: float, iops: float, mean_us: float, detail: dict[str, Any]
) -> bool:
    """Feed this write interval to the steady-state bookkeeping as a round; True once steady
    state is reached. The verdict's turn (reached / not reached) is an event."""
    run = e.run
    before = e.rounds.verdict
    verdict = e.rounds.add(pts.Round(e.write_intervals, iops, mb_per_s, mean_us))
    detail["pts"] = {
        "round": e.write_intervals,
        "iops": iops,
        "mb_per_s": mb_per_s,
        "mean_latency_us": mean_us,
        "verdict": verdict,
    }
    if verdict != before and verdict in (pts.REACHED, pts.NOT_REACHED):
        window = e.rounds.steady_state_rounds()
        event: dict[str, Any] = {
            "verdict": verdict,
            "round": e.write_intervals,
            "window": [window[0].number, window[-1].number],
            "checks": {
                c.variable: {"average": c.average, "range": c.range_share, "slope": c.excursion}
                for c in e.rounds.checks
            },
        }
        run.store.add_event(run.drive_id, time.monotonic_ns(), "steady_state", event)
        run.progress(
            f"ch{run.spec.channel}: steady state {verdict} at round {e.write_intervals}"
            f" (window rounds {window[0].number}..{window[-1].number})"
        )
    return e.rounds.steady


def rounds_from(spec: EnduranceSpec, stored: list[dict[str, Any]]) -> pts.SteadyState:
    """The steady-state bookkeeping rebuilt from stored write rows' details (a resume); rows
    from before rounds were recorded count as rounds with their own figures missing (0)."""
    tracker = pts.SteadyState(window=spec.steady_window, max_rounds=spec.max_rounds)
    for number, detail in enumerate(stored, start=1):
        figures = detail.get("pts", {})
        tracker.add(
            pts.Round(
                number,
                float(figures.get("iops", 0.0)),
                float(figures.get("mb_per_s", 0.0)),
                float(figures.get("mean_latency_us", 0.0)),
            )
        )
    return tracker
