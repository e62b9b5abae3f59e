"""The full-system twin needs root, loop devices, FUSE, udevd and the built firmware."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fixtures.simssd import cleanup
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


@pytest.fixture
def twin(udevd: None) -> Iterator[None]:
    """A test that runs the twin; whatever a failed run left behind is cleaned afterwards."""
    reason = twin_unavailable()
    if reason:
        pytest.skip(reason)
    try:
        yield
    finally:
        cleanup.clean()
