"""Readiness after a drive is back on the bus: it answers commands, not only exists as a node.

A node reappears as soon as the kernel enumerates the drive; the drive may still be booting its
firmware (NOT READY, UNIT ATTENTION) for a while. The probe per kind of device:
- `sd*` (SATA through libata, SAS): `sg_turs` (TEST UNIT READY) until it reports ready;
- `nvme*`: `nvme id-ctrl` answers (the controller is up and its admin queue works);
- anything else (loop, simulated): one O_DIRECT read of the first logical block.
Each probe is repeated with a short pause while the answer is "not yet", up to the timeout:
readiness is a question to the drive, there is no event for it.
"""

from __future__ import annotations

import mmap
import os
import time

from rig.bus.base import DriveNode
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
    return _read_probe(node)


def _read_probe(node: DriveNode) -> str:
    size = max(node.logical_block, 512)
    buffer = mmap.mmap(-1, size)  # page aligned, as O_DIRECT needs
    try:
        fd = os.open(node.devnode, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError as error:
        return f"open: {error.strerror}"
    try:
        got = os.preadv(fd, [buffer], 0)
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
