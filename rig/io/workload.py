"""The write workload of one cycle: slots (workers), each with one request in flight.

Every slot owns a disjoint stripe of the test region, so no two requests in flight ever overlap:
what reads back after a cut can then be attributed to exactly one write (docs/decisions.md,
"No two requests in flight overlap, and generations are never reused").
Queue depth = slots. Each request is timestamped on the host monotonic clock right before issue
and right after completion, and logged in the cycle's `CycleLog`.

What each slot writes comes from a `SlotPlanner` (addresses, sizes, generations, flushes; numpy,
a batch at a time). Two engines carry the plan out:
- native (`rig/native/engine.c`): one C thread per writer with Linux AIO on the target's O_DIRECT
  descriptor, generating each record right before submitting it; used whenever the target has a
  file descriptor (real drives, loop devices, image files). It runs planned batches from a ring
  back to back while a planner thread logs each finished batch and publishes the next, so the
  queue never drains between batches (docs/decisions.md, "The engine runs a ring of planned
  batches");
- threads: one Python thread per slot calling `BlockTarget.write`/`flush` (targets without a
  descriptor, such as the in-process virtual drive).
Both produce the same ledger. The plan lives in rig/io/workload_plan.py, the engines in
rig/io/workload_native.py and rig/io/workload_threads.py; this module is the `Writer` that picks one
(its public names re-exported here, so importers need only rig.io.workload).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rig.errors import RigError
from rig.io.blockio import Discards, flush_firing
from rig.io.ledger import NOT_DONE
from rig.io.workload_native import NativeRun
from rig.io.workload_plan import (
    DISCARD,
    ENGINES,
    FLUSH,
    JESD219_SIZES,
    JESD219_SKEW,
    LAYOUTS,
    LBA_SKEWS,
    NOT_SUBMITTED,
    SIZE_MIXES,
    TIMER_WORKER,
    WRITE,
    IntentSink,
    SlotPlanner,
    Workload,
    WorkloadPlan,
    block_sizes,
)
from rig.io.workload_threads import SlotRun, Stream, TimerFlush
from rig.io.writer_context import DescriptorTarget, Live, WriterContext
from rig.native.trigger import Trigger

__all__ = [
    "DISCARD",
    "ENGINES",
    "FLUSH",
    "JESD219_SIZES",
    "JESD219_SKEW",
    "LAYOUTS",
    "LBA_SKEWS",
    "NOT_SUBMITTED",
    "SIZE_MIXES",
    "TIMER_WORKER",
    "WRITE",
    "DescriptorTarget",
    "IntentSink",
    "Live",
    "SlotPlanner",
    "Workload",
    "WorkloadPlan",
    "Writer",
    "WriterContext",
    "block_sizes",
]


class Writer:
    """Runs the workload's slots until `stop` is set or each slot hits an I/O error."""

    def __init__(
        self,
        workload: Workload,
        context: WriterContext,
        seed: int,
        start_at: Sequence[int] = (),
    ) -> None:
        """`start_at`: a sequential workload's position per planner (in blocks from its stripe's
        start, as `next_start` gave them), so a stream runs on across writers instead of going
        back to each stripe's start."""
        self.workload = workload
        self.context = context
        self._start_at = list(start_at)
        self._seed = seed
        self._threads: list[threading.Thread] = []
        self._op_seq_base = seed << 20  # op counts unique across cycles of a campaign
        self.engine = ""
        self.live = Live()
        self.crash: BaseException | None = None  # a bug in a writer thread, not an I/O error
        self._made: list[SlotPlanner] = []  # the planners the engine runs (`start`)

    def _planners(self) -> list[SlotPlanner]:
        """One planner per slot and stripe, or one for the whole region (stream layout)."""
        state, load = self.context.state, self.workload
        if load.layout == "stream":
            planner = SlotPlanner(
                load,
                0,
                state.first_lba,
                state.nblocks,
                state,
                self._op_seq_base,
                self.context.target.block_size,
                self._seed * 1000,
                self.context.intent,
            )
            return [planner]
        stripe = state.nblocks // load.workers
        return [
            SlotPlanner(
                load,
                slot,
                state.first_lba + slot * stripe,
                stripe,
                state,
                self._op_seq_base + (slot << 40),
                self.context.target.block_size,
                self._seed * 1000 + slot,
                self.context.intent,
            )
            for slot in range(load.workers)
        ]

    def next_start(self) -> list[int]:
        """Per planner, where a sequential workload goes on: after the last write this writer
        logged (its planner's op count is the highest), or where it started if none."""
        log, load, state = self.context.log, self.workload, self.context.state
        size = state.nblocks if load.layout == "stream" else state.nblocks // load.workers
        count = 1 if load.layout == "stream" else load.workers
        points = (self._start_at + [0] * count)[:count]
        if not log.write_count:
            return points
        op, first, nblocks = log.column("op_seq"), log.column("first_lba"), log.column("nblocks")
        planner = (
            np.zeros(len(op), dtype=np.int64)
            if load.layout == "stream"
            else (first - state.first_lba) // size
        )
        for p in range(count):
            mine = np.flatnonzero(planner == p)
            if len(mine):
                last = mine[np.argmax(op[mine])]
                points[p] = int(first[last] + nblocks[last] - state.first_lba - p * size)
        return points

    def engine_to_run(self) -> str:
        """The engine `start` runs on this target: "native" or "threads"."""
        native = (
            isinstance(self.context.target, DescriptorTarget)
            and self.workload.engine != "threads"
            and self.workload.discard_share == 0  # (the native engine only writes)
        )
        return "native" if native else "threads"

    def start(self) -> None:
        self._made = planners = self._planners()
        for planner, at in zip(planners, self._start_at, strict=False):
            planner.cursor = at if 0 <= at < planner.stripe else 0
        target = self.context.target
        discards = self.workload.discard_share > 0
        if discards and not isinstance(target, Discards):
            raise ValueError("the workload discards: its target takes no discard")
        native = self.engine_to_run() == "native"
        if self.workload.engine == "native" and not native:
            raise ValueError("the native engine needs a target with a file descriptor")
        self.engine = "native" if native else "threads"
        if native:
            run = NativeRun(self.workload, self.context, self.live, self._guarded)
            self._threads.append(
                threading.Thread(target=self._guarded, args=(run.run, planners), name="writer-aio")
            )
        else:
            slots = SlotRun(self.workload, self.context, self.live)
            timer = TimerFlush(self.workload.flush_every_ms)
            stream = Stream(planners[0]) if self.workload.layout == "stream" else None
            for slot in range(self.workload.workers):
                self._threads.append(
                    threading.Thread(
                        target=self._guarded,
                        args=(
                            slots.run_slot,
                            slot,
                            planners[0] if stream else planners[slot],
                            stream,
                            timer,
                        ),
                        name=f"writer-{slot}",
                    )
                )
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def _guarded(self, run: Callable[..., None], *args: Any) -> None:
        """Keep what a writer thread raised: a thread that dies silently would leave a cycle
        that wrote nothing and still passed."""
        try:
            run(*args)
        except BaseException as error:
            self.crash = self.crash or error
            self.context.stop.set()  # the other writers stop too: the cycle is a rig error

    def flush_once(self, trigger: Trigger | None = None) -> int:
        """One flush issued by the caller once the writers are quiet (a cut timed from its
        completion: rig/campaign/cutcycle/cuts.py), logged as the timed flushes are; its
        completion instant (host ns), or NOT_DONE when it failed. `trigger`: fired by its
        completion (rig/io/blockio.py `FiresTriggers`), else here once it returned."""
        ctx, target = self.context, self.context.target
        issue_ns = time.monotonic_ns()
        try:
            if trigger is not None:
                done_ns = flush_firing(target, trigger)
            else:
                done_ns = target.flush() or time.monotonic_ns()
        except OSError as error:
            ctx.log.add_flush(TIMER_WORKER, issue_ns, NOT_DONE, error.errno or 5)
            return NOT_DONE
        ctx.log.add_flush(TIMER_WORKER, issue_ns, done_ns, 0)
        return done_ns

    def write_once(self, trigger: Trigger | None = None) -> int:
        """One write issued by the caller once the writers are quiet (a cut timed from its
        acknowledgement: rig/campaign/cutcycle/cuts.py), the next of a slot's plan (the seed's
        slot), logged as theirs are; its completion instant (host ns), or NOT_DONE when it
        failed. Either engine's planners go on: their generations and op counts stay unique.
        `trigger`: as `flush_once`'s."""
        assert self._made, "write_once before start"
        planner = self._made[self._seed % len(self._made)]
        plan = planner.next(1)
        e = int(np.flatnonzero(plan.kind == WRITE)[-1])  # the fresh write (given-back first)
        run = SlotRun(self.workload, self.context, self.live)
        return run.write_at(planner.slot, plan, e, trigger)

    def join(self, timeout_s: float, raise_crash: bool = True) -> bool:
        """Wait for every worker; False if some are still stuck in I/O after `timeout_s`.
        Raises RigError if a writer thread crashed (unless `raise_crash` is False: clean-up)."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.crash is not None and raise_crash:
            raise RigError(f"writer thread crashed: {self.crash!r}") from self.crash
        return not any(thread.is_alive() for thread in self._threads)
