"""The intent log (rig/check/intent.py): what a cycle planned to write survives `kill -9` of the
rig, and the log is trusted only for its own drive, cycle and boot, and only when it did not
overflow; merged runs cover exactly the blocks of the ranges."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rig.campaign import resume
from rig.campaign.drive import DriveRun
from rig.check import intent
from rig.io.ledger import LbaState

REPO = Path(__file__).resolve().parents[2]


def _ranges(*pairs: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([p[0] for p in pairs], dtype=np.int64),
        np.array([p[1] for p in pairs], dtype=np.int64),
    )


def test_a_cycle_ranges_read_back_and_a_new_cycle_replaces_them(tmp_path: Path) -> None:
    log = intent.IntentLog(tmp_path / "s.intent-1", drive_id=1, capacity=64)
    try:
        log.begin(5)
        log.add(*_ranges((100, 8), (300, 1)))
        log.add(*_ranges((7, 2)))
        got = log.ranges(5)
        assert got is not None
        assert got[0].tolist() == [100, 300, 7] and got[1].tolist() == [8, 1, 2]
        assert log.ranges(4) is None and log.ranges(6) is None  # another cycle's: unknown
        log.begin(6)
        empty = log.ranges(6)
        assert empty is not None and len(empty[0]) == 0
    finally:
        log.close()


def test_an_overflowed_log_is_not_trusted(tmp_path: Path) -> None:
    log = intent.IntentLog(tmp_path / "s.intent-1", drive_id=1, capacity=4)
    try:
        log.begin(1)
        log.add(*_ranges((0, 1), (1, 1), (2, 1)))
        assert log.ranges(1) is not None
        log.add(*_ranges((3, 1), (4, 1)))  # five ranges in a log of four
        assert log.ranges(1) is None
        log.add(*_ranges((9, 1)))  # and stays untrusted for the rest of the cycle
        assert log.ranges(1) is None
    finally:
        log.close()


def test_a_log_of_another_boot_or_drive_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.intent-3"
    log = intent.IntentLog(path, drive_id=3, capacity=16)
    log.begin(2)
    log.add(*_ranges((10, 4)))
    log.close()
    assert intent.boot_id() != (0, 0), "this kernel reports a boot id"
    other = intent.IntentLog(path, drive_id=4, capacity=16)  # the same file, another drive
    try:
        assert other.ranges(2) is None
    finally:
        other.close()
    again = intent.IntentLog(path, drive_id=3, capacity=16)
    try:
        assert again.ranges(2) is not None  # reopened in this boot: kept, trusted
        rebooted = tmp_path / "boot_id"
        rebooted.write_text(f"{uuid.uuid4()}\n")
        monkeypatch.setattr(intent, "BOOT_ID", rebooted)
        assert again.ranges(2) is None  # the page cache it lived in did not survive a reboot
    finally:
        again.close()


def test_the_ranges_survive_kill_9_of_the_process_that_wrote_them(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite.intent-2"
    child = (
        "import os, signal, numpy as np\n"
        "from pathlib import Path\n"
        "from rig.check import intent\n"
        f"log = intent.IntentLog(Path({str(path)!r}), drive_id=2, capacity=1024)\n"
        "log.begin(41)\n"
        "log.add(np.arange(0, 3000, 10, dtype=np.int64), np.full(300, 3, dtype=np.int64))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", child], cwd=REPO, timeout=60)
    assert done.returncode == -9
    log = intent.IntentLog(path, drive_id=2, capacity=1024)
    try:
        got = log.ranges(41)
        assert got is not None
        assert got[0].tolist() == list(range(0, 3000, 10)) and set(got[1].tolist()) == {3}
    finally:
        log.close()


@given(
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 20)), min_size=0, max_size=40),
)
def test_merged_runs_cover_each_block_of_the_ranges_once(pairs: list[tuple[int, int]]) -> None:
    firsts, counts = _ranges(*pairs) if pairs else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    starts, lengths = intent.merged_runs(firsts, counts)
    blocks = np.concatenate(
        [np.arange(s, s + n) for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
        or [np.zeros(0, np.int64)]
    )
    expected = {lba for first, n in pairs for lba in range(first, first + n)}
    assert sorted(blocks.tolist()) == sorted(expected)  # each block once, no other block
    assert (lengths > 0).all() and (np.diff(starts) > 0).all()
    assert (starts[1:] > starts[:-1] + lengths[:-1]).all()  # runs neither overlap nor touch


def _run(log: intent.IntentLog, next_seq: int) -> DriveRun:
    """What `resume.blocks_at_risk` looks at in a drive run: its log, next cycle and region."""
    run = SimpleNamespace(intent=log, next_seq=next_seq, state=LbaState(1000, 500))
    return cast(DriveRun, run)


def test_resume_reads_the_last_cycles_ranges_or_everything_when_unsure(tmp_path: Path) -> None:
    log = intent.IntentLog(tmp_path / "s.intent-1", drive_id=1, capacity=64)
    try:
        log.begin(8)  # the lost cycle 8: resume continues at 9
        log.add(*_ranges((1010, 4), (1012, 4), (1400, 2)))
        runs = resume.blocks_at_risk(_run(log, 9))
        assert runs is not None
        assert runs[0].tolist() == [10, 400] and runs[1].tolist() == [6, 2]  # region-relative
        assert resume.blocks_at_risk(_run(log, 8)) is None  # the log is of a later cycle
        log.begin(9)  # a crash before cycle 9's start row: it issued nothing
        empty = resume.blocks_at_risk(_run(log, 9))
        assert empty is not None and len(empty[0]) == 0
        log.add(*_ranges((1100, 1)))  # ... unless it had planned writes: then it cannot say
        assert resume.blocks_at_risk(_run(log, 9)) is None
        log.begin(10)
        log.add(*_ranges((1498, 4)))  # ends past the region: not this region's log
        assert resume.blocks_at_risk(_run(log, 11)) is None
    finally:
        log.close()
