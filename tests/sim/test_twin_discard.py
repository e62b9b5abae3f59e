"""Discard on the full-system twin: the rig's own discard code (BLKDISCARD on the node) reaches
the simulated drive as a punched hole of its FUSE image (the loop driver's discard), and the
drive's fault model then reads the range as zeros."""

from __future__ import annotations

import fcntl
import struct
from pathlib import Path

import pytest

from rig import discard, media
from rig.blockio import DirectTarget
from tests.sim.conftest import twin_unavailable
from tests.sim.twin_drive import twin_drive

pytestmark = pytest.mark.skipif(bool(twin_unavailable()), reason=twin_unavailable() or "ok")


def _write(target: DirectTarget, lba: int, count: int, value: int) -> None:
    data = media.aligned_buffer(count * target.block_size)
    data[:] = value
    target.write(lba, data)


@pytest.mark.parametrize("profile_name", ["honest", "512e"])
def test_blkdiscard_on_a_twin_node_punches_the_range(tmp_path: Path, profile_name: str) -> None:
    with twin_drive(tmp_path, profile_name, "D") as drive:
        node = f"/dev/loop{drive.index}"
        target = DirectTarget(node)
        try:
            block = target.block_size
            assert block == drive.profile.block_size
            _write(target, 0, 64, 0xA5)
            target.flush()
            discard.discard("blkdiscard", node, target.fileno(), 16, 24, block)
            back = target.read(0, 64).reshape(64, block)
        finally:
            target.close()
        # the drive itself, not only what the host read: the blocks are deallocated
        inside = drive.engine.core.read(16, 24)
        trimmed = drive.health.bytes_trimmed
    assert (back[16:40] == 0).all()  # the discarded range reads zeros
    assert (back[:16] == 0xA5).all() and (back[40:] == 0xA5).all()  # the rest is intact
    assert not inside.any()
    assert trimmed == 24 * block


def test_a_discarded_region_reads_as_never_written_to_the_checker(tmp_path: Path) -> None:
    """What the rig's checker sees in a trimmed block: every sector ZERO (never written, trimmed
    or unmapped), not a corrupt or foreign record it would report."""
    with twin_drive(tmp_path, "honest", "Z") as drive:
        node = f"/dev/loop{drive.index}"
        target = DirectTarget(node)
        try:
            _write(target, 0, 8, 0x3C)
            target.flush()
            before = media.check_state(target.read(0, 8))
            discard.discard("blkdiscard", node, target.fileno(), 0, 8, target.block_size)
            after = media.check_state(target.read(0, 8))
        finally:
            target.close()
    assert (before != media.ZERO).all()
    assert (after == media.ZERO).all()


BLKZEROOUT = 0x127F  # _IO(0x12, 127): write zeroes, keep the blocks mapped (NOUNMAP)


def test_zeroout_writes_zeros_and_discard_still_works_after(tmp_path: Path) -> None:
    """BLKZEROOUT reaches the image as fallocate(ZERO_RANGE): a write of zeros (the blocks stay
    mapped). The server answers it without EOPNOTSUPP, which would make the loop device drop
    discard support: a discard afterwards still punches its range."""
    with twin_drive(tmp_path, "cliff", "W") as drive:
        cliff = drive.engine.cliff
        assert cliff is not None
        node = f"/dev/loop{drive.index}"
        target = DirectTarget(node)
        try:
            block = target.block_size
            _write(target, 0, 32, 0x77)
            target.flush()
            fcntl.ioctl(target.fileno(), BLKZEROOUT, struct.pack("QQ", 0, 8 * block))
            zeroed = target.read(0, 32).reshape(32, block)
            mapped_after_zeroout = cliff.free_blocks()
            discard.discard("blkdiscard", node, target.fileno(), 8, 8, block)
            trimmed = target.read(0, 32).reshape(32, block)
        finally:
            target.close()
    assert (zeroed[:8] == 0).all() and (zeroed[8:] == 0x77).all()
    assert mapped_after_zeroout == drive.profile.capacity_blocks - 32  # zeros are data
    assert (trimmed[:16] == 0).all() and (trimmed[16:] == 0x77).all()
    assert cliff.free_blocks() == drive.profile.capacity_blocks - 24
