"""A minimal protocol-v1 client and target launchers for the firmware tests.

This is test scaffolding, not the production driver (that is `rig/power/serial_board.py`): it
frames lines, checks checksums and starts the two firmware twins (host build, AVR image in
simavr) as subprocesses whose stdout reports the pty path and every pin edge.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import serial

REPO = Path(__file__).resolve().parents[2]
FIRMWARE = REPO / "firmware"
BUILD = FIRMWARE / "build"
HOST_BINARY = BUILD / "powerboard-host"
AVR_ELF = BUILD / "powerboard.elf"
BRIDGE_BINARY = BUILD / "simavr-bridge"


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE, as PROTOCOL.md section 1."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def frame(body: str) -> bytes:
    data = body.encode("ascii")
    return data + b"*%04X\n" % crc16(data)


def unframe(line: bytes) -> str:
    """Strips and verifies `*CRC`; raises ValueError on a bad line."""
    text = line.rstrip(b"\r\n")
    if len(text) < 5 or text[-5:-4] != b"*":
        raise ValueError(f"unframed line {line!r}")
    if int(text[-4:], 16) != crc16(text[:-5]):
        raise ValueError(f"bad checksum {line!r}")
    return text[:-5].decode("ascii")


def fields(line: str) -> dict[str, str]:
    return dict(tok.split("=", 1) for tok in line.split() if "=" in tok)


@dataclass
class PinEdge:
    channel: int
    on: bool
    mcu_us: int
    mono_ns: int


@dataclass
class Target:
    """A running firmware twin: its pty, its process and the pin edges it reported."""

    name: str
    process: subprocess.Popen[bytes]
    pty: str
    pins: list[PinEdge] = field(default_factory=list)
    resets: int = 0
    _reader: threading.Thread | None = None

    def reset(self) -> None:
        """Simulated MCU reset (SIGUSR1)."""
        self.process.send_signal(signal.SIGUSR1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)


def _read_pins(target: Target) -> None:
    assert target.process.stdout is not None
    for raw in target.process.stdout:
        line = raw.decode("ascii", "replace").strip()
        if line.startswith("pin "):
            f = fields(line)
            target.pins.append(
                PinEdge(int(f["ch"]), f["on"] == "1", int(f["mcu_us"]), int(f["mono_ns"]))
            )
        elif line.startswith("reset "):
            target.resets += 1


def start(name: str) -> Target:
    """Starts `host` (the Linux build) or `simavr` (the AVR image in the bridge)."""
    if name == "host":
        argv = [str(HOST_BINARY)]
    elif name == "simavr":
        argv = [str(BRIDGE_BINARY), str(AVR_ELF)]
    else:
        raise ValueError(name)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 10)
        first = process.stdout.readline().decode("ascii").strip() if ready else ""
        match = re.fullmatch(r"pty (\S+)", first)
        if not match:
            raise RuntimeError(f"{name}: expected 'pty PATH' on stdout, got {first!r}")
    except BaseException:
        process.kill()
        process.wait()
        raise
    target = Target(name, process, match.group(1))
    target._reader = threading.Thread(target=_read_pins, args=(target,), daemon=True)
    target._reader.start()
    return target


class Client:
    """Line-level access to a board: send framed requests, read checked lines."""

    def __init__(self, port: str) -> None:
        self.port = serial.Serial(port, 115200, timeout=0.05)
        self._buffer = b""
        self.seq = 0

    def close(self) -> None:
        self.port.close()

    def send(self, body: str) -> None:
        self.port.write(frame(body))

    def send_raw(self, data: bytes) -> None:
        self.port.write(data)

    def read_raw_line(self, timeout: float = 2.0) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no line within {timeout} s (have {self._buffer!r})")
            self._buffer += self.port.read(max(1, self.port.in_waiting))
        line, self._buffer = self._buffer.split(b"\n", 1)
        if not line.strip(b"\r"):
            return self.read_raw_line(max(0.01, deadline - time.monotonic()))
        return line + b"\n"

    def read_line(self, timeout: float = 2.0) -> str:
        return unframe(self.read_raw_line(timeout))

    def drain(self, quiet: float = 0.3) -> list[str]:
        """Reads lines until none arrived for `quiet` seconds."""
        lines = []
        while True:
            try:
                lines.append(self.read_line(timeout=quiet))
            except TimeoutError:
                return lines

    def request(self, body: str, timeout: float = 2.0) -> tuple[str, list[str]]:
        """Sends `<seq> body`; returns the reply (without seq) and events read before it."""
        self.seq = (self.seq + 1) % 65536
        self.send(f"{self.seq} {body}")
        events = []
        deadline = time.monotonic() + timeout
        while True:
            line = self.read_line(timeout=max(0.01, deadline - time.monotonic()))
            if line.startswith("! "):
                events.append(line)
                continue
            seq, rest = line.split(" ", 1)
            if seq == str(self.seq):
                return rest, events
            raise AssertionError(f"reply to another request: {line!r}")

    def ok(self, body: str) -> dict[str, str]:
        reply, _ = self.request(body)
        assert reply.startswith("OK"), f"{body!r} -> {reply!r}"
        return fields(reply)

    def wait_event(self, kind: str, timeout: float = 2.0) -> dict[str, str]:
        """Skips other lines, including broken ones (a reset can cut a line short)."""
        deadline = time.monotonic() + timeout
        while True:
            raw = self.read_raw_line(timeout=max(0.01, deadline - time.monotonic()))
            try:
                line = unframe(raw)
            except ValueError:
                continue
            if line.startswith("! ") and line.split()[2] == kind:
                return fields(line)


def wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return True
        time.sleep(0.01)
    return False


__all__ = ["Client", "Target", "crc16", "fields", "frame", "os", "start", "unframe"]
