"""The C parse's per-block summaries (`media.parse_blocks_into`, rig/native/media.c) against the
per-sector truth (`media.parse`: every sector's state and header words), and the checker's view
of them (`verify_reads.Sectors`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rig.check.verify.sectors import SectorSummary
from rig.io import media

BLOCK = 4096
PER_BLOCK = BLOCK // media.SECTOR
UNSET = -7  # what the per-sector fields of a uniform block keep: the parse never writes them
FIELDS = len(media.BLOCK_FIELDS)


def write(campaign: int, lba: int, gen: int, op: int = 5, worker: int = 2) -> npt.NDArray[np.uint8]:
    """One block as the writer puts it on the media."""
    record = media.WriteRecord(campaign, lba, np.array([gen], dtype=np.uint64), worker, op, 1)
    return media.build(record, BLOCK)


def sector(index: int) -> slice:
    return slice(index * media.SECTOR, (index + 1) * media.SECTOR)


def summarise(data: npt.NDArray[np.uint8], per_block: int = PER_BLOCK) -> media.BlockColumns:
    n = len(data) // (per_block * media.SECTOR)
    out = media.BlockColumns(
        np.full(n * per_block, 99, dtype=np.uint8),
        np.zeros(n, dtype=bool),
        np.full(n, 99, dtype=np.uint8),
        np.full((FIELDS, n), UNSET, dtype=np.int64),
        np.full((FIELDS, n * per_block), UNSET, dtype=np.int64),
    )
    media.parse_blocks_into(data, per_block, out)
    return out


def truth(data: npt.NDArray[np.uint8], per_block: int = PER_BLOCK) -> tuple[
    npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.bool_]
]:  # fmt: skip
    """Per sector: state and the summary's fields (from every header word); per block: uniform."""
    s = media.parse(data)
    fields = np.stack([s.campaign, s.lba, s.generation, s.op_seq, s.worker]).view(np.int64)
    n = len(s) // per_block
    state = s.state.reshape(n, per_block)
    key = fields[:3].reshape(3, n, per_block)
    uniform = (
        (state != media.CORRUPT).all(axis=1)
        & (state == state[:, :1]).all(axis=1)
        & (key == key[:, :, :1]).all(axis=(0, 2))
    )
    return s.state, fields, uniform


def assert_summary_is_the_truth(data: npt.NDArray[np.uint8], per_block: int = PER_BLOCK) -> None:
    out = summarise(data, per_block)
    state, fields, uniform = truth(data, per_block)
    assert np.array_equal(out.state, state)
    assert np.array_equal(out.uniform, uniform)
    assert np.array_equal(out.state0, state[::per_block])
    assert np.array_equal(out.head, fields[:, ::per_block])
    per_sector = np.repeat(uniform, per_block)
    assert np.array_equal(out.fields[:, ~per_sector], fields[:, ~per_sector])
    assert (out.fields[:, per_sector] == UNSET).all()  # a uniform block's sectors: not copied


def test_each_kind_of_damage_makes_its_block_not_uniform_and_only_that_one() -> None:
    honest = [write(1, lba, 10 + lba) for lba in range(9)]
    blocks = [b.copy() for b in honest]
    blocks[1][sector(3)] = write(1, 40, 11)[sector(3)]  # misplaced sector, same generation
    blocks[2][sector(5).start + 100] ^= 0x04  # one corrupt sector
    blocks[3][sector(4).start :] = write(1, 3, 99)[sector(4).start :]  # torn
    blocks[4][sector(0)] = write(2, 4, 14)[sector(0)]  # foreign campaign
    blocks[5][:] = 0  # trimmed or never written
    blocks[6][sector(7)] = 0  # one sector zero in a valid block
    blocks[7] = write(1, 70, 17)  # a whole block written for another LBA: uniform, misplaced
    blocks[8] = write(2, 8, 18)  # a whole block of another campaign: uniform
    data = np.concatenate(blocks)
    out = summarise(data)
    expected = [True, False, False, False, False, True, False, True, True]
    assert out.uniform.tolist() == expected
    assert out.state0.tolist() == [media.VALID] * 5 + [media.ZERO] + [media.VALID] * 3
    assert out.head[1].tolist() == [0, 1, 2, 3, 4, 0, 6, 70, 8]  # sector 0's LBA
    assert out.head[2].tolist() == [10, 11, 12, 13, 14, 0, 16, 17, 18]  # sector 0's generation
    assert out.head[0].tolist() == [1, 1, 1, 1, 2, 0, 1, 1, 2]  # sector 0's campaign
    assert_summary_is_the_truth(data)
    # the damaged sector is where the per-sector columns say it is
    states = out.state.reshape(-1, PER_BLOCK)
    assert np.flatnonzero(states[2] == media.CORRUPT).tolist() == [5]
    assert out.fields[1].reshape(-1, PER_BLOCK)[1].tolist() == [1, 1, 1, 40, 1, 1, 1, 1]
    assert out.fields[2].reshape(-1, PER_BLOCK)[3].tolist() == [13] * 4 + [99] * 4


def test_a_block_differing_only_in_op_or_worker_stays_uniform() -> None:
    """Only campaign, LBA and generation decide: the checker reads sector 0's op and worker."""
    block = write(1, 5, 9, op=3)
    block[sector(6)] = write(1, 5, 9, op=4, worker=7)[sector(6)]
    assert summarise(block).uniform.tolist() == [True]
    assert_summary_is_the_truth(block)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([1, 2, 8]),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=4),
    st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), max_size=4),
    st.lists(st.integers(0, 255), max_size=3),
)
def test_summaries_equal_the_per_sector_truth_under_random_damage(
    per_block: int,
    flips: list[tuple[int, int]],
    moves: list[tuple[int, int]],
    zeroed: list[int],
) -> None:
    """Bit flips, sectors copied from elsewhere (another block's; another campaign's; another
    LBA's of the same generation: misplaced; another generation's of the same LBA: torn) and
    zeroed sectors, over blocks of 1, 2 and 8 sectors."""
    gens = np.arange(1, 33, dtype=np.uint64)
    data = media.build(media.WriteRecord(1, 100, gens, 1, 1, 1), per_block * media.SECTOR)
    foreign = media.build(media.WriteRecord(3, 100, gens, 1, 1, 1), per_block * media.SECTOR)
    elsewhere = media.build(media.WriteRecord(1, 900, gens, 1, 1, 1), per_block * media.SECTOR)
    older = media.build(media.WriteRecord(1, 100, gens + 50, 1, 1, 1), per_block * media.SECTOR)
    nsectors = len(data) // media.SECTOR
    for source, target in moves:
        src = (data, foreign, elsewhere, older)[source % 4]
        t = target % nsectors
        s = source % nsectors if src is data else t  # the others differ in one field only
        data[t * 512 : (t + 1) * 512] = src[s * 512 : (s + 1) * 512].copy()
    for offset, value in flips:
        data[offset % len(data)] ^= np.uint8(value)
    for z in zeroed:
        data[(z % nsectors) * 512 : (z % nsectors + 1) * 512] = 0
    assert_summary_is_the_truth(data, per_block)


def test_the_checkers_rows_expand_uniform_blocks_to_their_sectors() -> None:
    """`SectorSummary.rows` gives every sector's state and fields, whether the parse summarised the
    block or copied its sectors."""
    blocks = [write(1, lba, 10 + lba) for lba in range(4)]
    blocks[1][sector(2)] = write(1, 9, 3)[sector(2)]
    blocks[2][:] = 0
    data = np.concatenate(blocks)
    sec = SectorSummary.empty(6, PER_BLOCK)  # rows 0 and 5 never read
    sec.fill(slice(1, 5), data)
    rows = sec.rows(np.arange(6))
    state, fields, _ = truth(data)
    assert np.array_equal(rows.state[1:5].reshape(-1), state)
    assert np.array_equal(rows.lba[1:5].reshape(-1), fields[1])
    assert np.array_equal(rows.gen[1:5].reshape(-1), fields[2])
    assert np.array_equal(rows.campaign[1:5].reshape(-1), fields[0].view(np.uint64))
    assert (rows.state[[0, 5]] == media.ZERO).all() and (rows.gen[[0, 5]] == 0).all()
    assert sec.uniform.tolist() == [True, True, False, True, True, True]


def test_parse_blocks_into_refuses_partial_blocks_and_wrong_layouts() -> None:
    data = np.concatenate([write(1, 0, 1), write(1, 1, 2)])
    with pytest.raises(ValueError, match="whole blocks"):
        media.parse_blocks_into(data[:1024], 3, summarise(data))
    out = summarise(data)
    wrong = media.BlockColumns(out.state, out.uniform, out.state0, out.head[:, ::-1], out.fields)
    with pytest.raises(ValueError, match="layout"):
        media.parse_blocks_into(data, PER_BLOCK, wrong)
    strided = np.zeros((FIELDS, 4 * PER_BLOCK), dtype=np.int64)[:, ::2]
    wrong = media.BlockColumns(out.state, out.uniform, out.state0, out.head, strided)
    with pytest.raises(ValueError, match="layout"):
        media.parse_blocks_into(data, PER_BLOCK, wrong)
    overlapping = np.lib.stride_tricks.as_strided(out.head, (FIELDS, 2), (8, 8))
    wrong = media.BlockColumns(out.state, out.uniform, out.state0, overlapping, out.fields)
    with pytest.raises(ValueError, match="layout"):
        media.parse_blocks_into(data, PER_BLOCK, wrong)
    sec = SectorSummary.empty(3, PER_BLOCK)
    with pytest.raises(ValueError, match="beyond"):
        sec.parser.parse(data, 2)  # two blocks from row 2 of 3


@pytest.mark.parametrize(("rows", "per_block"), [(0, 8), (1, 1), (1, 8), (3, 1)])
def test_the_checkers_columns_take_any_number_of_rows(rows: int, per_block: int) -> None:
    """A check of no block at all (a cycle that wrote nothing) or of one: numpy gives axes of
    length 0 or 1 strides of its choice, which the layout check must not refuse."""
    sec = SectorSummary.empty(rows, per_block)
    assert len(sec.rows(np.arange(rows)).state) == rows
    if rows:
        record = media.WriteRecord(1, 5, np.full(rows, 3, dtype=np.uint64), 0, 1, 1)
        sec.fill(slice(0, rows), media.build(record, per_block * media.SECTOR))
        assert sec.uniform.all() and (sec.lba0 == np.arange(5, 5 + rows)).all()
