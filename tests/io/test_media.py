import zlib

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rig.io import media


def _record(first_lba: int = 100, nblocks: int = 3, gen0: int = 1) -> media.WriteRecord:
    gens = np.arange(gen0, gen0 + nblocks, dtype=np.uint64)
    return media.WriteRecord(
        campaign=7, first_lba=first_lba, generations=gens, worker=2, op_seq=9, issued_ns=123456789
    )


def test_every_sector_carries_its_header() -> None:
    data = media.build(_record(), 4096)
    sectors = media.parse(data)
    assert len(data) == 3 * 4096
    assert (sectors.state == media.VALID).all()
    assert sectors.lba.tolist() == [100] * 8 + [101] * 8 + [102] * 8
    assert sectors.generation.tolist() == [1] * 8 + [2] * 8 + [3] * 8
    assert sectors.sector_index.tolist() == list(range(8)) * 3
    assert set(sectors.first_lba.tolist()) == {100}
    assert set(sectors.nblocks.tolist()) == {3}
    assert set(sectors.worker.tolist()) == {2}
    assert set(sectors.op_seq.tolist()) == {9}
    assert set(sectors.campaign.tolist()) == {7}


def test_buffer_is_aligned_for_direct_io() -> None:
    data = media.build(_record(), 4096)
    assert data.ctypes.data % 4096 == 0


def test_payload_is_incompressible_beyond_the_header() -> None:
    data = media.build(_record(nblocks=64), 4096)
    # 72 of 512 bytes are header; the payload must not compress at all
    assert len(zlib.compress(data.tobytes(), 9)) > 0.85 * len(data)


def test_same_fields_regenerate_the_same_bytes() -> None:
    assert np.array_equal(media.build(_record(), 4096), media.build(_record(), 4096))
    other = media.build(_record(gen0=2), 4096)
    assert not np.array_equal(media.build(_record(), 4096)[72:512], other[72:512])


def test_zero_sectors_are_told_apart_from_corrupt_ones() -> None:
    data = np.zeros(1024, dtype=np.uint8)
    data[600] = 1
    assert media.parse(data).state.tolist() == [media.ZERO, media.CORRUPT]


@given(st.integers(0, 3 * 4096 - 1), st.integers(0, 7))
def test_any_single_bit_flip_is_caught_in_its_sector_only(offset: int, bit: int) -> None:
    data = media.build(_record(), 4096)
    data[offset] ^= np.uint8(1 << bit)
    state = media.parse(data).state
    broken = offset // 512
    assert state[broken] == media.CORRUPT
    assert (np.delete(state, broken) == media.VALID).all()


@given(st.integers(1, 7))
def test_a_consistent_header_over_foreign_payload_is_corrupt(sector: int) -> None:
    a = media.build(_record(gen0=1), 4096)
    b = media.build(_record(gen0=5), 4096)
    mixed = a.copy()
    # header of one write, payload of another: checksum recomputed would not save it
    start = sector * 512
    mixed[start + 72 : start + 512] = b[start + 72 : start + 512]
    assert media.parse(mixed).state[sector] == media.CORRUPT
