"""The native engine of the writer (`rig/native/engine.c`): one C thread with Linux AIO on the
target's O_DIRECT descriptor runs planned batches from a ring back to back, while a planner
thread logs each finished batch and publishes the next (docs/decisions.md, "The engine runs a
ring of planned batches")."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from rig.io import media
from rig.io.workload_plan import (
    FLUSH,
    NOT_SUBMITTED,
    TIMER_WORKER,
    WRITE,
    SlotPlanner,
    Workload,
    WorkloadPlan,
)
from rig.native import AioContext, BatchRing, EngineResult, engine_loop

if TYPE_CHECKING:
    from rig.io.writer_context import DescriptorTarget, Live, WriterContext

STUCK: list[npt.NDArray[np.uint8]] = []  # buffers of requests that never came back


class NativeRun:
    """One run of the native engine over the writer's planners (`run`, in the writer's thread)."""

    BATCH_SECONDS = 0.2  # plan about this much work per batch ...
    RING_BATCHES = 3  # ... and keep this many published ahead (stripes drift apart by up to 2)
    DRAIN_TIMEOUT_S = 10.0  # after stop, wait this long for requests still in flight

    def __init__(
        self,
        workload: Workload,
        context: WriterContext,
        live: Live,
        guarded: Callable[..., None],
    ) -> None:
        self.workload = workload
        self.context = context
        self.live = live
        self.guarded = guarded  # runs a thread's work, keeping what it raised for the writer

    def run(self, planners: list[SlotPlanner]) -> None:
        """The C engine runs published batches back to back in this thread (GIL released) while
        a planner thread logs each retired batch and publishes the next, so the queue never
        drains between batches (docs/decisions.md, "The engine runs a ring of planned batches")."""
        ctx, load = self.context, self.workload
        target = cast("DescriptorTarget", ctx.target)
        block = ctx.target.block_size
        slot_bytes = int(max(p.sizes.max() for p in planners)) * block
        slots = load.workers
        stop_flag = ctypes.c_int(0)
        done = threading.Event()

        def relay_stop() -> None:
            while not done.is_set():
                if ctx.stop.wait(0.05):
                    stop_flag.value = 1
                    return

        threading.Thread(target=relay_stop, name="writer-stop", daemon=True).start()
        buffers = media.aligned_buffer(slot_bytes * slots)
        aio = AioContext(slots + 1)
        timers = 16 + int(4000 * self.BATCH_SECONDS / (load.flush_every_ms or 1000))
        ring = BatchRing(self.RING_BATCHES, timers)
        finished = threading.Event()
        feeder = threading.Thread(
            target=self.guarded,
            args=(self._feed_native, planners, ring, finished, stop_flag),
            name="writer-plan",
        )
        stuck = False
        try:
            feeder.start()
            stuck = engine_loop(
                aio,
                target.fileno(),
                slots,
                load.layout == "stream",
                block,
                ctx.campaign,
                load.durable_writes,
                int(load.flush_every_ms * 1e6),
                int(self.DRAIN_TIMEOUT_S * 1e9),
                buffers,
                slot_bytes,
                np.arange(slots, dtype=np.uint16),
                ring,
                stop_flag,
                self.live.words,
            )
        finally:
            finished.set()  # every batch published before this is retired
            ring.wake()
            feeder.join()  # it logs what the engine retired, then ends
            done.set()
            ring.close()
            if stuck:  # the kernel may still write from the buffers and use the context
                STUCK.append(buffers)
            else:  # io_destroy waits for an RCU grace period: not on the cycle's path
                threading.Thread(target=aio.close, name="writer-aio-close", daemon=True).start()

    def _feed_native(
        self,
        planners: list[SlotPlanner],
        ring: BatchRing,
        finished: threading.Event,
        stop_flag: ctypes.c_int,
    ) -> None:
        """Keep the engine's ring full of planned batches; log each batch the engine retires."""
        try:
            self._feed_loop(planners, ring, finished)
        except BaseException:
            stop_flag.value = 1  # the engine must not wait for batches that will not come
            raise

    def _feed_loop(
        self, planners: list[SlotPlanner], ring: BatchRing, finished: threading.Event
    ) -> None:
        ctx, load = self.context, self.workload
        shared = load.layout == "stream"
        alive = [True] * len(planners)
        per_slot = 4
        in_flight: list[tuple[list[WorkloadPlan | None], int]] = []  # published, not collected
        while True:
            # plan first: the engine runs on what is published while this thread logs
            while ring.has_room() and any(alive) and not ctx.stop.is_set():
                if finished.is_set():
                    break
                plans = [
                    p.next(per_slot * (load.workers if shared else 1)) if ok else None
                    for p, ok in zip(planners, alive, strict=True)
                ]
                self._publish(ring, plans)
                in_flight.append((plans, per_slot))
                if ring.published < ring.size:  # no measurement yet: grow towards a batch
                    per_slot = min(65536, per_slot * 4)
            result = ring.collect()
            if result is None and finished.is_set():
                # The engine may have retired more batches, and returned, between the collect
                # above and this check: those writes reached the drive and must be logged. Once
                # `finished` is set every batch the engine ran is retired, so one more look is
                # enough; what is still not retired was published after it ended and never ran.
                result = ring.collect()
                if result is None:
                    return
            if result is None:
                ring.wait(0.05)
                continue
            plans, planned_per_slot = in_flight.pop(0)
            failed = self._log_native(plans, result)
            alive = [ok and not bad for ok, bad in zip(alive, failed, strict=True)]
            if result.seconds > 0 and not result.stuck:
                scale = self.BATCH_SECONDS / max(result.seconds, 1e-4)
                per_slot = int(min(65536, max(2, planned_per_slot * min(4.0, max(0.25, scale)))))

    def _publish(self, ring: BatchRing, plans: list[WorkloadPlan | None]) -> None:
        """One batch: the slots' plans in slot order (a slot that failed gets no entries)."""
        live = [p for p in plans if p is not None]
        lengths = np.array([len(p) if p else 0 for p in plans], dtype=np.int64)
        gen_base = np.cumsum([0] + [len(p.gens) for p in live[:-1]])

        def column(arrays: list[npt.NDArray[Any]], dtype: type) -> npt.NDArray[Any]:
            joined = np.concatenate(arrays) if arrays else np.zeros(0, dtype)
            return joined.astype(dtype, copy=False)

        ring.publish(
            np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            column([p.kind for p in live], np.uint8),
            column([p.lba for p in live], np.int64),
            column([p.nblocks for p in live], np.uint32),
            column([p.gen_offset + b for p, b in zip(live, gen_base, strict=True)], np.int64),
            column([p.gens for p in live], np.uint32),
            column([p.op_seq for p in live], np.uint64),
        )

    def _log_native(self, plans: list[WorkloadPlan | None], result: EngineResult) -> list[bool]:
        """Log what the engine submitted of one batch; which slots' planners failed in it."""
        log, fua = self.context.log, self.workload.durable_writes
        failed = []
        start = 0
        for plan in plans:
            if plan is None:
                failed.append(False)
                continue
            end = start + len(plan)
            slot_of = result.slot_of[start:end].astype(np.int64)  # worker id = slot index
            issue = result.issue_ns[start:end]
            complete = result.complete_ns[start:end]
            status = result.status[start:end].astype(np.int64)
            sent = issue != NOT_SUBMITTED
            writes = sent & (plan.kind == WRITE)
            flushes = sent & (plan.kind == FLUSH)
            failed.append(bool((status != 0).any()))
            if writes.any():
                # every entry a write that was sent (the usual case): views, not gathered copies
                idx: slice | npt.NDArray[np.intp] = (
                    slice(None) if writes.all() else np.flatnonzero(writes)
                )
                counts = plan.nblocks[idx].astype(np.int64)
                if sent.all():  # the usual case: every write's generations, in plan order
                    gens = plan.gens
                else:
                    gens = plan.gens[
                        np.repeat(plan.gen_offset[idx], counts)
                        + (
                            np.arange(int(counts.sum()))
                            - np.repeat(np.cumsum(counts) - counts, counts)
                        )
                    ]
                log.add_writes(
                    slot_of[idx],
                    plan.op_seq[idx].astype(np.int64),
                    plan.lba[idx],
                    gens,
                    counts,
                    issue[idx],
                    complete[idx],
                    status[idx],
                    fua,
                )
            if flushes.any():
                idx = np.flatnonzero(flushes)
                log.add_flushes(
                    slot_of[idx],
                    issue[idx],
                    complete[idx],
                    status[idx],
                )
            start = end
        if len(result.timer_issue_ns):
            n = len(result.timer_issue_ns)
            log.add_flushes(
                np.full(n, TIMER_WORKER, dtype=np.int64),
                result.timer_issue_ns,
                result.timer_complete_ns,
                result.timer_status.astype(np.int64),
            )
        return failed
