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


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_host_build_never_spins_at_real_time_priority(firmware_built: str) -> None:
    """The host build runs SCHED_FIFO where allowed (an MCU is not loaded by the host): a loop
    that spun there, as one did while no host had the port open (poll() reports the hang-up
    at once), would take a whole core from a 2-core machine. Waiting for a host, running
    between requests, and after the host closed its port it stays below 10 % of a core."""
    _require("host", firmware_built)
    twin = Twin("host")
    try:
        spent = _cpu_s(twin.proc.pid)
        time.sleep(1.0)  # no host yet
        waiting = _cpu_s(twin.proc.pid) - spent
        with RelayBoard(twin.pty) as board:
            assert board.identity.board
            policy = os.sched_getscheduler(twin.proc.pid)
            spent = _cpu_s(twin.proc.pid)
            time.sleep(1.0)
            running = _cpu_s(twin.proc.pid) - spent
        spent = _cpu_s(twin.proc.pid)
        time.sleep(1.0)  # the host has closed the port
        closed = _cpu_s(twin.proc.pid) - spent
    finally:
        twin.stop()
    if os.geteuid() == 0:
        assert policy == os.SCHED_FIFO
    assert max(waiting, running, closed) < 0.1, (waiting, running, closed)
