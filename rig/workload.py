"""The write workload of one cycle: several workers, each with one request in flight.

Every worker owns a disjoint stripe of the test region, so no two requests in flight ever overlap:
what reads back after a cut can then be attributed to exactly one write. Queue depth = workers.
Each request is timestamped on the host monotonic clock right before issue and right after
completion, and logged in the cycle's `CycleLog`.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

import numpy as np

from rig import media
from rig.blockio import BlockTarget
from rig.ledger import NOT_DONE, CycleLog, LbaState


@dataclass(frozen=True)
class Workload:
    workers: int = 8
    write_blocks: tuple[int, ...] = (1, 2, 8, 32)  # sizes drawn uniformly per write
    flush_every: int = 16  # writes per worker between flushes; 0 = never flush
    durable_writes: bool = False  # every write RWF_DSYNC / FUA
    sequential: bool = False  # each worker writes its stripe in order instead of randomly


@dataclass(frozen=True)
class WriterContext:
    campaign: int
    target: BlockTarget
    state: LbaState
    log: CycleLog
    stop: threading.Event


class Writer:
    """Runs the workload's workers until `stop` is set or each worker hits an I/O error."""

    def __init__(self, workload: Workload, context: WriterContext, seed: int) -> None:
        self.workload = workload
        self.context = context
        self._seed = seed
        self._threads: list[threading.Thread] = []
        self._op_seq_base = seed << 20  # op counts unique across cycles of a campaign

    def start(self) -> None:
        state = self.context.state
        stripe = state.nblocks // self.workload.workers
        largest = max(self.workload.write_blocks)
        if stripe < largest:
            raise ValueError(f"test region too small: {stripe} blocks per worker < {largest}")
        for worker in range(self.workload.workers):
            first = state.first_lba + worker * stripe
            thread = threading.Thread(
                target=self._run_worker,
                args=(worker, first, stripe, random.Random(self._seed * 1000 + worker)),
                name=f"writer-{worker}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def join(self, timeout_s: float) -> bool:
        """Wait for every worker; False if some are still stuck in I/O after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _run_worker(self, worker: int, first: int, stripe: int, rng: random.Random) -> None:
        ctx, load = self.context, self.workload
        block = ctx.target.block_size
        cursor = 0
        since_flush = 0
        op_seq = self._op_seq_base
        while not ctx.stop.is_set():
            count = rng.choice(load.write_blocks)
            if load.sequential:
                if cursor + count > stripe:
                    cursor = 0
                lba = first + cursor
                cursor += count
            else:
                lba = first + rng.randrange(0, stripe - count + 1)
            op_seq += 1
            gens = ctx.state.next_generations(lba, count)
            issue_ns = time.monotonic_ns()
            record = media.WriteRecord(
                campaign=ctx.campaign,
                first_lba=lba,
                generations=gens.astype(np.uint64),
                worker=worker,
                op_seq=op_seq,
                issued_ns=issue_ns,
                flags=media.FLAG_FUA if load.durable_writes else 0,
            )
            data = media.build(record, block)
            status = 0
            try:
                ctx.target.write(lba, data, durable=load.durable_writes)
                complete_ns = time.monotonic_ns()
            except OSError as error:
                complete_ns, status = NOT_DONE, error.errno or 5
            ctx.log.add_write(
                worker, op_seq, lba, gens, issue_ns, complete_ns, status, load.durable_writes
            )
            if status:
                return
            since_flush += 1
            if load.flush_every and since_flush >= load.flush_every:
                since_flush = 0
                if not self._flush(worker):
                    return

    def _flush(self, worker: int) -> bool:
        ctx = self.context
        issue_ns = time.monotonic_ns()
        try:
            ctx.target.flush()
        except OSError as error:
            ctx.log.add_flush(worker, issue_ns, NOT_DONE, error.errno or 5)
            return False
        ctx.log.add_flush(worker, issue_ns, time.monotonic_ns(), 0)
        return True
