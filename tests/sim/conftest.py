"""The full-system twin needs root, loop devices, FUSE, udevd and the built firmware."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.simssd import cleanup, runtime
from fixtures.simssd.twin import BRIDGE, FIRMWARE
from tests.loopdev import loop_available


def twin_unavailable() -> str:
    if os.geteuid() != 0:
        return "needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if not (BRIDGE.exists() and FIRMWARE.exists()):
        return "firmware not built (make setup)"
    return loop_available()


def _stale_since(directory: Path, since: float) -> bool:
    """A simulator made since `since` whose rig is gone (another session's may be running)."""
    try:
        made = directory.stat().st_mtime
    except FileNotFoundError:  # its daemon just finished removing it
        return False
    return made >= since - 1 and not runtime.alive(runtime.read_pid(directory / "owner.pid"))


@pytest.fixture
def twin(udevd: None) -> Iterator[None]:
    """A test that runs the twin. Afterwards no simulator it started may be left behind (a
    runtime directory, hence loops, mount, rule, processes, of a rig that is gone): a leak
    fails the test, and whatever it left is cleaned either way."""
    reason = twin_unavailable()
    if reason:
        pytest.skip(reason)
    since = time.time()
    try:
        yield
    finally:
        leaked = [d for d in runtime.directories() if _stale_since(d, since)]
        cleaned = cleanup.clean()
    assert not leaked, f"simulators left behind by the rig: {leaked}; cleaned: {cleaned}"
