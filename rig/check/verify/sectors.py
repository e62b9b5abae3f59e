"""What the checked blocks' sectors show (docs/checker.md): the C parse's per-block summary
(`SectorSummary`: a block is uniform when no sector is corrupt and every sector carries sector 0's
state, campaign, LBA and generation; per sector only the other blocks), and the per-block facts
the checker's rules start from (`block_facts`), looked at sector by sector only where a block is
not uniform."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rig.io import media

_FIELDS = len(media.BLOCK_FIELDS)
_CAMPAIGN, _LBA, _GEN, _OP, _WORKER = range(_FIELDS)


@dataclass(frozen=True)
class SectorRows:
    """Per sector of some checked blocks (rows × sectors): state and header fields."""

    state: npt.NDArray[np.uint8]
    campaign: npt.NDArray[np.uint64]
    lba: npt.NDArray[np.int64]
    gen: npt.NDArray[np.int64]


@dataclass(frozen=True)
class SectorSummary:
    """What the checked blocks' headers say, summarised per block by the C parse: whether a
    block is `uniform` (no sector corrupt, every sector with sector 0's state, campaign, LBA and
    generation), sector 0's state and fields, and per sector only in blocks that are not uniform
    (`rows` expands any blocks to sectors). Unreadable rows read as uniform zero blocks."""

    uniform: npt.NDArray[np.bool_]
    state0: npt.NDArray[np.uint8]
    head: npt.NDArray[np.int64]  # (field, row): sector 0's fields, media.BLOCK_FIELDS order
    state: npt.NDArray[np.uint8]  # (row, sector)
    fields: npt.NDArray[np.int64]  # (field, row, sector): only rows that are not uniform
    parser: media.BlockParser  # writes into the arrays above

    @classmethod
    def empty(cls, rows: int, per_block: int) -> SectorSummary:
        # per sector: left unset (the parse writes what is read there; `rows` reads sector 0's
        # summary for uniform and unread rows)
        uniform = np.ones(rows, dtype=bool)
        state0 = np.full(rows, media.ZERO, dtype=np.uint8)
        head = np.zeros((_FIELDS, rows), dtype=np.int64)
        state = np.empty((rows, per_block), dtype=np.uint8)
        fields = np.empty((_FIELDS, rows, per_block), dtype=np.int64)
        out = media.BlockColumns(
            state.reshape(-1), uniform, state0, head, fields.reshape(_FIELDS, -1)
        )
        return cls(uniform, state0, head, state, fields, media.BlockParser(per_block, out))

    @property
    def campaign0(self) -> npt.NDArray[np.uint64]:
        return self.head[_CAMPAIGN].view(np.uint64)

    @property
    def lba0(self) -> npt.NDArray[np.int64]:
        return self.head[_LBA]

    @property
    def gen0(self) -> npt.NDArray[np.int64]:
        return self.head[_GEN]

    @property
    def op0(self) -> npt.NDArray[np.int64]:
        return self.head[_OP]

    @property
    def worker0(self) -> npt.NDArray[np.int64]:
        return self.head[_WORKER]

    def rows(self, rows: npt.NDArray[np.int64]) -> SectorRows:
        """Every sector of these rows: uniform rows repeat sector 0's state and fields."""
        same = self.uniform[rows]
        state = self.state[rows]
        fields = self.fields[:, rows]
        state[same] = self.state0[rows[same], None]
        fields[:, same] = self.head[:, rows[same], None]
        return SectorRows(state, fields[_CAMPAIGN].view(np.uint64), fields[_LBA], fields[_GEN])

    def part(self, rows: slice) -> SectorSummary:
        """Rows `rows` as a Sectors of their own (views; `rows` answers relative to them)."""
        return SectorSummary(
            self.uniform[rows], self.state0[rows], self.head[:, rows], self.state[rows],
            self.fields[:, rows], self.parser,
        )  # fmt: skip

    def fill(self, rows: slice, data: npt.NDArray[np.uint8]) -> None:
        """Parse `data` (the blocks of `rows`) straight into these rows: one C pass."""
        if rows.stop - rows.start != len(data) // (self.state.shape[1] * media.SECTOR):
            raise ValueError("fill: data is not the blocks of these rows")
        self.parser.parse(data, rows.start)


def sector_gens(
    rows: SectorRows, campaign: int
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per sector of `rows`: ours (valid, this campaign's), its generation (0 for a sector that is
    all zero or another campaign's: nothing of ours), and the LBA its header names."""
    ours = (rows.state == media.VALID) & (rows.campaign == np.uint64(campaign))
    return ours, np.where(ours, rows.gen, 0), rows.lba


@dataclass(frozen=True)
class BlockFacts:
    """Per checked block, what its sectors show."""

    ours0: npt.NDArray[np.bool_]  # sector 0 is valid and this campaign's
    gen: npt.NDArray[np.int64]  # sector 0's generation (0: nothing of ours)
    corrupt: npt.NDArray[np.bool_]  # a sector fails its checksum
    misplaced: npt.NDArray[np.bool_]  # a sector of ours written for another LBA
    mixed: npt.NDArray[np.bool_]  # sectors of different generations
    placed: npt.NDArray[np.bool_]  # a sector of ours written for this LBA


def block_facts(campaign: int, checked: npt.NDArray[np.int64], sec: SectorSummary) -> BlockFacts:
    """From the parse's per-block summary: a uniform block's sectors are all sector 0 (not
    corrupt, one generation), so only the others are looked at sector by sector."""
    ours0 = (sec.state0 == media.VALID) & (sec.campaign0 == np.uint64(campaign))
    corrupt = np.zeros(len(checked), dtype=bool)
    mixed = np.zeros(len(checked), dtype=bool)
    misplaced = ours0 & (sec.lba0 != checked)
    placed = ours0 & ~misplaced
    odd = np.flatnonzero(~sec.uniform)
    if len(odd):
        rows = sec.rows(odd)
        ours, sector_gen, lba = sector_gens(rows, campaign)
        corrupt[odd] = (rows.state == media.CORRUPT).any(axis=1)
        misplaced[odd] = (ours & (lba != checked[odd, None])).any(axis=1)
        mixed[odd] = (sector_gen != sector_gen[:, :1]).any(axis=1)
        placed[odd] = (ours & (lba == checked[odd, None])).any(axis=1)
    return BlockFacts(ours0, np.where(ours0, sec.gen0, 0), corrupt, misplaced, mixed, placed)
