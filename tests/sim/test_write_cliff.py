"""The write cliff (fixtures/perfmodel.py): full rate while free blocks last, the GC rate once
they run out, the full rate again after a discard. Asserted on the model's state and the delays
it accounted, never on wall-clock time; on the full-system twin through the rig's own discard."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixtures.perfmodel import FRESH, GC, CliffSpec, WriteCliff
from fixtures.profiles import profile
from fixtures.virtual_drive import VirtualDrive, VirtualTarget
from rig.drive.identity import DriveIdentity
from rig.io import discard, media
from rig.io.blockio import DirectTarget
from tests.sim.conftest import twin_unavailable
from tests.sim.twin_drive import twin_drive

SPEC = CliffSpec(capacity_blocks=1000, block_size=4096, free_fraction=0.25, fresh_mb_s=100.0,
                 gc_mb_s=10.0)  # fmt: skip


def test_the_rate_falls_when_free_blocks_run_out_and_returns_after_trim() -> None:
    cliff = WriteCliff(SPEC)
    assert (cliff.regime(), cliff.rate_mb_s(), cliff.free_blocks()) == (FRESH, 100.0, 1000)
    cliff.charge(0, 750, 0.0)  # 250 free: not below a quarter
    assert cliff.regime() == FRESH
    cliff.charge(750, 1, 1.0)  # 249 free
    assert (cliff.regime(), cliff.rate_mb_s()) == (GC, 10.0)
    cliff.charge(0, 100, 2.0)  # overwrites map nothing new: still out of free blocks
    assert (cliff.free_blocks(), cliff.regime()) == (249, GC)
    cliff.trim(0, 1)  # one block back is 250 free: the fresh rate again
    assert (cliff.free_blocks(), cliff.regime(), cliff.rate_mb_s()) == (250, FRESH, 100.0)
    cliff.trim(500, 10_000)  # trimming past what was written frees only what was mapped
    assert cliff.free_blocks() == 1000 - 499  # blocks 1..499 are still mapped


def test_each_write_is_charged_at_the_rate_it_arrived_under() -> None:
    cliff = WriteCliff(SPEC)
    done = cliff.charge(0, 751, now_s=10.0)  # arrives fresh: 751 blocks at 100 MB/s
    fresh_cost = 751 * 4096 / 100e6
    assert done == pytest.approx(10.0 + fresh_cost)
    done = cliff.charge(0, 10, now_s=100.0)  # arrives in GC: 10 blocks at 10 MB/s
    assert done == pytest.approx(100.0 + 10 * 4096 / 10e6)
    assert cliff.charged_s[FRESH] == pytest.approx(fresh_cost)
    assert cliff.charged_s[GC] == pytest.approx(10 * 4096 / 10e6)
    assert cliff.bytes == {FRESH: 751 * 4096, GC: 10 * 4096}


def test_concurrent_writes_share_the_rate() -> None:
    """Writes that arrive together queue behind each other: two take twice as long as one."""
    cliff = WriteCliff(SPEC)
    first = cliff.charge(0, 100, now_s=5.0)
    second = cliff.charge(100, 100, now_s=5.0)
    one = 100 * 4096 / 100e6
    assert (first, second) == (pytest.approx(5.0 + one), pytest.approx(5.0 + 2 * one))
    assert cliff.charge(200, 1, now_s=50.0) == pytest.approx(50.0 + 4096 / 100e6)  # idle since


def test_a_drive_without_a_cliff_profile_has_no_throttle() -> None:
    assert VirtualDrive(DriveIdentity("m", "s"), profile("honest")).cliff is None
    cliff = WriteCliff(CliffSpec(1000, 4096, 0.25, 0.0, 0.0))  # no rates: not throttled
    assert cliff.charge(0, 10, 3.0) == 3.0 and cliff.charged_s == {FRESH: 0.0, GC: 0.0}


def test_the_in_process_drive_throttles_and_recovers() -> None:
    drive = VirtualDrive(DriveIdentity("m", "s"), profile("cliff"))
    cliff = drive.cliff
    assert cliff is not None
    target = VirtualTarget(drive)
    blocks = drive.profile.capacity_blocks
    chunk = np.zeros(256 * drive.profile.block_size, np.uint8)
    for lba in range(0, blocks * 3 // 4, 256):
        target.write(lba, chunk)
    assert cliff.regime() == FRESH
    target.write(blocks * 3 // 4, chunk[: drive.profile.block_size])
    assert (cliff.regime(), cliff.rate_mb_s()) == (GC, drive.profile.gc_write_mb_s)
    drive.deallocate(drive.epoch, 0, blocks // 2)
    assert (cliff.regime(), cliff.rate_mb_s()) == (FRESH, drive.profile.fresh_write_mb_s)


def test_a_used_drive_writes_at_the_gc_rate_until_trimmed() -> None:
    drive = VirtualDrive(DriveIdentity("m", "s"), profile("cliff-used"))
    cliff = drive.cliff
    assert cliff is not None and cliff.free_blocks() == 0 and cliff.regime() == GC
    blocks = drive.profile.capacity_blocks
    drive.deallocate(drive.epoch, 0, blocks // 4 - 1)  # not quite enough
    assert cliff.regime() == GC
    drive.deallocate(drive.epoch, blocks // 4 - 1, 1)
    assert (cliff.free_blocks(), cliff.regime()) == (blocks // 4, FRESH)


@pytest.mark.skipif(bool(twin_unavailable()), reason=twin_unavailable() or "ok")
def test_cliff_on_a_twin_node_and_recovery_after_blkdiscard(tmp_path: Path) -> None:
    with twin_drive(tmp_path, "cliff", "C") as drive:
        cliff = drive.engine.cliff
        assert cliff is not None
        node = f"/dev/loop{drive.index}"
        target = DirectTarget(node)
        try:
            block, blocks = target.block_size, target.nblocks
            threshold = int(blocks * drive.profile.cliff_free_fraction)  # free blocks at the cliff
            chunk = media.aligned_buffer(256 * block)
            chunk[:] = 0x5A
            for lba in range(0, blocks - threshold, 256):  # up to the cliff, not over it
                target.write(lba, chunk)
            at_edge = cliff.regime(), cliff.free_blocks()
            target.write(blocks - threshold, chunk[: 16 * block])  # over it
            in_gc = cliff.regime(), cliff.rate_mb_s()
            target.write(0, chunk[: 16 * block])  # a write that arrives in GC
            gc_charged = cliff.charged_s[GC]
            discard.discard("blkdiscard", node, target.fileno(), 0, blocks // 2, block)
            after_trim = cliff.regime(), cliff.rate_mb_s(), cliff.free_blocks()
            target.flush()
        finally:
            target.close()
    assert at_edge == (FRESH, threshold)
    assert in_gc == (GC, drive.profile.gc_write_mb_s)
    assert gc_charged == pytest.approx(16 * block / (drive.profile.gc_write_mb_s * 1e6))
    assert after_trim == (FRESH, drive.profile.fresh_write_mb_s, threshold - 16 + blocks // 2)
    # everything written before the cliff was charged at the fresh rate
    fresh = (blocks - threshold) * block + 16 * block
    assert cliff.bytes[FRESH] == fresh
    assert cliff.charged_s[FRESH] == pytest.approx(fresh / (drive.profile.fresh_write_mb_s * 1e6))
