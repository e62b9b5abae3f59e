"""What each slot of a cycle's workload writes: the workload's parameters, and the
`SlotPlanner` that plans addresses, sizes, generations and flushes a batch at a time (numpy).
The writer (rig/io/workload.py) carries the plans out with one of its two engines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rig.config.tables import Table
from rig.errors import UserError
from rig.io.ledger import LbaState

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

WRITE, FLUSH, DISCARD = 0, 1, 2  # a discard's entry is a write's: a range and its generations


@dataclass(frozen=True)
class Workload:
    workers: int = 8  # slots = queue depth
    write_blocks: tuple[int, ...] = (1, 2, 8, 32)  # sizes drawn uniformly per write (mix uniform)
    size_mix: str = "uniform"  # or "jesd219": JESD219A enterprise transfer sizes
    lba_skew: str = "uniform"  # or "jesd219": 50 % of writes to the first 5 % of each stripe ...
    flush_every: int = 4  # writes per slot between flushes (docs/campaign.md); 0 = never
    flush_every_ms: float = 0.0  # also a flush every T ms across all slots; 0 = off
    durable_writes: bool = False  # every write RWF_DSYNC / FUA
    sequential: bool = False  # each slot writes its stripe in order instead of randomly
    layout: str = "stripes"  # or "stream": all slots share one address stream (as fio's QD)
    engine: str = "auto"  # native when the target has a file descriptor, else threads
    # share of operations that discard their range instead of writing it (TRIM / UNMAP /
    # deallocate through the target: docs/checker.md, "Discards"); a share above 0 runs the
    # threads engine (the native engine only writes)
    discard_share: float = 0.0


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
class WorkloadPlan:
    """The next entries of one slot: writes (with their generations) and flushes, in order."""

    kind: npt.NDArray[np.uint8]
    lba: npt.NDArray[np.int64]
    nblocks: npt.NDArray[np.uint32]
    gen_offset: npt.NDArray[np.int64]  # into gens, per entry (flushes: where the next would go)
    gens: npt.NDArray[np.uint32]
    op_seq: npt.NDArray[np.uint64]

    def __len__(self) -> int:
        return len(self.kind)

    def tail(self, start: int) -> WorkloadPlan:
        """Entries from `start` on, with their generations."""
        base = int(self.gen_offset[start]) if start < len(self) else len(self.gens)
        return WorkloadPlan(
            self.kind[start:],
            self.lba[start:],
            self.nblocks[start:],
            self.gen_offset[start:] - base,
            self.gens[base:],
            self.op_seq[start:],
        )

    def then(self, other: WorkloadPlan) -> WorkloadPlan:
        return WorkloadPlan(
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
        self._carry: WorkloadPlan | None = None  # planned entries a batch did not get to, in order

    def give_back(self, plan: WorkloadPlan, start: int) -> None:
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

    def next(self, writes: int) -> WorkloadPlan:
        """Entries given back first, then `writes` new writes with the flushes the cadence puts
        among them."""
        fresh = self._fresh(writes)
        carry, self._carry = self._carry, None
        return fresh if carry is None else carry.then(fresh)

    def _fresh(self, writes: int) -> WorkloadPlan:
        counts = self.rng.choice(self.sizes, writes, p=self.weights)
        lbas = self.first + self._offsets(counts)
        if self.intent is not None:  # before any of these can be issued
            self.intent(lbas, counts)
        if len(self.sizes) == 1 and self.sizes[0] == 1:  # one-block writes: a block per write
            blocks = lbas
        else:
            blocks = np.repeat(lbas, counts) + (
                np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            )
        gens = self.state.reserve(blocks)  # atomic: planners of all slots share the state
        ops = self.op_seq + 1 + np.arange(writes, dtype=np.uint64)
        self.op_seq += writes
        gen_offset = np.cumsum(counts) - counts
        every = self.load.flush_every
        kinds = np.full(writes, WRITE, dtype=np.uint8)
        if self.load.discard_share > 0:  # (drawn only then: other plans keep their stream)
            kinds[self.rng.random(writes) < self.load.discard_share] = DISCARD
        if not every:
            kind = kinds
            return WorkloadPlan(kind, lbas, counts.astype(np.uint32), gen_offset, gens, ops)
        # a flush after every `every`-th write of this slot (the count runs on across batches)
        flush_after = (self.since_flush + np.arange(1, writes + 1)) % every == 0
        self.since_flush = (self.since_flush + writes) % every
        position = np.arange(writes) + np.cumsum(flush_after) - flush_after
        total = writes + int(flush_after.sum())
        kind = np.full(total, FLUSH, dtype=np.uint8)
        kind[position] = kinds
        lba = np.zeros(total, dtype=np.int64)
        lba[position] = lbas
        nblocks = np.zeros(total, dtype=np.uint32)
        nblocks[position] = counts
        offsets = np.cumsum(nblocks, dtype=np.int64) - nblocks  # flushes: where the next goes
        op = np.zeros(total, dtype=np.uint64)
        op[position] = ops
        return WorkloadPlan(kind, lba, nblocks, offsets, gens, op)


# (first LBAs, blocks) of writes about to be planned: the intent log (rig/check/intent.py)
IntentSink = Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], None]

TIMER_WORKER = 0xFFFF  # the worker id of flushes issued by the every-T-ms cadence
NOT_SUBMITTED = -2  # issue time of a planned entry the engine never submitted


def settings(load_t: Table) -> Workload:
    """The campaign file's [workload] table."""
    sizes = load_t.get("write_blocks", list, [1, 2, 8, 32])
    if not sizes or not all(isinstance(s, int) and 1 <= s <= 4096 for s in sizes):
        raise UserError("campaign: [workload].write_blocks must be whole numbers from 1 to 4096")
    workload = Workload(
        workers=load_t.whole("workers", 8, 1, 256),
        write_blocks=tuple(sizes),
        size_mix=load_t.choice("size_mix", SIZE_MIXES),
        lba_skew=load_t.choice("lba_skew", LBA_SKEWS),
        flush_every=load_t.whole("flush_every", Workload.flush_every, 0, 1_000_000),
        flush_every_ms=float(load_t.number("flush_every_ms", 0.0, 0, 3_600_000)),
        durable_writes=load_t.get("durable_writes", bool, False),
        sequential=load_t.get("sequential", bool, False),
        layout=load_t.choice("layout", LAYOUTS),
        engine=load_t.choice("engine", ENGINES),
        discard_share=discard_share_setting(load_t),
    )
    load_t.done()
    if workload.discard_share > 0 and workload.engine == "native":
        raise UserError(
            'campaign: [workload].discard_share needs the threads engine (engine = "auto" or'
            ' "threads"): the native engine only writes'
        )
    return workload


def discard_share_setting(load_t: Table) -> float:
    """[workload].discard_share: a fraction of operations, 0 to 1."""
    share = load_t.get("discard_share", (int, float), 0.0)
    if isinstance(share, bool) or not 0.0 <= float(share) <= 1.0:
        raise UserError(
            f"campaign: [workload].discard_share must be a fraction from 0 to 1 (got {share!r})"
        )
    return float(share)
