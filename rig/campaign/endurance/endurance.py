"""Endurance mode: sustained writes in measured intervals, with verification, SMART polling,
interleaved power cuts and retention checks (docs/campaign.md, "Endurance").

Each interval runs the campaign's workload for `interval_s` without a cut, flushes, and stores
one `endurance_interval` row: throughput, IOPS, write latency percentiles (p50, p99, p99.9,
max, from the ledger's own issue/completion times), host bytes written so far and the share of
the rated TBW, how full the region is, and whether the steady-state rule holds. Then, on their
own cadences: the interval's writes (and a sample of older blocks) are read back and checked,
a power-cut cycle runs (recorded as an ordinary cycle), and a retention check powers the drive
off for `retention_off_s` and reads back every block holding data.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from typing import Any

from rig.campaign.drive import DriveRun
from rig.campaign.endurance import pts, pts_flow
from rig.campaign.endurance.intervals import Latency, commit_flushed, latency_us, mean_latency_us
from rig.check import verify
from rig.config.campaign import EnduranceSpec
from rig.errors import RigError
from rig.health.errors import HealthToolError
from rig.health.tracker import snapshot_fields
from rig.io import discard
from rig.io.ledger import CycleLog
from rig.io.workload import Writer, WriterContext
from rig.store import IntervalRow

FINDINGS_KEPT = 20  # findings kept in an interval's detail (all are counted)


def _us(value: float | None) -> str:
    return "not enough data" if value is None else f"{value:8.0f} us"


class EnduranceRun:
    def __init__(self, run: DriveRun, spec: EnduranceSpec) -> None:
        self.run = run
        self.spec = spec
        self.seq, self.host_bytes, self.throughputs = run.store.endurance_so_far(run.drive_id)
        self.write_intervals = len(self.throughputs)
        written = run.store.endurance_details(run.drive_id)
        self.rounds = pts_flow.rounds_from(spec, written)
        # where a sequential workload goes on (per slot): on a resume, where the last stored
        # write interval left it
        self.sequential_at: list[int] = (
            list(written[-1].get("sequential_at", [])) if written else []
        )

    # the drive's loop ---------------------------------------------------------------------------
    def loop(self, stop: threading.Event) -> None:
        run = self.run
        run.stop = stop
        try:
            if self.seq == 0:
                pts_flow.purge(self)
                self._prepare_region()
            if self.write_intervals == 0:  # (a resume before the first round: the passes left)
                pts_flow.precondition(self, stop)
            while not stop.is_set() and not self._done():
                self._write_interval(stop)
                n = self.write_intervals
                cut_due = self.spec.cut_every and n % self.spec.cut_every == 0
                can_cut = cut_due and not stop.is_set() and run.counts.cycles < run.campaign.cycles
                if can_cut and not self._cut():
                    break
                retention_due = self.spec.retention_every and n % self.spec.retention_every == 0
                if retention_due and not stop.is_set() and not self._retention(stop):
                    break
        except (RigError, OSError) as error:
            run.stop_drive(f"endurance: {error}", "stopped")
        finally:
            run.close()

    def _done(self) -> bool:
        if self.spec.intervals and self.write_intervals >= self.spec.intervals:
            return True
        if reason := self.run.time_is_up():
            self.run.stopped_by = reason
            return True
        if self.spec.stop_at_steady and self.rounds.verdict in (pts.REACHED, pts.NOT_REACHED):
            self.run.stopped_by = f"steady state {self.rounds.verdict}"
            return True
        return False

    def _prepare_region(self) -> None:
        run = self.run
        node, state = run.node, run.state
        physical, source = self._physical_block()
        why = discard.misalignment(state.first_lba, state.nblocks, node.logical_block, physical)
        if why:
            run.progress(f"ch{run.spec.channel}: warning: {why}")
            warning: dict[str, Any] = {"why": why, "physical_block": physical, "source": source}
            run.store.add_event(run.drive_id, time.monotonic_ns(), "alignment_warning", warning)
        if self.spec.discard != "none":
            self.discard_region(self.spec.discard)

    def discard_region(self, kind: str) -> None:
        run = self.run
        state = run.state
        fileno = getattr(run.target, "fileno", None)
        fd = fileno() if callable(fileno) else -1
        started = time.monotonic_ns()
        block = run.target.block_size
        discard.discard(
            kind,
            run.node.devnode,
            fd,
            state.first_lba,
            state.nblocks,
            block,
            discard.device_limit_blocks(run.node.devnode, block),
        )
        detail: dict[str, Any] = {"kind": kind, "blocks": state.nblocks}
        detail["ns"] = time.monotonic_ns() - started
        run.store.add_event(run.drive_id, started, "discard", detail)
        run.progress(f"ch{run.spec.channel}: discarded the test region ({kind})")

    def _physical_block(self) -> tuple[int, str]:
        """The drive's physical block and where it was read: the kernel's (sysfs), or the
        larger one the drive's own identify reports (the health baseline). Behind a USB bridge
        or HBA that does not pass READ CAPACITY(16) through, and on a loop device, sysfs shows
        the logical block as the physical one while the drive itself says 512e."""
        node, tracker = self.run.node, self.run.tracker
        snapshot = tracker.last if tracker is not None else None
        reported = snapshot.identity.physical_block_size if snapshot is not None else None
        if reported and reported > node.physical_block:
            return reported, "identify"
        return node.physical_block, "sysfs"

    # one interval --------------------------------------------------------------------------------
    def _write_interval(self, stop: threading.Event) -> None:
        run = self.run
        self.seq += 1
        self.write_intervals += 1
        log = CycleLog()
        started_at = time.time()
        t0 = time.monotonic()
        self._run_writer(log, stop)
        seconds = time.monotonic() - t0
        flush_issue = time.monotonic_ns()
        run.target.flush()
        flush_done = time.monotonic_ns()
        log.add_flush(-1, flush_issue, flush_done, 0)

        block = run.target.block_size
        ok = log.column("status") == 0
        written = int(log.column("nblocks")[ok].sum()) * block
        self.host_bytes += written
        latency = latency_us(log)
        mb_per_s = written / seconds / 1e6 if seconds > 0 else 0.0
        self.throughputs.append(mb_per_s)
        detail: dict[str, Any] = {}
        if run.campaign.workload.sequential:
            detail["sequential_at"] = self.sequential_at
        iops = int(ok.sum()) / seconds if seconds > 0 else 0.0
        steady = pts_flow.track_round(self, mb_per_s, iops, mean_latency_us(log), detail)
        verified = failures = 0
        if self.spec.verify_every and self.write_intervals % self.spec.verify_every == 0:
            durability = log.durability(flush_done + 1, 0)
            sample = run.sample_older_blocks()
            result = verify.check(
                run.media_id,
                run.state,
                log,
                durability,
                sample,
                run.target.read,
                block,
                policy=verify.ReadPolicy(
                    timeout_s=run.campaign.cut.read_timeout_s,
                    max_reads=run.campaign.cut.read_budget,
                ),
                atomic_blocks=run.atomic_blocks(run.node, block),
            )
            verified, failures = result.blocks_checked, self._note_findings(result, detail)
        else:
            commit_flushed(run, log)
        row = self.store_row(
            started_at, seconds, log, written, mb_per_s, latency, steady, verified, failures,
            "write", detail,
        )  # fmt: skip
        tbw, fill = row.tbw_fraction, row.fill_fraction
        run.progress(
            f"ch{run.spec.channel} interval {self.write_intervals}: {mb_per_s:8.1f} MB/s"
            f"  p99 {_us(latency[1])} ({latency[4]} writes)  host {self.host_bytes / 1e9:8.2f} GB"
            + (f" ({tbw * 100:.3f}% of TBW)" if tbw is not None else "")
            + f"  fill {fill * 100:5.1f}%{'  steady' if steady else ''}"
            + (f"  FAILURES {failures}" if failures else "")
        )

    def _run_writer(self, log: CycleLog, stop: threading.Event) -> None:
        """One interval's writes into `log`: `interval_s` long, shorter on a stop. A sequential
        workload goes on where the last interval stopped (a stream that went back to each
        stripe's start would rewrite the same first stretch interval after interval)."""
        run = self.run
        halt = threading.Event()
        context = WriterContext(run.media_id, run.target, run.state, log, halt)
        key = f"{run.campaign.seed}/{run.spec.channel}/interval {self.seq}"
        seed = random.Random(key).randrange(1 << 30)
        writer = Writer(run.campaign.workload, context, seed=seed, start_at=self.sequential_at)
        writer.start()
        stop.wait(self.spec.interval_s)  # returns early on a stop: a short last interval
        halt.set()
        writer.join(30.0)
        self.sequential_at = writer.next_start()

    def _note_findings(self, result: verify.CheckResult, detail: dict[str, Any]) -> int:
        failing = [f for f in result.findings if f.failure]
        detail["findings"] = dict(Counter(f.cls for f in result.findings))
        detail["blocks_unchecked"] = result.blocks_unchecked
        detail["failures_first"] = [
            {
                "class": f.cls,
                "lba": f.lba_first,
                "count": f.lba_count,
                "expected": f.expected_gen,
                "observed": f.observed_gen,
            }
            for f in failing[:FINDINGS_KEPT]
        ]
        return len(failing)

    def read_smart(self, detail: dict[str, Any]) -> None:
        health = self.run.station.health
        if health is None:
            return
        try:
            detail["smart"] = snapshot_fields(health(self.run.node))
        except HealthToolError as error:
            detail["smart_error"] = str(error)

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
    ) -> IntervalRow:
        """Record one row (any kind) with the drive's SMART fields read into `detail`, its fill
        level and its share of the rated TBW as they stand now; returns the row."""
        run = self.run
        self.read_smart(detail)
        fill = len(run.state.committed.nonzero()) / run.state.nblocks
        tbw = self.host_bytes / (self.spec.tbw_tb * 1e12) if self.spec.tbw_tb else None
        ok = int((log.column("status") == 0).sum())
        row = IntervalRow(
            drive_id=run.drive_id,
            seq=self.seq,
            started_at=started_at,
            seconds=seconds,
            writes=ok,
            failed_writes=log.write_count - ok,
            bytes_written=written,
            host_bytes_total=self.host_bytes,
            tbw_fraction=tbw,
            mb_per_s=mb_per_s,
            iops=ok / seconds if seconds else 0.0,
            lat_p50_us=latency[0],
            lat_p99_us=latency[1],
            lat_p999_us=latency[2],
            lat_max_us=latency[3],
            lat_samples=latency[4],
            fill_fraction=fill,
            steady=int(steady),
            verified_blocks=verified,
            failures=failures,
            kind=kind,
            detail=detail,
            interval_no=self.write_intervals if kind == "write" else None,
        )
        # the expected state goes with the row, so a resume continues from it
        run.store.record_interval(row, run.next_seq - 1, run.state.to_bytes())
        return row

    # interleaved events ---------------------------------------------------------------------------
    def _cut(self) -> bool:
        """One ordinary power-cut cycle; False when the drive is dead or its channel stopped."""
        c = self.run.next_cycle()
        return not (self.run.dead or c.stop_channel)

    def _retention(self, stop: threading.Event) -> bool:
        """Flush, power off for retention_off_s, power on, read back every block holding data.
        False when the drive did not come back."""
        run = self.run
        station, channel, cut = run.station, run.spec.channel, run.campaign.cut
        self.seq += 1
        started_at = time.time()
        run.target.flush()
        watch = station.presence.watch(run.spec.identity)
        try:
            run.target.close()
            off_at = time.monotonic()
            station.power.off(channel)
            if watch.wait_gone(cut.gone_timeout_s) is None:
                raise RigError("drive did not leave the bus when powered off for retention")
            stop.wait(self.spec.retention_off_s)
            station.power.on(channel)
            off_s = time.monotonic() - off_at
            if run.tracker is not None:  # the next cut's health delta spans this power-off too
                run.tracker.power_off_between_cycles()
            node = watch.wait_back(cut.return_timeout_s)
        finally:
            watch.close()
        if node is None:
            run.dead = True
            run.stop_drive("dead device after the retention power-off", "dead")
            return False
        run.node = node
        run.target = station.open_target(node, run.spec)
        log = CycleLog()
        held = run.state.written()
        result = verify.check(
            run.media_id,
            run.state,
            log,
            log.durability(time.monotonic_ns(), 0),
            held,
            run.target.read,
            run.target.block_size,
            policy=verify.ReadPolicy(
                timeout_s=run.campaign.cut.read_timeout_s,
                max_reads=run.campaign.cut.read_budget,
            ),
            atomic_blocks=run.atomic_blocks(node, run.target.block_size),
        )
        detail: dict[str, Any] = {"off_s": self.spec.retention_off_s}
        failures = self._note_findings(result, detail)
        no_latency: Latency = (None, None, None, None, 0)
        self.store_row(
            started_at, off_s, log, 0, 0.0, no_latency, False, result.blocks_checked, failures,
            "retention", detail,
        )  # fmt: skip
        run.progress(
            f"ch{channel} retention check after interval {self.write_intervals}: {off_s:.3g} s off,"
            f" {result.blocks_checked} blocks read back, failures {failures}"
        )
        return True


def drive_loop(run: DriveRun, stop: threading.Event) -> None:
    """The per-drive thread of an endurance campaign (run_campaign's `drive_loop`)."""
    assert run.campaign.endurance is not None
    EnduranceRun(run, run.campaign.endurance).loop(stop)
