"""The C record kernel against the numpy reference, byte for byte (rig/native/media.c)."""

from __future__ import annotations

import ctypes
import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rig.io import media

U64_MAX = (1 << 64) - 1

records = st.builds(
    lambda campaign, first, gens, worker, op, ts, flags: media.WriteRecord(
        campaign, first, np.array(gens, dtype=np.uint64), worker, op, ts, flags
    ),
    st.integers(0, U64_MAX),
    st.integers(0, (1 << 40)),
    st.lists(st.integers(0, (1 << 32) - 1), min_size=1, max_size=6),
    st.integers(0, 0xFFFF),
    st.integers(0, U64_MAX),
    st.integers(0, U64_MAX),
    st.integers(0, 0xFFFF),
)
block_sizes = st.sampled_from([512, 1024, 4096, 8192])


@settings(max_examples=200, deadline=None)
@given(records, block_sizes)
def test_c_build_equals_the_numpy_reference(record: media.WriteRecord, block: int) -> None:
    assert np.array_equal(media.build(record, block), media.reference_build(record, block))


@settings(max_examples=200, deadline=None)
@given(
    records,
    block_sizes,
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8),
    st.lists(st.integers(0, 1 << 20), max_size=3),
)
def test_c_check_equals_the_numpy_reference_on_damaged_data(
    record: media.WriteRecord,
    block: int,
    flips: list[tuple[int, int]],
    zeroed: list[int],
) -> None:
    data = media.reference_build(record, block)
    for offset, value in flips:  # arbitrary byte damage
        data[offset % len(data)] ^= np.uint8(value)
    for sector in zeroed:  # whole sectors wiped, as trimmed or unmapped ones read
        start = (sector % (len(data) // 512)) * 512
        data[start : start + 512] = 0
    assert np.array_equal(media.check_state(data), media.reference_state(data))


@settings(max_examples=100, deadline=None)
@given(records, st.integers(1, 7))
def test_c_check_rejects_a_resealed_header_over_foreign_payload(
    record: media.WriteRecord, sector: int
) -> None:
    """A header whose checksum was recomputed over another write's payload is CORRUPT in both."""
    a = media.reference_build(record, 4096)
    other = media.WriteRecord(
        record.campaign,
        record.first_lba,
        record.generations + np.uint64(1),
        record.worker,
        record.op_seq,
        record.issued_ns,
    )
    b = media.reference_build(other, 4096)
    mixed = a.copy()
    start = sector * 512
    mixed[start + 72 : start + 512] = b[start + 72 : start + 512]
    words = mixed.view(np.uint64).reshape(-1, media.WORDS)
    words[sector, media.CHECKSUM_WORD] = media._checksum(words[sector : sector + 1])[0]
    assert media.reference_state(mixed)[sector] == media.CORRUPT
    assert media.check_state(mixed)[sector] == media.CORRUPT
    assert np.array_equal(media.check_state(mixed), media.reference_state(mixed))


@settings(max_examples=200, deadline=None)
@given(records, block_sizes)
def test_version_2_c_build_equals_the_numpy_reference(
    record: media.WriteRecord, block: int
) -> None:
    built = media.build(record, block, media.VERSION2)
    assert np.array_equal(built, media.reference_build(record, block, media.VERSION2))
    assert (media.check_state(built) == media.VALID).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(records, min_size=2, max_size=5), block_sizes)
def test_version_2_stamped_in_place_write_after_write_equals_a_fresh_record(
    writes: list[media.WriteRecord], block: int
) -> None:
    """The engine's way: one buffer prepared once, then stamped by writes of other lengths and
    headers; after each, the written part is exactly that record."""
    campaign = writes[0].campaign
    buffer = media.aligned_buffer(6 * block)
    stamper = media.Stamper(buffer, block, campaign)
    for record in writes:
        record = media.WriteRecord(
            campaign, record.first_lba, record.generations, record.worker, record.op_seq,
            record.issued_ns, record.flags,
        )  # fmt: skip
        stamper.stamp(record)
        expected = media.reference_build(record, block, media.VERSION2)
        assert np.array_equal(buffer[: len(expected)], expected)


@settings(max_examples=200, deadline=None)
@given(
    records,
    block_sizes,
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=8),
    st.lists(st.integers(0, 1 << 20), max_size=3),
)
def test_version_2_c_check_equals_the_numpy_reference_on_damaged_data(
    record: media.WriteRecord,
    block: int,
    flips: list[tuple[int, int]],
    zeroed: list[int],
) -> None:
    data = media.reference_build(record, block, media.VERSION2)
    original = data.copy()
    for offset, value in flips:
        data[offset % len(data)] ^= np.uint8(value)
    for sector in zeroed:
        start = (sector % (len(data) // 512)) * 512
        data[start : start + 512] = 0
    state = media.check_state(data)
    assert np.array_equal(state, media.reference_state(data))
    damaged = (data != original).reshape(-1, 512).any(axis=1)
    assert (state[damaged] != media.VALID).all() and (state[~damaged] == media.VALID).all()


@settings(max_examples=100, deadline=None)
@given(records, st.integers(0, 7), st.integers(1, 439))
def test_version_2_rejects_an_old_payload_under_a_new_header(
    record: media.WriteRecord, sector: int, cut: int
) -> None:
    """The same place written twice (the next generation): a sector whose first bytes are the
    new write's and the rest the old one's (a tear inside the sector), and one whose header was
    resealed over the old payload, are CORRUPT: the payload carries the header's own word."""
    old = media.reference_build(record, 4096, media.VERSION2)
    newer = media.WriteRecord(
        record.campaign, record.first_lba, record.generations + np.uint64(1), record.worker,
        record.op_seq, record.issued_ns,
    )  # fmt: skip
    new = media.reference_build(newer, 4096, media.VERSION2)
    start = sector * 512
    torn = new.copy()
    torn[start + 72 + cut : start + 512] = old[start + 72 + cut : start + 512]
    resealed = old.copy()
    resealed[start : start + 64] = new[start : start + 64]
    words = resealed.view(np.uint64).reshape(-1, media.WORDS)
    h = media._header_sum(words[sector : sector + 1, : media.HEADER_WORDS])
    words[sector, media.CHECKSUM_WORD] = media._v2_checksum(h, words[sector : sector + 1, 9:])[0]
    for data in (torn, resealed):
        assert media.check_state(data)[sector] == media.CORRUPT
        assert media.reference_state(data)[sector] == media.CORRUPT


def test_build_into_refuses_a_short_buffer() -> None:
    record = media.WriteRecord(1, 0, np.ones(2, dtype=np.uint64), 0, 1, 1)
    with pytest.raises(ValueError):
        media.build_into(np.zeros(4096, dtype=np.uint8), record, 4096)


def test_parse_decodes_header_fields_of_the_c_build() -> None:
    record = media.WriteRecord(5, 40, np.array([7, 9], dtype=np.uint64), 3, 11, 99, media.FLAG_FUA)
    sectors = media.parse(media.build(record, 1024))
    assert sectors.state.tolist() == [media.VALID] * 4
    assert sectors.lba.tolist() == [40, 40, 41, 41]
    assert sectors.generation.tolist() == [7, 7, 9, 9]
    assert sectors.sector_index.tolist() == [0, 1, 0, 1]
    assert set(sectors.worker.tolist()) == {3} and set(sectors.nblocks.tolist()) == {2}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the clones exist on x86-64 only")
def test_the_portable_build_of_the_kernel_equals_the_reference_too(tmp_path: Path) -> None:
    """This machine runs the x86-64-v4 clone; the plain x86-64 code other CPUs get is compiled
    here without clones and held to the same reference."""
    source = Path(media.__file__).parents[1] / "native" / "media.c"
    library = tmp_path / "libportable.so"
    flags = ["-std=gnu11", "-O3", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror"]
    flags += ["-DPFR_NO_CLONES", "-march=x86-64"]
    subprocess.run(["gcc", *flags, "-o", str(library), str(source)], check=True)
    portable = ctypes.CDLL(str(library))
    rng = np.random.default_rng(5)
    for block in (512, 4096):
        gens = rng.integers(0, 1 << 32, 3, dtype=np.uint64)
        record = media.WriteRecord(9, 77, gens, 4, 1 << 40, 1234567, media.FLAG_FUA)
        expected = media.reference_build(record, block)
        out = media.aligned_buffer(len(expected))
        portable.pfr_build(
            ctypes.c_void_p(out.ctypes.data), ctypes.c_uint32(block // 512),
            ctypes.c_uint64(3), ctypes.c_uint64(9), ctypes.c_uint64(77),
            ctypes.c_void_p(gens.ctypes.data), ctypes.c_uint64(4), ctypes.c_uint64(1 << 40),
            ctypes.c_uint64(1234567), ctypes.c_uint64(media.FLAG_FUA),
        )  # fmt: skip
        assert np.array_equal(out, expected)
        out[rng.integers(0, len(out), 5)] ^= 0x10
        out[512:1024] = 0
        state = np.empty(len(out) // 512, dtype=np.uint8)
        portable.pfr_check(
            ctypes.c_void_p(out.ctypes.data), ctypes.c_uint64(len(state)),
            ctypes.c_void_p(state.ctypes.data),
        )  # fmt: skip
        assert np.array_equal(state, media.reference_state(out))
        v2 = media.reference_build(record, block, media.VERSION2)
        v2[rng.integers(0, len(v2), 3)] ^= 0x04
        portable.pfr_check(
            ctypes.c_void_p(v2.ctypes.data), ctypes.c_uint64(len(state)),
            ctypes.c_void_p(state.ctypes.data),
        )  # fmt: skip
        assert np.array_equal(state, media.reference_state(v2))
