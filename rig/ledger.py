"""What the host issued, saw acknowledged and saw made durable, kept off the drive under test.

Two parts:
- `LbaState`: compact per-block arrays over the test region (the committed generation each block
  must read back, and the highest generation ever issued), so a big drive costs bytes per block,
  not Python objects.
- `CycleLog`: the columnar log of one cycle's writes and flushes with host monotonic timestamps.
  `durability()` decides, for a cut at a known instant with an error bound, which writes were
  acknowledged and which were durable (ARCHITECTURE §4).
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

UNKNOWN = np.uint32(
    0xFFFFFFFF
)  # committed content unknown (corrupt read): not judged until rewritten
NOT_DONE = -1  # completion time of a request that never completed


class LbaState:
    """Per-block expected state of one drive's test region (block numbers relative to the drive)."""

    def __init__(self, first_lba: int, nblocks: int) -> None:
        self.first_lba = first_lba
        self.nblocks = nblocks
        # generation each block must read back now (0 = never written by this campaign)
        self.committed = np.zeros(nblocks, dtype=np.uint32)
        # highest generation ever issued per block; the next write uses issued + 1
        self.issued = np.zeros(nblocks, dtype=np.uint32)

    def next_generations(self, lba: int, count: int) -> npt.NDArray[np.uint32]:
        """Reserve generations for a write of `count` blocks at `lba`."""
        index = slice(lba - self.first_lba, lba - self.first_lba + count)
        self.issued[index] += 1
        return self.issued[index].copy()

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, committed=self.committed, issued=self.issued)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, first_lba: int, data: bytes) -> LbaState:
        arrays = np.load(io.BytesIO(data))
        state = cls(first_lba, len(arrays["committed"]))
        state.committed[:] = arrays["committed"]
        state.issued[:] = arrays["issued"]
        return state


@dataclass(frozen=True)
class Durability:
    """Per-write verdict for one cut, aligned with the CycleLog's write columns."""

    acked: npt.NDArray[np.bool_]
    durable: npt.NDArray[np.bool_]
    # for durable writes: ns from acknowledgement, and from the covering flush's completion, to cut
    ack_to_cut_ns: npt.NDArray[np.int64]
    flush_to_cut_ns: npt.NDArray[np.int64]


class CycleLog:
    """Columnar log of one cycle's requests. Workers append concurrently; arrays come out later.

    Per write: worker, op_seq, first_lba, nblocks, the generation of each of its blocks (flat, with
    an offset per write), issue and completion ns, status (0 ok, else errno), durable-write flag.
    Per flush: worker, issue and completion ns, status.
    """

    WRITE_COLUMNS = (
        "worker",
        "op_seq",
        "first_lba",
        "nblocks",
        "gen_offset",
        "issue_ns",
        "complete_ns",
        "status",
        "fua",
    )
    FLUSH_COLUMNS = ("worker", "issue_ns", "complete_ns", "status")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writes: list[tuple[int, ...]] = []
        self._gens: list[npt.NDArray[np.uint32]] = []
        self._gen_total = 0
        self._flushes: list[tuple[int, int, int, int]] = []
        self._frozen: dict[str, npt.NDArray[np.int64]] | None = None
        self._frozen_gens: npt.NDArray[np.uint32] | None = None

    def add_write(
        self,
        worker: int,
        op_seq: int,
        first_lba: int,
        gens: npt.NDArray[np.uint32],
        issue_ns: int,
        complete_ns: int,
        status: int,
        fua: bool,
    ) -> None:
        with self._lock:
            self._writes.append(
                (
                    worker,
                    op_seq,
                    first_lba,
                    len(gens),
                    self._gen_total,
                    issue_ns,
                    complete_ns,
                    status,
                    int(fua),
                )
            )
            self._gens.append(gens)
            self._gen_total += len(gens)
            self._frozen = None

    def add_flush(self, worker: int, issue_ns: int, complete_ns: int, status: int) -> None:
        with self._lock:
            self._flushes.append((worker, issue_ns, complete_ns, status))
            self._frozen = None

    def _columns(self) -> dict[str, npt.NDArray[np.int64]]:
        with self._lock:
            if self._frozen is None:
                writes = np.array(self._writes, dtype=np.int64).reshape(-1, len(self.WRITE_COLUMNS))
                flushes = np.array(self._flushes, dtype=np.int64).reshape(-1, 4)
                cols = {name: writes[:, i] for i, name in enumerate(self.WRITE_COLUMNS)}
                cols.update({f"flush_{n}": flushes[:, i] for i, n in enumerate(self.FLUSH_COLUMNS)})
                self._frozen = cols
                self._frozen_gens = (
                    np.concatenate(self._gens) if self._gens else np.zeros(0, dtype=np.uint32)
                )
            return self._frozen

    def column(self, name: str) -> npt.NDArray[np.int64]:
        return self._columns()[name]

    def generations(self) -> npt.NDArray[np.uint32]:
        self._columns()
        assert self._frozen_gens is not None
        return self._frozen_gens

    @property
    def write_count(self) -> int:
        return len(self.column("worker"))

    @property
    def flush_count(self) -> int:
        return len(self.column("flush_worker"))

    def durability(self, cut_ns: int, error_ns: int) -> Durability:
        """Which writes were acknowledged, and which durable, before a cut at `cut_ns` ± `error_ns`.

        A completion inside the error bound counts as not complete, so uncertainty about the cut
        instant can only make the checker more lenient, never invent a lost durable write.
        """
        horizon = cut_ns - error_ns
        complete = self.column("complete_ns")
        acked = (self.column("status") == 0) & (complete != NOT_DONE) & (complete < horizon)
        f_issue, f_done = self.column("flush_issue_ns"), self.column("flush_complete_ns")
        f_ok = (self.column("flush_status") == 0) & (f_done != NOT_DONE) & (f_done < horizon)
        f_issue, f_done = f_issue[f_ok], f_done[f_ok]
        order = np.argsort(f_issue, kind="stable")
        f_issue, f_done = f_issue[order], f_done[order]
        # earliest completion among flushes issued at or after each point (suffix minimum)
        suffix_min = np.minimum.accumulate(f_done[::-1])[::-1] if len(f_done) else f_done
        first_after = np.searchsorted(f_issue, complete, side="left")
        has_flush = acked & (first_after < len(f_issue))
        covering_done = np.full(len(complete), NOT_DONE, dtype=np.int64)
        covering_done[has_flush] = suffix_min[first_after[has_flush]]
        fua = self.column("fua") == 1
        durable = acked & (fua | has_flush)
        covering_done[acked & fua] = complete[acked & fua]
        ack_to_cut = np.where(acked, cut_ns - complete, NOT_DONE)
        flush_to_cut = np.where(durable, cut_ns - covering_done, NOT_DONE)
        return Durability(acked, durable, ack_to_cut, flush_to_cut)

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        arrays: dict[str, Any] = {"generations": self.generations(), **self._columns()}
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()
