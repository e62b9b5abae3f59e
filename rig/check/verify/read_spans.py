"""The checker's rules applied batch by batch (docs/checker.md; docs/decisions.md, "Rules run
per group of batches while later batches are read"): each batch of checked blocks, once read
and parsed, gets its sectors' evidence, and each group of batches
(`JUDGE_ROWS`) its classes and its settled committed state (written back), and its blocks'
writes are counted for the rules about writes (unserializable writes, non-durable outcomes), all
while the next batches are read. After the last read only the last group's rules and the
findings are left (and, for a drive whose atomic unit is larger than a block, the unit tears,
whose units may span batches)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rig.check.verify.evidence import CycleWrites, SeenRows, ledgered
from rig.check.verify.findings import Finding
from rig.check.verify.reads import Reads
from rig.check.verify.rules import (
    Classified,
    WriteTally,
    atomic_tears,
    claims,
    merge,
    nondurable_outcomes,
    resolve,
    settle,
    settle_discards,
    unserializable,
)
from rig.io.chunked import ChunkedArray

# Batches are judged in groups of at least this many rows (4 batches of 4 KiB blocks): judged
# one by one, the rules' per-call work (the sparse state's write-back above all) cost about 10 %
# more CPU per check than one pass; the tail keeps at most one group's rules (judged whole after
# the last read, they were most of it: 6.5 ms for 131,072 rows on the loaded machine)
JUDGE_ROWS = 1 << 14


class Judging:
    """Every checked block's class and settled state, filled by `batch` in the order batches
    are read (`ReadBack.collect(judging.take)`); `findings` once all are in. A block's class
    depends on its own evidence alone, so batches give exactly the classes of one pass over all
    blocks (tests/check/test_read_spans.py compares both on random cycles). Each group's settled
    state goes into `state` (the committed generations of the rows `idx`) at once; a check that
    stops before its end (the drive gone, an error) puts back what it wrote (`undo`), so the
    state is then as it was before the check."""

    def __init__(
        self,
        campaign: int,
        cyc: CycleWrites,
        checked: npt.NDArray[np.int64],
        state: ChunkedArray,
        idx: npt.NDArray[np.int64],
        atomic_blocks: int = 1,
        trimmed: ChunkedArray | None = None,
        zeroes: bool = False,
    ) -> None:
        """`trimmed`: the discard each block's state stands for (`LbaState.trimmed`), kept up
        to date with the state; `zeroes`: the drive promises zeroes after a discard."""
        n = len(checked)
        committed = state[idx].astype(np.int64)
        self.campaign, self.cyc, self.checked, self.committed = campaign, cyc, checked, committed
        self.state, self.idx, self.judged = state, idx, 0
        self.atomic_blocks = atomic_blocks
        self.trimmed_state, self.zeroes = trimmed, zeroes
        self.trimmed = None if trimmed is None else trimmed[idx].astype(np.int64)
        # a check where no discard is involved leaves the discard state alone: no cost
        self.discards = self.trimmed is not None and (
            bool(cyc.discard.any()) or bool(self.trimmed.any())
        )
        self.led = ledgered(cyc, checked, committed, self.trimmed)
        cyc.keys  # noqa: B018 (sorted now, while the first batches are read)
        self.seen = SeenRows(campaign, cyc, checked)
        self.klass = np.zeros(n, dtype=np.uint8)
        self.settled = np.zeros(n, dtype=np.int64)
        self.held = np.zeros(n, dtype=np.int64)  # the generation of a sound block; -1 otherwise
        self.obs_gen = np.zeros(n, dtype=np.int64)
        self.tally = WriteTally(cyc, checked)
        # the cycle's block entries by row, to find a batch's entries by two binary searches (a
        # sequential cycle's come in row order already)
        pos = self.tally.pos
        self.order: npt.NDArray[np.int64] | None = None
        if len(pos) > 1 and not (pos[1:] >= pos[:-1]).all():
            self.order = np.argsort(pos, kind="stable")
            pos = pos[self.order]
        self.entry_rows = pos

    def take(self, rows: slice, reads: Reads) -> None:
        """Take the blocks of `rows` (read and parsed; batches come in order): their sectors'
        evidence now, the rules once `JUDGE_ROWS` rows or the last batch are in."""
        self.seen.fill(rows, self.led, reads)
        if rows.stop - self.judged >= JUDGE_ROWS or rows.stop == len(self.checked):
            self._judge(slice(self.judged, rows.stop), reads.readable)

    def _judge(self, rows: slice, readable: npt.NDArray[np.bool_]) -> None:
        ev = self.seen.evidence(self.led, readable, rows)
        self.klass[rows] = resolve(len(ev.readable), claims(ev))
        self.settled[rows] = settle(ev, self.committed[rows])
        if self.discards:
            assert self.trimmed is not None and self.trimmed_state is not None
            old = self.trimmed[rows]
            self.settled[rows], new = settle_discards(ev, self.settled[rows], old, self.zeroes)
            moved = np.flatnonzero((old != 0) | (new != 0))
            self.trimmed_state[self.idx[rows][moved]] = new[moved].astype(np.uint32)
        self.state[self.idx[rows]] = self.settled[rows].astype(np.uint32)
        self.judged = rows.stop
        self.held[rows] = np.where(ev.sound, ev.gen, -1)
        self.obs_gen[rows] = ev.obs_gen
        if self.atomic_blocks == 1:  # (else a unit's tear may still change a class here)
            self._count_writes(rows, readable)

    def undo(self) -> None:
        """Put back the committed state of the rows written so far."""
        done = slice(0, self.judged)
        self.state[self.idx[done]] = self.committed[done].astype(np.uint32)
        if self.discards:
            assert self.trimmed is not None and self.trimmed_state is not None
            self.trimmed_state[self.idx[done]] = self.trimmed[done].astype(np.uint32)
        self.judged = 0

    def _count_writes(self, rows: slice, readable: npt.NDArray[np.bool_]) -> None:
        lo, hi = np.searchsorted(self.entry_rows, [rows.start, rows.stop])
        entries = slice(int(lo), int(hi)) if self.order is None else self.order[lo:hi]
        self.tally.add(entries, self.klass, self.held, self.obs_gen, readable)

    def findings(self, reads: Reads) -> tuple[list[Finding], int, int]:
        """The block findings (merged into ranges), the non-durable writes' allowed losses and
        the cut's unserializable writes; how many writes were non-durable, how many of them
        survived."""
        cyc, checked, klass = self.cyc, self.checked, self.klass
        if self.atomic_blocks > 1:
            atomic_tears(cyc, checked, self.held, klass, self.atomic_blocks)
            self._count_writes(slice(0, len(checked)), reads.readable)
        led, seen = self.led, self.seen.columns
        blocks = Classified(
            checked,
            klass,
            led.floor,
            self.obs_gen,
            led.floor_write,
            seen["obs_op"],
            seen["obs_worker"],
            reads.sectors,
            self.campaign,
            seen["zeroed"],
        )
        found = list(merge(blocks, cyc))
        allowed, nondurable, survived = nondurable_outcomes(self.tally, self.obs_gen)
        found.extend(allowed)
        found.extend(unserializable(self.tally))
        return found, nondurable, survived
