"""A sparse u32 array over a drive's blocks, stored by leaf (the storage of rig/io/ledger.py's
`LbaState`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Index = npt.NDArray[np.integer[Any]] | slice | int


class ChunkedArray:
    """A u32 array over [0, n) that stores only the leaves that were ever set to something.

    Unset entries read as zero. Storage is a pool of leaves of `LEAF` (64) entries, found through
    a two-level directory: a top level over groups of 65,536 entries, and for each group that was
    touched a 1,024-entry table of leaf rows. Reads and writes stay vectorised (no Python loop
    per leaf). Memory, for a 4 TB drive in 4 KiB blocks (2^30 entries): 64 KiB of top level,
    plus 4 KiB per 256 MiB group touched, plus 272 B per 64-entry leaf touched (256 B of values,
    16 B of bookkeeping). So a random write costs about 0.3 KiB the first time it lands in a
    leaf, and a fully written array 4.25 B per entry; the pool grows by half when full.
    """

    LEAF_SHIFT = 6
    LEAF = 1 << LEAF_SHIFT  # entries per leaf: 256 KiB of a drive in 4 KiB blocks
    GROUP_SHIFT = 16  # entries per group: 256 MiB of a drive in 4 KiB blocks
    SUBS = 1 << (GROUP_SHIFT - LEAF_SHIFT)  # leaves per group

    def __init__(self, n: int) -> None:
        self.n = n
        groups = (n + (1 << self.GROUP_SHIFT) - 1) >> self.GROUP_SHIFT
        self._top = np.full(groups, -1, dtype=np.int32)  # group -> row of _mid, -1 = untouched
        self._mid = np.full((0, self.SUBS), -1, dtype=np.int32)  # (group row, sub) -> leaf row
        self._groups = 0
        self._leaves = np.zeros((0, self.LEAF), dtype=np.uint32)
        self._base = np.zeros(0, dtype=np.int64)  # first position of each leaf
        self._count = np.zeros(0, dtype=np.int64)  # non-zero entries of each leaf
        self._used = 0

    def __len__(self) -> int:
        return self.n

    def __eq__(self, other: object) -> bool:
        # `array != 0` on a dense array means something else; refuse it instead of answering
        raise TypeError("compare values read with array[index], or use nonzero()")

    __hash__ = None  # type: ignore[assignment]

    @property
    def nbytes(self) -> int:
        """Memory held by the directories and the leaf pool."""
        parts = (self._top, self._mid, self._leaves, self._base, self._count)
        return sum(part.nbytes for part in parts)

    @property
    def leaves_allocated(self) -> int:
        return self._used

    def _positions(self, index: Index) -> npt.NDArray[np.int64]:
        if isinstance(index, slice):
            return np.arange(*index.indices(self.n), dtype=np.int64)
        pos = np.asarray(index, dtype=np.int64).reshape(-1)
        if len(pos) and (pos.min() < 0 or pos.max() >= self.n):
            raise IndexError(f"index outside 0..{self.n - 1}")
        return pos

    def _rows(self, pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Leaf row of each position, -1 where its leaf was never allocated."""
        leaf = pos >> self.LEAF_SHIFT
        if len(leaf) > self.LEAF:
            # Runs of one leaf (a sequential writer's blocks): each run's leaf is looked up
            # once; the directory's fancy indexing per position was most of the planner's CPU.
            starts = np.flatnonzero(leaf[1:] != leaf[:-1]) + 1
            if 8 * len(starts) < len(leaf):
                starts = np.r_[0, starts]
                lengths = np.diff(np.r_[starts, len(leaf)])
                return np.repeat(self._leaf_rows(leaf[starts]), lengths)
        return self._leaf_rows(leaf)

    def _leaf_rows(self, leaf: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        group = self._top[leaf >> (self.GROUP_SHIFT - self.LEAF_SHIFT)]
        sub = leaf & (self.SUBS - 1)
        if len(group) and int(group.min()) >= 0:  # every group touched: no mask needed
            return self._mid[group, sub].astype(np.int64)
        rows = np.full(len(leaf), -1, dtype=np.int64)
        has = group >= 0
        rows[has] = self._mid[group[has], sub[has]]
        return rows

    def __getitem__(self, index: Index) -> npt.NDArray[np.uint32]:
        pos = self._positions(index)
        rows = self._rows(pos)
        out = np.zeros(len(pos), dtype=np.uint32)
        present = rows >= 0
        out[present] = self._leaves[rows[present], pos[present] & (self.LEAF - 1)]
        return out

    def __setitem__(self, index: Index, values: npt.ArrayLike) -> None:
        pos = self._positions(index)
        vals = np.broadcast_to(np.asarray(values, dtype=np.uint32), pos.shape)
        increasing = isinstance(index, slice) or bool((pos[1:] > pos[:-1]).all())
        if not increasing:  # (the writer's reservations come sorted and distinct)
            order = np.argsort(pos, kind="stable")
            ordered = pos[order]
            if len(pos) > 1 and (ordered[1:] == ordered[:-1]).any():  # the last write wins
                last = np.r_[ordered[1:] != ordered[:-1], True]
                pos, vals = ordered[last], vals[order][last]
        rows = self._rows(pos)
        missing = rows < 0
        if missing.any():
            # only leaves that receive a non-zero value need storage
            self._allocate(_unique(pos[missing & (vals != 0)] >> self.LEAF_SHIFT))
            rows = self._rows(pos)
            keep = rows >= 0
            pos, vals, rows = pos[keep], vals[keep], rows[keep]
        cols = pos & (self.LEAF - 1)
        change = (vals != 0).astype(np.int8) - (self._leaves[rows, cols] != 0)
        moved = np.flatnonzero(change)  # (a checker's write-back mostly keeps zero as zero)
        if len(moved):
            weights = change[moved].astype(np.int64)
            self._count += np.bincount(rows[moved], weights, len(self._count)).astype(np.int64)
        self._leaves[rows, cols] = vals

    def _allocate(self, leaves: npt.NDArray[np.int64]) -> None:
        """Storage for these (unique, unallocated) leaf numbers."""
        if len(leaves) == 0:
            return
        groups = _unique(leaves >> (self.GROUP_SHIFT - self.LEAF_SHIFT))
        new_groups = groups[self._top[groups] < 0]
        if len(new_groups):
            self._mid = _grown(self._mid, self._groups + len(new_groups), -1)
            self._top[new_groups] = np.arange(self._groups, self._groups + len(new_groups))
            self._groups += len(new_groups)
        needed = self._used + len(leaves)
        self._leaves = _grown(self._leaves, needed, 0)
        self._base = _grown(self._base, needed, 0)
        self._count = _grown(self._count, needed, 0)
        rows = np.arange(self._used, needed)
        self._base[rows] = leaves << self.LEAF_SHIFT
        group_rows = self._top[leaves >> (self.GROUP_SHIFT - self.LEAF_SHIFT)]
        self._mid[group_rows, leaves & (self.SUBS - 1)] = rows
        self._used = needed

    def count_nonzero(self) -> int:
        return int(self._count[: self._used].sum())

    def sample_nonzero(self, k: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """`k` distinct positions holding non-zero values, uniformly at random, sorted. Cost
        O(k) leaves read plus a pass over the per-leaf counts, never over the values."""
        total = self.count_nonzero()
        k = min(k, total)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        ranks = np.sort(rng.choice(total, k, replace=False))
        counts = self._count[: self._used]
        ends = np.cumsum(counts)
        which = np.searchsorted(ends, ranks, side="right")  # leaf holding each rank
        within = ranks - (ends[which] - counts[which])
        picked = np.empty(k, dtype=np.int64)
        for leaf in _unique(which).tolist():
            mine = which == leaf
            cols = np.flatnonzero(self._leaves[leaf])[within[mine]]
            picked[mine] = self._base[leaf] + cols
        return np.sort(picked)

    def nonzero(self) -> npt.NDArray[np.int64]:
        """Sorted positions holding a non-zero value (cost: allocated leaves only)."""
        r, c = np.nonzero(self._leaves[: self._used])
        return np.sort(self._base[r] + c)

    def to_arrays(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
        """(leaf numbers, their values): everything needed to rebuild the array."""
        return self._base[: self._used] >> self.LEAF_SHIFT, self._leaves[: self._used]

    @classmethod
    def from_arrays(
        cls, n: int, leaves: npt.NDArray[np.int64], values: npt.NDArray[np.uint32]
    ) -> ChunkedArray:
        array = cls(n)
        array._allocate(leaves.astype(np.int64))
        array._leaves[: len(leaves)] = values
        array._count[: len(leaves)] = np.count_nonzero(values, axis=1)
        return array


def _unique(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Sorted distinct values (sort-based: numpy's hash-based unique is slow on big int arrays)."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _grown(array: npt.NDArray[Any], rows: int, fill: int) -> npt.NDArray[Any]:
    """`array` with room for at least `rows` rows (by half again when it must grow)."""
    if rows <= len(array):
        return array
    grown = np.full((max(rows, len(array) * 3 // 2, 16), *array.shape[1:]), fill, array.dtype)
    grown[: len(array)] = array
    return grown
