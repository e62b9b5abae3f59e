"""The firmware twins as processes: the simavr bridge stops cleanly on SIGTERM/SIGINT whether or
not its pty was ever opened (the simulated SSD and the tests stop it that way), and both boot
only once the host can read the BOOT line."""

from __future__ import annotations

import os
import select
import signal
import termios
import time
import tty

import pytest

from rig.power.relay import RelayBoard, frame
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


def test_the_boot_line_outlives_a_late_input_flush(twin: Twin) -> None:
    """pyserial flushes its input after opening a port (serialposix.py, reset_input_buffer); on
    a loaded host that flush can come long after the open. Each twin boots on the host's first
    byte, as a Nano's bootloader waits for it, so a flush before that byte never takes BOOT."""
    fd = os.open(twin.pty, os.O_RDWR | os.O_NOCTTY)
    try:
        tty.setraw(fd)
        time.sleep(0.3)  # a host stalled between its open and its flush
        termios.tcflush(fd, termios.TCIFLUSH)
        os.write(fd, frame("1 ID"))
        received = b""
        deadline = time.monotonic() + 10.0
        while not any(line.startswith(b"1 OK") for line in received.split(b"\n")[:-1]):
            left = deadline - time.monotonic()
            assert left > 0, f"no reply to ID: {received!r}"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                received += os.read(fd, 4096)
        lines = [line for line in received.split(b"\n")[:-1] if line]
        assert lines[0].startswith(b"! 0 BOOT "), lines
        assert any(line.startswith(b"1 OK proto=") for line in lines[1:]), lines
    finally:
        os.close(fd)
