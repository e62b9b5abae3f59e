"""The fault core's ground truth is exact: what its log says about each cut is what a read gives
back afterwards. Random operation sequences on a drive with every fault enabled."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import faultcore as fc

BS = 1024  # two sectors per block keeps tears possible and the test fast
CAPACITY = 48

EVERYTHING = fc.Profile(
    name="all",
    model="T",
    capacity_blocks=CAPACITY,
    block_size=BS,
    cache_blocks=8,
    flush_honoured=False,
    tear_probability=0.2,
    misdirect_probability=0.2,
    misdirect_max_blocks=8,
    reorder_probability=0.3,
    bit_flip_blocks=0.5,
    paired_page_blocks=0.5,
    bit_rot_blocks=0.5,
    ftl_loss_probability=0.3,
    ftl_range_blocks=8,
    bad_range_probability=0.3,
    bad_range_blocks=2,
    hang_fraction=0.5,
)


def _tag(lba: int, block: npt.NDArray[np.uint8] | None) -> int:
    """Blocks written by the test are (lba, version, version, ...) in every sector; any other
    content is damage."""
    if block is None or not block.any():
        return 0
    version = int(block.view(np.uint32)[1])
    return version if np.array_equal(block, _block(lba, version)) else -1


def _block(lba: int, version: int) -> npt.NDArray[np.uint8]:
    words = np.full((BS // 512, 128), version, dtype=np.uint32)
    words[:, 0] = lba
    return words.view(np.uint8).reshape(-1)


operation = st.one_of(
    st.tuples(st.just("write"), st.integers(0, CAPACITY - 3), st.integers(1, 3)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("cut"), st.just(0), st.just(0)),
)


def _read_one(core: fc.FaultCore, lba: int) -> npt.NDArray[np.uint8] | str:
    try:
        return core.read(lba, 1)
    except fc.ReadHang:
        return "hang"
    except OSError:
        return "fail"


@settings(max_examples=60, deadline=None)
@given(st.lists(operation, min_size=5, max_size=60), st.integers(0, 1000))
def test_the_truth_log_matches_what_reads_back(ops: list[tuple[str, int, int]], seed: int) -> None:
    core = fc.FaultCore(EVERYTHING, seed=seed, tagger=_tag)
    version = 0
    for kind, lba, count in [*ops, ("cut", 0, 0)]:
        if kind == "write":
            version += 1
            data = np.concatenate([_block(lba + i, version) for i in range(count)])
            core.write(lba, data, fua=False)
            core.acknowledge(lba, count, data)
        elif kind == "flush":
            core.flush()
        else:
            core.power_loss()
            events = core.events(core.cuts)
            lbas = [e.lba for e in events]
            assert len(lbas) == len(set(lbas)), "one event per block per cut"
            for event in events:
                got = _read_one(core, event.lba)
                if event.kind == fc.READ_FAIL:
                    assert got == "fail"
                elif event.kind == fc.READ_HANG:
                    assert got == "hang"
                elif event.kind == fc.UNMAPPED:
                    assert isinstance(got, np.ndarray) and not got.any()
                else:
                    assert isinstance(got, np.ndarray)
                    assert _tag(event.lba, got) == event.detail["tag"], event
                if event.kind in (fc.TORN, fc.BIT_FLIP, fc.BIT_ROT, fc.RETRO_CORRUPT):
                    assert event.detail["tag"] == -1
                if event.kind == fc.MISDIRECTED:
                    landed = _read_one(core, event.detail["to"])
                    assert isinstance(landed, np.ndarray)
                    assert _tag(event.lba, landed) == event.detail["dropped"]
            for lba, tag in core.persisted[core.cuts].items():
                got = _read_one(core, lba)
                if isinstance(got, np.ndarray):
                    assert _tag(lba, got) == tag


@pytest.mark.parametrize("plp", [True, False])
def test_an_honest_drive_loses_only_what_no_flush_covered(plp: bool) -> None:
    profile = fc.Profile(
        name="honest", model="T", capacity_blocks=CAPACITY, block_size=BS, cache_blocks=8, plp=plp
    )
    core = fc.FaultCore(profile, seed=3, tagger=_tag)
    for round_ in range(20):
        for lba in range(0, CAPACITY, 3):
            data = _block(lba, round_ + 1)
            core.write(lba, data, fua=False)
            core.acknowledge(lba, 1, data)
            if lba % 2:
                core.flush()
        core.power_loss()
        kinds = {e.kind for e in core.events(core.cuts)}
        allowed = {fc.DESTAGED} if plp else {fc.LOST_UNFLUSHED}
        assert kinds <= allowed
        if plp:
            assert all(_tag(lba, core.read(lba, 1)) == round_ + 1 for lba in range(0, CAPACITY, 3))


@pytest.mark.parametrize(
    ("flush_at_s", "kind"), [(1.002, fc.LOST_FLUSHED), (1.0005, fc.LOST_UNFLUSHED)]
)
def test_a_write_counts_as_acknowledged_from_its_stated_completion(
    flush_at_s: float, kind: str
) -> None:
    """The virtual drive states a write's completion instant, then marks it acknowledged in a
    thread that a loaded host may run late: a flush that arrives in between covers the write,
    as the host's ledger (which keeps the stated instant) says it does."""
    liar = fc.Profile(
        name="liar", model="T", capacity_blocks=CAPACITY, block_size=BS, cache_blocks=8,
        flush_honoured=False,
    )  # fmt: skip
    core = fc.FaultCore(liar, seed=1, tagger=_tag)
    data = _block(5, 1)
    core.write(5, data, fua=False, now_s=1.0, complete_s=1.001)
    core.begin_flush(flush_at_s)  # (acknowledge() not run yet)
    core.complete_flush(flush_at_s + 0.0001)
    core.power_loss(1.01)
    assert [(e.lba, e.kind) for e in core.events(core.cuts)] == [(5, kind)]
