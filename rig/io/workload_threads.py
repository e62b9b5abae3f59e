"""The threads engine of the writer: one Python thread per slot calling
`BlockTarget.write`/`flush`, for targets without a file descriptor (the in-process virtual
drive). It produces the same ledger as the native engine."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from rig.io import media
from rig.io.blockio import Discards, write_firing
from rig.io.ledger import NOT_DONE
from rig.io.workload_plan import (
    DISCARD,
    FLUSH,
    TIMER_WORKER,
    SlotPlanner,
    Workload,
    WorkloadPlan,
)

if TYPE_CHECKING:
    from rig.io.writer_context import Live, WriterContext
    from rig.native.trigger import Trigger


class SlotRun:
    """The slots of the threads engine: `run_slot` in each slot's thread."""

    def __init__(self, workload: Workload, context: WriterContext, live: Live) -> None:
        self.workload = workload
        self.context = context
        self.live = live

    def run_slot(
        self, slot: int, planner: SlotPlanner, stream: Stream | None, timer: TimerFlush
    ) -> None:
        stop = self.context.stop
        entries = stream.entries(slot, stop) if stream else own_entries(planner, stop)
        for plan, e in entries:
            if timer.due() and not self.flush(TIMER_WORKER, timer):
                break
            kind = plan.kind[e]
            if kind == FLUSH:
                ok = self.flush(slot, None)
            else:
                ok = self.discard(slot, plan, e) if kind == DISCARD else self.write(slot, plan, e)
            if stream is not None:
                stream.done(slot, ok)
            if not ok:
                break

    def write(self, slot: int, plan: WorkloadPlan, e: int) -> bool:
        return self.write_at(slot, plan, e) != NOT_DONE

    def write_at(
        self, slot: int, plan: WorkloadPlan, e: int, trigger: Trigger | None = None
    ) -> int:
        """Entry `e` written and logged; its completion instant, or NOT_DONE on an I/O error.
        `trigger`: fired by the completion (rig/io/workload.py `Writer.write_once`)."""
        ctx, load = self.context, self.workload
        lba, count = int(plan.lba[e]), int(plan.nblocks[e])
        gens = plan.gens[plan.gen_offset[e] : plan.gen_offset[e] + count]
        issue_ns = time.monotonic_ns()
        self.live.issued(issue_ns)  # first: a cut timed from this instant is sent at once
        flags = media.FLAG_FUA if load.durable_writes else 0
        op_seq = int(plan.op_seq[e])
        record = media.WriteRecord(
            ctx.campaign, lba, gens.astype(np.uint64), slot, op_seq, issue_ns, flags
        )
        data = media.build(record, ctx.target.block_size)
        status = 0
        try:
            # a target that knows its completion instant (a simulated drive) gives it, else it is
            # stamped here, once the call returned (rig/io/blockio.py `BlockTarget`)
            if trigger is not None:
                complete_ns = write_firing(ctx.target, lba, data, load.durable_writes, trigger)
            else:
                complete_ns = (
                    ctx.target.write(lba, data, durable=load.durable_writes) or time.monotonic_ns()
                )
            self.live.acked(complete_ns)
        except OSError as error:
            complete_ns, status = NOT_DONE, error.errno or 5
        ctx.log.add_write(
            slot, op_seq, lba, gens, issue_ns, complete_ns, status, load.durable_writes
        )
        return complete_ns

    def discard(self, slot: int, plan: WorkloadPlan, e: int) -> bool:
        """Discard the entry's range through the target (the station's transport: BLKDISCARD
        on a block device, which its driver sends as UNMAP, DSM deallocate or TRIM), timed and
        logged as a write with the discard flag."""
        ctx = self.context
        assert isinstance(ctx.target, Discards)  # (the writer checked it before starting)
        lba, count = int(plan.lba[e]), int(plan.nblocks[e])
        gens = plan.gens[plan.gen_offset[e] : plan.gen_offset[e] + count]
        status = 0
        self.live.discard_started()
        issue_ns = time.monotonic_ns()
        try:
            ctx.target.discard(lba, count)
            complete_ns = time.monotonic_ns()
        except OSError as error:
            complete_ns, status = NOT_DONE, error.errno or 5
        finally:
            self.live.discard_ended()
        ctx.log.add_write(
            slot, int(plan.op_seq[e]), lba, gens, issue_ns, complete_ns, status, False, True
        )
        return status == 0

    def flush(self, worker: int, timer: TimerFlush | None) -> bool:
        ctx = self.context
        self.live.flush_started()
        issue_ns = time.monotonic_ns()
        try:
            done_ns = ctx.target.flush() or time.monotonic_ns()
        except OSError as error:
            ctx.log.add_flush(worker, issue_ns, NOT_DONE, error.errno or 5)
            self.live.flush_ended(False)
            return False
        finally:
            if timer is not None:
                timer.done()
        ctx.log.add_flush(worker, issue_ns, done_ns, 0)
        self.live.flush_ended(True)
        return True


def own_entries(planner: SlotPlanner, stop: threading.Event) -> Iterator[tuple[WorkloadPlan, int]]:
    """A slot's own entries in order (stripes layout)."""
    while True:
        plan = planner.next(8)
        for e in range(len(plan)):
            if stop.is_set():
                return
            yield plan, e


class Stream:
    """One address stream shared by the slots of the threads engine (stream layout): entries
    are taken in order, and one that would overlap a write in flight waits for it."""

    def __init__(self, planner: SlotPlanner) -> None:
        self.planner = planner
        self.cond = threading.Condition()
        self.plan: WorkloadPlan | None = None
        self.pos = 0
        self.busy: dict[int, tuple[int, int]] = {}  # slot -> LBA range of its write in flight
        self.failed = False

    def entries(self, slot: int, stop: threading.Event) -> Iterator[tuple[WorkloadPlan, int]]:
        while True:
            with self.cond:
                while True:
                    if stop.is_set() or self.failed:
                        return
                    if self.plan is None or self.pos >= len(self.plan):
                        self.plan, self.pos = self.planner.next(64), 0
                    plan, e = self.plan, self.pos
                    low, high = int(plan.lba[e]), int(plan.lba[e]) + int(plan.nblocks[e])
                    if plan.kind[e] == FLUSH or not any(
                        a < high and low < b for a, b in self.busy.values()
                    ):
                        break
                    self.cond.wait(0.05)
                self.pos += 1
                if plan.kind[e] != FLUSH:
                    self.busy[slot] = (low, high)
            yield plan, e

    def done(self, slot: int, ok: bool) -> None:
        with self.cond:
            self.busy.pop(slot, None)
            self.failed = self.failed or not ok  # a stream stops at its first error
            self.cond.notify_all()


class TimerFlush:
    """Flush every T ms across the slots of the threads engine: one slot claims each flush."""

    def __init__(self, every_ms: float) -> None:
        self.every_ns = int(every_ms * 1e6)
        self._lock = threading.Lock()
        self._last = time.monotonic_ns()
        self._busy = False

    def due(self) -> bool:
        """True (once, for the caller to flush) when a timed flush is due and none is running."""
        if not self.every_ns:
            return False
        with self._lock:
            if self._busy or time.monotonic_ns() - self._last < self.every_ns:
                return False
            self._busy = True
            self._last = time.monotonic_ns()
            return True

    def done(self) -> None:
        with self._lock:
            self._busy = False
