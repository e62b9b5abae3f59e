"""The write workload of one cycle: slots (workers), each with one request in flight.

Every slot owns a disjoint stripe of the test region, so no two requests in flight ever overlap:
what reads back after a cut can then be attributed to exactly one write (docs/decisions.md 1).
Queue depth = slots. Each request is timestamped on the host monotonic clock right before issue
and right after completion, and logged in the cycle's `CycleLog`.

What each slot writes comes from a `SlotPlanner` (addresses, sizes, generations, flushes; numpy,
a batch at a time). Two engines carry the plan out:
- native (`rig/native/engine.c`): one C thread per writer with Linux AIO on the target's O_DIRECT
  descriptor, generating each record right before submitting it; used whenever the target has a
  file descriptor (real drives, loop devices, image files). It runs planned batches from a ring
  back to back while a planner thread logs each finished batch and publishes the next, so the
  queue never drains between batches (docs/decisions.md 98);
- threads: one Python thread per slot calling `BlockTarget.write`/`flush` (targets without a
  descriptor, such as the in-process virtual drive).
Both produce the same ledger.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rig import media
from rig.blockio import BlockTarget
from rig.errors import RigError
from rig.ledger import NOT_DONE, CycleLog, LbaState
from rig.native import AioContext, BatchRing, EngineResult, engine_loop

# JESD219A (JEDEC SSD endurance workloads, 2012), enterprise workload: transfer sizes in bytes and
# their share of requests ...
JESD219_SIZES: tuple[tuple[int, float], ...] = (
    (512, 0.04),
    (1024, 0.01),
    (1536, 0.01),
    (2048, 0.01),
    (2560, 0.01),
    (3072, 0.01),
    (3584, 0.01),
    (4096, 0.67),
    (8192, 0.10),
    (16384, 0.07),
    (32768, 0.03),
    (65536, 0.03),
)
# ... and its LBA skew: (share of the LBA space, share of accesses), from the start of the space.
JESD219_SKEW: tuple[tuple[float, float], ...] = ((0.05, 0.50), (0.15, 0.30), (0.80, 0.20))

SIZE_MIXES = ("uniform", "jesd219")
LBA_SKEWS = ("uniform", "jesd219")
ENGINES = ("auto", "native", "threads")
LAYOUTS = ("stripes", "stream")

WRITE, FLUSH = 0, 1


@dataclass(frozen=True)
class Workload:
    workers: int = 8  # slots = queue depth
    write_blocks: tuple[int, ...] = (1, 2, 8, 32)  # sizes drawn uniformly per write (mix uniform)
    size_mix: str = "uniform"  # or "jesd219": JESD219A enterprise transfer sizes
    lba_skew: str = "uniform"  # or "jesd219": 50 % of writes to the first 5 % of each stripe ...
    flush_every: int = 16  # writes per slot between flushes; 0 = never
    flush_every_ms: float = 0.0  # also a flush every T ms across all slots; 0 = off
    durable_writes: bool = False  # every write RWF_DSYNC / FUA
    sequential: bool = False  # each slot writes its stripe in order instead of randomly
    layout: str = "stripes"  # or "stream": all slots share one address stream (as fio's QD)
    engine: str = "auto"  # native when the target has a file descriptor, else threads


def block_sizes(
    load: Workload, block_size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Write sizes in blocks and their probabilities. JESD219 sizes below one logical block are
    rounded up to one block (a 4 KiB-sector drive cannot take a 512-byte write)."""
    if load.size_mix == "jesd219":
        blocks = np.array([max(1, -(-size // block_size)) for size, _ in JESD219_SIZES])
        weights = np.array([share for _, share in JESD219_SIZES])
        unique = np.unique(blocks)
        merged = np.array([weights[blocks == b].sum() for b in unique])
        return unique.astype(np.int64), merged / merged.sum()
    sizes = np.array(load.write_blocks, dtype=np.int64)
    return sizes, np.full(len(sizes), 1.0 / len(sizes))


@dataclass(frozen=True)
class Plan:
    """The next entries of one slot: writes (with their generations) and flushes, in order."""

    kind: npt.NDArray[np.uint8]
    lba: npt.NDArray[np.int64]
    nblocks: npt.NDArray[np.uint32]
    gen_offset: npt.NDArray[np.int64]  # into gens, per entry (flushes: where the next would go)
    gens: npt.NDArray[np.uint32]
    op_seq: npt.NDArray[np.uint64]

    def __len__(self) -> int:
        return len(self.kind)

    def tail(self, start: int) -> Plan:
        """Entries from `start` on, with their generations."""
        base = int(self.gen_offset[start]) if start < len(self) else len(self.gens)
        return Plan(
            self.kind[start:],
            self.lba[start:],
            self.nblocks[start:],
            self.gen_offset[start:] - base,
            self.gens[base:],
            self.op_seq[start:],
        )

    def then(self, other: Plan) -> Plan:
        return Plan(
            np.concatenate([self.kind, other.kind]),
            np.concatenate([self.lba, other.lba]),
            np.concatenate([self.nblocks, other.nblocks]),
            np.concatenate([self.gen_offset, other.gen_offset + len(self.gens)]),
            np.concatenate([self.gens, other.gens]),
            np.concatenate([self.op_seq, other.op_seq]),
        )


class SlotPlanner:
    """Addresses, sizes and generations of one slot's writes, and where its flushes go."""

    def __init__(
        self,
        load: Workload,
        slot: int,
        first: int,
        stripe: int,
        state: LbaState,
        op_seq_base: int,
        block_size: int,
        seed: int,
        intent: IntentSink | None = None,
    ) -> None:
        self.load, self.slot, self.first, self.stripe = load, slot, first, stripe
        self.state = state
        self.intent = intent
        self.rng = np.random.default_rng(seed)
        self.sizes, self.weights = block_sizes(load, block_size)
        if stripe < int(self.sizes.max()):
            raise ValueError(f"test region too small: {stripe} blocks per worker")
        self.cursor = 0
        self.since_flush = 0
        self.op_seq = op_seq_base
        self._carry: Plan | None = None  # planned entries a batch did not get to, in order

    def give_back(self, plan: Plan, start: int) -> None:
        """Entries `start..` of `plan` were not issued: they come first in the next plan, so
        the flush cadence and the generations stay exactly as planned."""
        self._carry = plan.tail(start) if start < len(plan) else None

    def _offsets(self, counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        n = len(counts)
        if self.load.sequential:
            out = np.empty(n, dtype=np.int64)
            cursor = self.cursor
            for i, count in enumerate(counts.tolist()):  # wraps at the stripe's end
                if cursor + count > self.stripe:
                    cursor = 0
                out[i] = cursor
                cursor += count
            self.cursor = cursor
            return out
        room = self.stripe - counts + 1  # a write must end inside the stripe
        if self.load.lba_skew == "jesd219":
            bands = np.array([share for share, _ in JESD219_SKEW])
            hits = np.array([share for _, share in JESD219_SKEW])
            edges = np.concatenate([[0.0], np.cumsum(bands)])
            band = self.rng.choice(len(bands), n, p=hits)
            low = np.floor(edges[band] * self.stripe).astype(np.int64)
            high = np.maximum(low + 1, np.floor(edges[band + 1] * self.stripe).astype(np.int64))
            start = low + (self.rng.random(n) * (high - low)).astype(np.int64)
            return np.minimum(start, room - 1)
        return (self.rng.random(n) * room).astype(np.int64)

    def next(self, writes: int) -> Plan:
        """Entries given back first, then `writes` new writes with the flushes the cadence puts
        among them."""
        fresh = self._fresh(writes)
        carry, self._carry = self._carry, None
        return fresh if carry is None else carry.then(fresh)

    def _fresh(self, writes: int) -> Plan:
        counts = self.rng.choice(self.sizes, writes, p=self.weights)
        lbas = self.first + self._offsets(counts)
        if self.intent is not None:  # before any of these can be issued
            self.intent(lbas, counts)
        blocks = np.repeat(lbas, counts) + (
            np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        gens = self.state.reserve(blocks)  # atomic: planners of all slots share the state
        ops = self.op_seq + 1 + np.arange(writes, dtype=np.uint64)
        self.op_seq += writes
        gen_offset = np.cumsum(counts) - counts
        every = self.load.flush_every
        if not every:
            kind = np.zeros(writes, dtype=np.uint8)
            return Plan(kind, lbas, counts.astype(np.uint32), gen_offset, gens, ops)
        # a flush after every `every`-th write of this slot (the count runs on across batches)
        flush_after = (self.since_flush + np.arange(1, writes + 1)) % every == 0
        self.since_flush = (self.since_flush + writes) % every
        position = np.arange(writes) + np.cumsum(flush_after) - flush_after
        total = writes + int(flush_after.sum())
        kind = np.full(total, FLUSH, dtype=np.uint8)
        kind[position] = WRITE
        lba = np.zeros(total, dtype=np.int64)
        lba[position] = lbas
        nblocks = np.zeros(total, dtype=np.uint32)
        nblocks[position] = counts
        offsets = np.cumsum(nblocks, dtype=np.int64) - nblocks  # flushes: where the next goes
        op = np.zeros(total, dtype=np.uint64)
        op[position] = ops
        return Plan(kind, lba, nblocks, offsets, gens, op)


class Live:
    """What the writer is doing right now, for cut strategies (rig.cuts): acknowledgements seen,
    the host time of the last one, flushes in flight and done. The native engine updates the
    same four int64 words from C while it runs."""

    def __init__(self) -> None:
        self.words = (ctypes.c_int64 * 4)()
        self._lock = threading.Lock()

    @property
    def acks(self) -> int:
        return int(self.words[0])

    @property
    def last_ack_ns(self) -> int:
        return int(self.words[1])

    @property
    def flushes_in_flight(self) -> int:
        return int(self.words[2])

    @property
    def flushes_done(self) -> int:
        return int(self.words[3])

    def acked(self, at_ns: int) -> None:
        with self._lock:
            self.words[1] = at_ns
            self.words[0] += 1

    def flush_started(self) -> None:
        with self._lock:
            self.words[2] += 1

    def flush_ended(self, ok: bool) -> None:
        with self._lock:
            self.words[2] -= 1
            self.words[3] += int(ok)


@runtime_checkable
class DescriptorTarget(Protocol):
    """A target with an O_DIRECT file descriptor the native engine can drive."""

    def fileno(self) -> int: ...


# (first LBAs, blocks) of writes about to be planned: the intent log (rig/intent.py)
IntentSink = Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], None]


@dataclass(frozen=True)
class WriterContext:
    campaign: int
    target: BlockTarget
    state: LbaState
    log: CycleLog
    stop: threading.Event
    intent: IntentSink | None = None  # told every write's range before it can be issued


class Writer:
    """Runs the workload's slots until `stop` is set or each slot hits an I/O error."""

    BATCH_SECONDS = 0.2  # native engine: plan about this much work per batch ...
    RING_BATCHES = 3  # ... and keep this many published ahead (stripes drift apart by up to 2)
    DRAIN_TIMEOUT_S = 10.0  # after stop, wait this long for requests still in flight

    def __init__(self, workload: Workload, context: WriterContext, seed: int) -> None:
        self.workload = workload
        self.context = context
        self._seed = seed
        self._threads: list[threading.Thread] = []
        self._op_seq_base = seed << 20  # op counts unique across cycles of a campaign
        self.engine = ""
        self.live = Live()
        self.crash: BaseException | None = None  # a bug in a writer thread, not an I/O error

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

    def start(self) -> None:
        planners = self._planners()
        target = self.context.target
        native = isinstance(target, DescriptorTarget) and self.workload.engine != "threads"
        if self.workload.engine == "native" and not native:
            raise ValueError("the native engine needs a target with a file descriptor")
        self.engine = "native" if native else "threads"
        if native:
            self._threads.append(
                threading.Thread(
                    target=self._guarded, args=(self._run_native, planners), name="writer-aio"
                )
            )
        else:
            timer = _TimerFlush(self.workload.flush_every_ms)
            stream = _Stream(planners[0]) if self.workload.layout == "stream" else None
            for slot in range(self.workload.workers):
                self._threads.append(
                    threading.Thread(
                        target=self._guarded,
                        args=(
                            self._run_slot,
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

    def join(self, timeout_s: float, raise_crash: bool = True) -> bool:
        """Wait for every worker; False if some are still stuck in I/O after `timeout_s`.
        Raises RigError if a writer thread crashed (unless `raise_crash` is False: clean-up)."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.crash is not None and raise_crash:
            raise RigError(f"writer thread crashed: {self.crash!r}") from self.crash
        return not any(thread.is_alive() for thread in self._threads)

    # native engine ------------------------------------------------------------------------------
    def _run_native(self, planners: list[SlotPlanner]) -> None:
        """The C engine runs published batches back to back in this thread (GIL released) while
        a planner thread logs each retired batch and publishes the next, so the queue never
        drains between batches (docs/decisions.md 98)."""
        ctx, load = self.context, self.workload
        assert isinstance(ctx.target, DescriptorTarget)
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
            target=self._guarded,
            args=(self._feed_native, planners, ring, finished, stop_flag),
            name="writer-plan",
        )
        stuck = False
        try:
            feeder.start()
            stuck = engine_loop(
                aio,
                ctx.target.fileno(),
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
                _STUCK.append(buffers)
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
        in_flight: list[tuple[list[Plan | None], int]] = []  # published, not collected
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
            if result is None:
                if finished.is_set():
                    return  # what was published after the engine ended never ran
                ring.wait(0.05)
                continue
            plans, planned_per_slot = in_flight.pop(0)
            failed = self._log_native(plans, result)
            alive = [ok and not bad for ok, bad in zip(alive, failed, strict=True)]
            if result.seconds > 0 and not result.stuck:
                scale = self.BATCH_SECONDS / max(result.seconds, 1e-4)
                per_slot = int(min(65536, max(2, planned_per_slot * min(4.0, max(0.25, scale)))))

    def _publish(self, ring: BatchRing, plans: list[Plan | None]) -> None:
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

    def _log_native(self, plans: list[Plan | None], result: EngineResult) -> list[bool]:
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
                idx = np.flatnonzero(writes)
                counts = plan.nblocks[idx].astype(np.int64)
                gen_idx = np.repeat(plan.gen_offset[idx], counts) + (
                    np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
                )
                log.add_writes(
                    slot_of[idx],
                    plan.op_seq[idx].astype(np.int64),
                    plan.lba[idx],
                    plan.gens[gen_idx],
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

    # threads engine -----------------------------------------------------------------------------
    def _run_slot(
        self, slot: int, planner: SlotPlanner, stream: _Stream | None, timer: _TimerFlush
    ) -> None:
        stop = self.context.stop
        entries = stream.entries(slot, stop) if stream else _own_entries(planner, stop)
        for plan, e in entries:
            if timer.due() and not self._flush(TIMER_WORKER, timer):
                break
            ok = self._flush(slot, None) if plan.kind[e] == FLUSH else self._write(slot, plan, e)
            if stream is not None:
                stream.done(slot, ok)
            if not ok:
                break

    def _write(self, slot: int, plan: Plan, e: int) -> bool:
        ctx, load = self.context, self.workload
        lba, count = int(plan.lba[e]), int(plan.nblocks[e])
        gens = plan.gens[plan.gen_offset[e] : plan.gen_offset[e] + count]
        issue_ns = time.monotonic_ns()
        flags = media.FLAG_FUA if load.durable_writes else 0
        op_seq = int(plan.op_seq[e])
        record = media.WriteRecord(
            ctx.campaign, lba, gens.astype(np.uint64), slot, op_seq, issue_ns, flags
        )
        data = media.build(record, ctx.target.block_size)
        status = 0
        try:
            ctx.target.write(lba, data, durable=load.durable_writes)
            complete_ns = time.monotonic_ns()
            self.live.acked(complete_ns)
        except OSError as error:
            complete_ns, status = NOT_DONE, error.errno or 5
        ctx.log.add_write(
            slot, op_seq, lba, gens, issue_ns, complete_ns, status, load.durable_writes
        )
        return status == 0

    def _flush(self, worker: int, timer: _TimerFlush | None) -> bool:
        ctx = self.context
        self.live.flush_started()
        issue_ns = time.monotonic_ns()
        try:
            ctx.target.flush()
        except OSError as error:
            ctx.log.add_flush(worker, issue_ns, NOT_DONE, error.errno or 5)
            self.live.flush_ended(False)
            return False
        finally:
            if timer is not None:
                timer.done()
        ctx.log.add_flush(worker, issue_ns, time.monotonic_ns(), 0)
        self.live.flush_ended(True)
        return True


TIMER_WORKER = 0xFFFF  # the worker id of flushes issued by the every-T-ms cadence
NOT_SUBMITTED = -2  # issue time of a planned entry the engine never submitted
_STUCK: list[npt.NDArray[np.uint8]] = []  # buffers of requests that never came back


def _own_entries(planner: SlotPlanner, stop: threading.Event) -> Iterator[tuple[Plan, int]]:
    """A slot's own entries in order (stripes layout)."""
    while True:
        plan = planner.next(8)
        for e in range(len(plan)):
            if stop.is_set():
                return
            yield plan, e


class _Stream:
    """One address stream shared by the slots of the threads engine (stream layout): entries
    are taken in order, and one that would overlap a write in flight waits for it."""

    def __init__(self, planner: SlotPlanner) -> None:
        self.planner = planner
        self.cond = threading.Condition()
        self.plan: Plan | None = None
        self.pos = 0
        self.busy: dict[int, tuple[int, int]] = {}  # slot -> LBA range of its write in flight
        self.failed = False

    def entries(self, slot: int, stop: threading.Event) -> Iterator[tuple[Plan, int]]:
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
                if plan.kind[e] == WRITE:
                    self.busy[slot] = (low, high)
            yield plan, e

    def done(self, slot: int, ok: bool) -> None:
        with self.cond:
            self.busy.pop(slot, None)
            self.failed = self.failed or not ok  # a stream stops at its first error
            self.cond.notify_all()


class _TimerFlush:
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
