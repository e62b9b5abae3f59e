"""The simavr bridge as a process: it stops cleanly on SIGTERM/SIGINT whether or not its pty was
ever opened (the simulated SSD and the tests stop it that way)."""

from __future__ import annotations

import signal
import time

import pytest

from rig.power.relay import RelayBoard
from tests.power.conftest import _require
from tests.power.twins import Twin


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("opened", [False, True], ids=["waiting", "running"])
def test_bridge_exits_0_promptly_on_a_stop_signal(
    firmware_built: str, sig: signal.Signals, opened: bool
) -> None:
    _require("simavr", firmware_built)
    twin = Twin("simavr")
    try:
        if opened:  # the AVR runs once its port was opened: talk to it first
            with RelayBoard(twin.pty) as board:
                assert board.identity.board == "nano328p"
        asked = time.monotonic()
        twin.proc.send_signal(sig)
        assert twin.proc.wait(5) == 0
        assert time.monotonic() - asked < 1.0
    finally:
        twin.stop()
