"""Property tests of the classifier on synthetic ledgers and media images: one fault of each kind,
dropped into a random honest history at a random place, is reported as exactly its class, at
exactly its blocks, with its details; uncertainty about the cut instant only ever removes lost
durable writes; failing reads are located exactly and never hide the rest."""

from __future__ import annotations

from dataclasses import dataclass
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rig.check import verify
from rig.check.verify import reads as verify_reads
from tests.checker_scenario import BS, CAMPAIGN, Scenario, failures

N = 64
OLD = range(32, N)  # written in cycle 1 only
FAULTS = ("flip_new", "flip_old", "tear", "misdirect", "drop", "zero_old", "revert_old", "fail")


@dataclass
class Planted:
    scenario: Scenario
    expected: dict[int, str]  # lba -> failure class
    detail: dict[str, object]
    cut: int


def _history() -> tuple[Scenario, dict[int, np.ndarray], int]:
    """Cycle 1: every block written and flushed, the old half twice (so it has a previous
    version). Cycle 2: random writes in the new half, some made durable by a flush."""
    s = Scenario(nblocks=N)
    first_versions: dict[int, np.ndarray] = {}
    t = 0
    for lba in range(0, N, 4):
        block = s.write(lba, 4, issue=t, complete=t + 1)
        if lba in OLD:
            for i in range(4):
                first_versions[lba + i] = block[i * BS : (i + 1) * BS].copy()
        t += 2
    for lba in range(32, N, 8):
        s.write(lba, 8, issue=t, complete=t + 1)
        t += 2
    s.flush(t, t + 1)
    t += 2
    assert failures(s.check(cut=t + 10, extra=list(range(N)))) == []
    s.new_cycle()
    return s, first_versions, t + 100


@st.composite
def planted(draw: st.DrawFn) -> Planted:
    s, first_versions, t = _history()
    fault = draw(st.sampled_from(FAULTS))
    # cycle 2: one write per 4-block slot of the new half; durable ones before the flush
    writes = []
    for lba in range(0, 32, 4):
        count = draw(st.integers(1, 4))
        durable = draw(st.booleans())
        writes.append((lba, count, durable))
    victim_slot = draw(st.integers(0, len(writes) - 1))
    lba, count, _ = writes[victim_slot]
    if fault in ("flip_new", "drop"):
        writes[victim_slot] = (lba, count, True)
    if fault in ("tear", "misdirect"):
        writes[victim_slot] = (lba, count, False)
    expected: dict[int, str] = {}
    detail: dict[str, object] = {}
    datas = {}
    durable_count = sum(durable for _, _, durable in writes)
    for i, (w_lba, w_count, _) in enumerate(sorted(writes, key=lambda w: not w[2])):
        land = not (w_lba == lba and fault in ("drop", "tear", "misdirect"))
        datas[w_lba] = s.write(w_lba, w_count, issue=t, complete=t + 1, land=land)
        t += 2
        if i == durable_count - 1:
            s.flush(t, t + 1)  # every durable write completed before this flush was issued
            t += 2
    victim_data = datas[lba]
    block_of = draw(st.integers(0, count - 1))
    target = lba + block_of
    old = draw(st.sampled_from(list(OLD)))
    if fault == "flip_new":
        byte = draw(st.integers(0, BS - 1))
        s.image[target * BS + byte] ^= 1 << draw(st.integers(0, 7))
        expected[target] = verify.CORRUPTION
        detail["corrupt_sector"] = byte // 512
    elif fault == "flip_old":
        byte = draw(st.integers(0, BS - 1))
        s.image[old * BS + byte] ^= 1 << draw(st.integers(0, 7))
        expected[old] = verify.COLLATERAL
        detail["corrupt_sector"] = byte // 512
    elif fault == "tear":
        keep = draw(st.integers(1, BS // 512 - 1))
        s.image[target * BS : target * BS + keep * 512] = victim_data[
            block_of * BS : block_of * BS + keep * 512
        ]
        expected[target] = verify.SHORN
        detail["tear"] = [keep]
    elif fault == "misdirect":
        s.image[old * BS : (old + 1) * BS] = victim_data[block_of * BS : (block_of + 1) * BS]
        expected[old] = verify.FLYING
        detail["distance"] = old - target
    elif fault == "drop":
        for i in range(count):
            expected[lba + i] = verify.LOST_DURABLE
    elif fault == "zero_old":
        s.image[old * BS : (old + 1) * BS] = 0
        expected[old] = verify.READ_ERROR
    elif fault == "revert_old":
        s.image[old * BS : (old + 1) * BS] = first_versions[old]
        expected[old] = verify.COLLATERAL
    else:
        span = draw(st.integers(1, 6))
        start = draw(st.integers(0, N - span))
        s.failing = set(range(start, start + span))
        expected = dict.fromkeys(s.failing, verify.READ_ERROR)
    detail["fault"] = fault
    return Planted(s, expected, detail, t + 50)


def _by_block(findings: list[verify.Finding]) -> dict[int, str]:
    found: dict[int, str] = {}
    for f in findings:
        if f.cls == verify.UNSERIALIZABLE:
            continue
        for lba in range(f.lba_first, f.lba_first + f.lba_count):
            assert lba not in found, f"block {lba} reported twice"
            found[lba] = f.cls
    return found


@settings(max_examples=150, deadline=None)
@given(planted())
def test_one_planted_fault_is_reported_exactly(p: Planted) -> None:
    result = p.scenario.check(cut=p.cut, extra=list(range(N)))
    found = failures(result)
    assert _by_block(found) == p.expected, p.detail
    by_lba = {f.lba_first: f for f in found}
    fault = p.detail["fault"]
    if fault in ("flip_new", "flip_old"):
        (f,) = found
        assert p.detail["corrupt_sector"] in f.detail["corrupt_sectors"]
    if fault == "tear":
        (f,) = found
        assert f.detail["tear_sectors"] == p.detail["tear"]
    if fault == "misdirect":
        (f,) = found
        assert f.detail["distance"] == p.detail["distance"]
    if fault == "drop":
        lost = [f for f in found if f.cls == verify.LOST_DURABLE]
        assert all(f.detail["ack_to_cut_ns"] > f.detail["flush_to_cut_ns"] > 0 for f in lost)
        assert all(f.expected_gen > f.observed_gen for f in lost)
    if fault == "fail":
        assert all(f.detail["kind"] == "eio" for f in by_lba.values())


@st.composite
def lossy_history(draw: st.DrawFn) -> list[tuple[int, int, int, bool, bool]]:
    """Writes (lba, issue, complete, landed, flush after) in the order issued."""
    plan = []
    t = 0
    for lba in draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=20, unique=True)):
        issue = t + draw(st.integers(0, 5))
        complete = issue + draw(st.integers(1, 20))
        plan.append((lba, issue, complete, draw(st.booleans()), draw(st.booleans())))
        t = issue + 1
    return plan


def _replay(plan: list[tuple[int, int, int, bool, bool]], cut: int, error: int) -> set[int]:
    s = Scenario(nblocks=N)
    for lba, issue, complete, landed, flush_after in plan:
        s.write(lba, 1, issue=issue, complete=complete, land=landed)
        if flush_after:
            s.flush(complete + 1, complete + 2)
    found = s.check(cut=cut, error=error).findings
    return {f.lba_first for f in found if f.cls == verify.LOST_DURABLE}


@settings(max_examples=100, deadline=None)
@given(lossy_history(), st.integers(0, 200), st.integers(0, 200))
def test_a_wider_cut_error_bound_only_removes_lost_durable_writes(
    plan: list[tuple[int, int, int, bool, bool]], small: int, extra: int
) -> None:
    cut = max(c for _, _, c, _, _ in plan) + 10
    narrow = _replay(plan, cut, small)
    wide = _replay(plan, cut, small + extra)
    assert wide <= narrow
    assert _replay(plan, cut, cut) == set()  # nothing completed before the bound: nothing judged


@settings(max_examples=80, deadline=None)
@given(st.sets(st.integers(0, N - 1), max_size=12), st.integers(1, 64))
def test_failing_reads_are_located_exactly_and_the_rest_checked(
    failing: set[int], chunk: int
) -> None:
    s = Scenario(nblocks=N)
    s.write(0, 32, issue=0, complete=1)
    s.write(32, 32, issue=2, complete=3)
    s.flush(4, 5)
    assert failures(s.check(cut=10)) == []
    s.new_cycle()  # nothing written: a scan of old data
    s.failing = failing
    result = verify.check(
        11,
        s.state,
        s.log,
        s.log.durability(200, 0),
        np.arange(N),
        s.read,
        BS,
        max_read_blocks=chunk,
    )
    assert _by_block(failures(result)) == dict.fromkeys(failing, verify.READ_ERROR)
    assert result.blocks_checked == N
    # an unreadable block this cycle did not write keeps its expected state for the next check
    assert (s.state.committed[np.arange(N)] == 1).all()


def _by_block_all(findings: list[verify.Finding]) -> dict[int, str]:
    """Every per-block finding (failures and allowed outcomes), by block."""
    found: dict[int, str] = {}
    for f in findings:
        if f.cls != verify.UNSERIALIZABLE:
            found.update(dict.fromkeys(range(f.lba_first, f.lba_first + f.lba_count), f.cls))
    return found


@settings(max_examples=100, deadline=None)
@given(planted(), st.sets(st.integers(0, N - 1), max_size=N // 2), st.integers(1, N))
def test_a_chunked_full_scan_judges_like_one_check(p: Planted, extra: set[int], chunk: int) -> None:
    """A full scan of a large region is this cycle's check plus `scan_rest` chunk by chunk: it
    gives every block the class, and the committed state, that one check of everything gives."""
    s = p.scenario
    everything = np.arange(N, dtype=np.int64)
    before = s.state.committed[everything].copy()
    whole = s.check(cut=p.cut, extra=list(range(N)))
    committed_whole = s.state.committed[everything].copy()
    s.state.committed[everything] = before
    first = s.check(cut=p.cut, extra=sorted(extra))
    written = zip(s.log.column("first_lba").tolist(), s.log.column("nblocks").tolist(), strict=True)
    cycle_blocks = {lba + i for lba, count in written for i in range(count)}
    judged = np.array(sorted(cycle_blocks | extra), dtype=np.int64)
    rest = verify.scan_rest(
        CAMPAIGN, s.state, judged, s.read, BS, policy=verify.ReadPolicy(), chunk_blocks=chunk
    )
    assert _by_block_all(first.findings + rest.findings) == _by_block_all(whole.findings)
    assert first.blocks_checked + rest.blocks_checked == whole.blocks_checked == N
    assert (s.state.committed[everything] == committed_whole).all()
    assert [f for f in first.findings if f.cls == verify.UNSERIALIZABLE] == [
        f for f in whole.findings if f.cls == verify.UNSERIALIZABLE
    ]


@settings(max_examples=80, deadline=None)
@given(planted(), st.integers(1, 8), st.integers(1, 4))
def test_judged_window_by_window_like_in_one_window(p: Planted, chunk: int, window: int) -> None:
    """The per-block evidence is taken window by window while later windows are read: many
    small windows (parsed on the helper threads) give every finding, and the committed state,
    that one window gives."""
    s = p.scenario
    everything = np.arange(N, dtype=np.int64)
    before = s.state.committed[everything].copy()

    def check() -> verify.CheckResult:
        durability = s.log.durability(p.cut, 0)
        return verify.check(CAMPAIGN, s.state, s.log, durability, everything, s.read, BS, chunk)

    whole = check()
    committed_whole = s.state.committed[everything].copy()
    s.state.committed[everything] = before
    with (
        patch.object(verify_reads, "BATCH_BYTES", window * chunk * BS),
        patch.object(verify_reads, "PARSE_THREAD_BYTES", BS),
    ):
        windowed = check()
    assert windowed.findings == whole.findings
    assert (s.state.committed[everything] == committed_whole).all()
