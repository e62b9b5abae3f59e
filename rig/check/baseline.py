"""The test region as the campaign found it: blocks holding bytes that are no record.

A campaign's state says "generation 0" for a block it never wrote, and the checker judges such a
block as known to read zeroes or a record (of another campaign: not ours, generation 0). On a used
drive a never-written block can hold anything (an old file system, another tool's pattern); a
check that reads it (a full scan, a recovery burst's, a firmware activation's) would report its
bytes as old data damaged. Read once before the first cycle, such blocks start as unknown: they
are judged again once a write of the campaign reaches them, or once they read back whole
(docs/checker.md, "Blocks the campaign never wrote"). A drive that garbles a never-written block
that held zeroes or a record is still found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from rig.io import media

CHUNK_BLOCKS = 256  # blocks per read


def region_chunks(
    read: Callable[[int, int], npt.NDArray[np.uint8]], first: int, nblocks: int
) -> Iterator[tuple[int, int, media.Sectors]]:
    """The region read and parsed a chunk at a time: (first LBA, blocks, its sectors)."""
    for start in range(first, first + nblocks, CHUNK_BLOCKS):
        count = min(CHUNK_BLOCKS, first + nblocks - start)
        yield start, count, media.parse(read(start, count))


def foreign_blocks(
    read: Callable[[int, int], npt.NDArray[np.uint8]], first: int, nblocks: int, block_size: int
) -> npt.NDArray[np.int64]:
    """Offsets (from `first`) of the region's blocks with a sector that is neither zeroes nor a
    valid record."""
    per_block = block_size // media.SECTOR
    found = [
        np.flatnonzero((sectors.state == media.CORRUPT).reshape(count, per_block).any(axis=1))
        + (start - first)
        for start, count, sectors in region_chunks(read, first, nblocks)
    ]
    return np.concatenate(found).astype(np.int64) if found else np.zeros(0, dtype=np.int64)
