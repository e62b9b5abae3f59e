"""Readiness after a drive is back on the bus: it answers commands, not only exists as a node.

A node reappears as soon as the kernel enumerates the drive; the drive may still be booting its
firmware (NOT READY, UNIT ATTENTION) for a while. The probe per kind of device:
- `sd*` (SATA through libata, SAS): `sg_turs` (TEST UNIT READY) until it reports ready;
- `nvme*`: `nvme id-ctrl` answers (the controller is up and its admin queue works);
- anything else (loop, simulated): an O_DIRECT read of the first logical block; if that fails,
  of the last and the middle one. A drive whose first block is unreadable (a bad range there) still
  answers: it is ready as soon as any of these blocks reads back whole. A media error at block 0
  is the checker's to find and record, not a reason to declare the drive dead.
Each probe is repeated with a short pause while the answer is "not yet", up to the timeout:
readiness is a question to the drive, there is no event for it.
"""

from __future__ import annotations

import mmap
import os
import time

from rig.drive.node import DriveNode
from rig.health.errors import HealthToolError, ToolMissing
from rig.health.nvme import nvme_id_ctrl
from rig.health.scsi import Readiness, sg_turs
from rig.health.tools import Runner

RETRY_PAUSE_S = 0.02
PROBE_TIMEOUT_S = 10.0  # one tool run; a probe stuck longer than this is not "ready"


class NotReady(Exception):
    """The drive did not become ready in time; the message says what it last answered."""


def probe_once(node: DriveNode, runner: Runner) -> str:
    """'' when the drive answered as ready, else what it answered instead."""
    name = os.path.basename(os.path.realpath(node.devnode))
    try:
        if name.startswith("sd"):
            tur = sg_turs(node.devnode, runner, PROBE_TIMEOUT_S)
            if tur.readiness is Readiness.READY:
                return ""
            return f"sg_turs: {tur.readiness.value} ({tur.detail or f'exit {tur.exit_code}'})"
        if name.startswith("nvme"):
            nvme_id_ctrl(node.devnode, runner, PROBE_TIMEOUT_S)
            return ""
    except ToolMissing:
        raise  # a set-up fault of the host, not a drive that is not ready
    except HealthToolError as error:
        return str(error)
    return read_probe(node)


def read_probe(node: DriveNode) -> str:
    """'' when one of the first, last and middle blocks reads back whole, else what failed."""
    size = max(node.logical_block, 512)
    last = max(node.size_bytes // size - 1, 0)
    answers: list[str] = []
    for lba in dict.fromkeys((0, last, last // 2)):  # in this order, each block once
        answer = _read_block(node.devnode, lba, size)
        if not answer:
            return ""
        if answer.startswith("open:"):
            return answer  # the node itself is not usable: no other block will do better
        answers.append(f"block {lba}: {answer}")
    return "; ".join(answers)


def _read_block(devnode: str, lba: int, size: int) -> str:
    """'' when block `lba` read back whole, else why not."""
    buffer = mmap.mmap(-1, size)  # page aligned, as O_DIRECT needs
    try:
        fd = os.open(devnode, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError as error:
        buffer.close()
        return f"open: {error.strerror}"
    try:
        got = os.preadv(fd, [buffer], lba * size)
        return "" if got == size else f"short read ({got} of {size} bytes)"
    except OSError as error:
        return f"read: {error.strerror}"
    finally:
        os.close(fd)
        buffer.close()


def wait_ready(node: DriveNode, runner: Runner, timeout_s: float) -> int:
    """Host monotonic ns when the drive first answered as ready; NotReady after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = probe_once(node, runner)
        if not answer:
            return time.monotonic_ns()
        if time.monotonic() >= deadline:
            raise NotReady(f"{node.devnode} not ready within {timeout_s:g} s: {answer}")
        time.sleep(RETRY_PAUSE_S)
