"""A drive that sits on a read, met through a real block device: the checker's reads at queue
depth (Linux AIO on the loop device's O_DIRECT descriptor) over a FUSE file whose server holds
the read of one block, as a drive's firmware stuck on a bad page does. The held block is a hang
(read_error, kind hang), the blocks before it are read and judged, what the hang budget leaves
is unchecked (not an error), nothing is read into a buffer
the kernel may still fill; once the drive answers, the next check reads everything back right
(the abandoned request completes into its own buffer, not into a later read's)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fixtures.simssd.fuse import FuseServer
from rig.check import verify
from rig.io.blockio import DirectTarget
from rig.io.ledger import CycleLog, LbaState
from rig.io.workload import Workload, Writer, WriterContext
from tests.loopdev import attached, loop_available

BLOCK = 4096
BLOCKS = 1024  # 4 MiB
HELD = 700

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse") or bool(loop_available()),
    reason="needs root, /dev/fuse and loop devices",
)


class HeldDrive:
    """An image the FUSE server serves from memory; a read that covers block HELD waits until
    `answer` is set (while `holding`)."""

    def __init__(self) -> None:
        self.data = bytearray(BLOCKS * BLOCK)
        self.holding = threading.Event()
        self.answer = threading.Event()
        self.held = threading.Event()

    def size(self) -> int:
        return len(self.data)

    def open(self) -> int:
        return 0

    def read(self, handle: int, offset: int, size: int) -> bytes:
        if self.holding.is_set() and offset <= HELD * BLOCK < offset + size:
            self.held.set()
            self.answer.wait(60)
        return bytes(self.data[offset : offset + size])

    def write(self, handle: int, offset: int, data: memoryview) -> None:
        self.data[offset : offset + len(data)] = data

    def deallocate(self, handle: int, offset: int, length: int) -> None:
        self.data[offset : offset + length] = bytes(length)

    def fsync(self, handle: int) -> None:
        pass

    def release(self, handle: int) -> None:
        pass


def _check(
    target: DirectTarget, state: LbaState, log: CycleLog, timeout_s: float
) -> verify.CheckResult:
    end = int(log.column("complete_ns").max()) + 1
    return verify.check(
        42,
        state,
        log,
        log.durability(end, 0),
        np.arange(BLOCKS, dtype=np.int64),  # the whole region, as a full scan reads it
        target.read,
        BLOCK,
        policy=verify.ReadPolicy(timeout_s=timeout_s),
    )


def test_a_read_the_drive_sits_on_is_a_hang_and_the_rest_is_judged(tmp_path: Path) -> None:
    drive = HeldDrive()
    where = tmp_path / "mnt"
    where.mkdir()
    server = FuseServer(str(where), {"held.img": drive}, name="righeld", workers=8)
    try:
        with attached(where / "held.img") as devnode:
            target = DirectTarget(devnode)
            try:
                state = LbaState(0, BLOCKS)
                log = CycleLog()
                stop = threading.Event()
                load = Workload(workers=4, write_blocks=(1, 4), flush_every=4)
                writer = Writer(load, WriterContext(42, target, state, log, stop), seed=3)
                writer.start()
                time.sleep(0.3)
                stop.set()
                assert writer.join(10)
                target.flush()

                drive.holding.set()
                held = _check(target, state, log, timeout_s=0.5)
                assert drive.held.is_set()  # the kernel did send the read of the held block
                errors = [f for f in held.findings if f.cls == verify.READ_ERROR]
                hung = {b for f in errors for b in range(f.lba_first, f.lba_first + f.lba_count)}
                assert {f.detail["kind"] for f in errors} == {"hang"}, errors
                assert HELD in hung
                # Splitting the hung request narrows it, but reads sent while the drive still
                # sits on the first one can queue behind it in the kernel (loop over FUSE does,
                # as a SATA drive without NCQ would): those blocks are reported as hangs too.
                # What is bounded: only blocks of the request that hung, next to the held one.
                assert hung <= set(range(HELD - 8, HELD + 8)), sorted(hung)
                # everything else was read and judged sound: no other failure
                others = [f for f in held.findings if f.failure and f.cls != verify.READ_ERROR]
                assert others == []
                # every block is judged, a hang, or unchecked (after the hang budget: the reads
                # after it queued behind the held one here), never a read error of its own
                assert held.blocks_checked + held.blocks_unchecked == BLOCKS  # (hung: checked)
                assert held.blocks_checked >= HELD - 8

                drive.answer.set()  # the drive answers at last
                time.sleep(0.5)
                again = _check(target, state, log, timeout_s=5.0)
                assert [f for f in again.findings if f.failure] == [], again.findings
                assert again.blocks_checked == BLOCKS
            finally:
                drive.answer.set()
                target.close()
    finally:
        drive.answer.set()
        server.stop()
