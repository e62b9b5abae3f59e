"""Test scaffolding for the relay board driver: the two firmware twins, a pty proxy that can
corrupt or swallow lines, and a tiny fake peer. Fakes live here, never in the driver.

- `Twin`: the host build (`firmware/build/powerboard-host`) or the AVR image in simavr
  (`firmware/build/simavr-bridge firmware/build/powerboard.elf`). Both print `pty <path>` first,
  then one `pin ch= on= ... mcu_us= mono_ns= clk_us=` line per pin change (mono_ns is
  CLOCK_MONOTONIC, the clock of `time.monotonic_ns()`: ground truth for the driver's edge mapping;
  clk_us is the firmware's clock, ground truth for MCU-timed cuts) and `reset ...` after SIGUSR1
  (a simulated MCU reset).
- `Proxy`: the driver opens the proxy's pty; the proxy forwards whole lines to and from a twin and
  can corrupt or drop chosen ones, or stall the link (`stall()`: hold every byte for a while, as a
  USB serial adapter or hub does, optionally with the driver's side full so its writes block).
- `FakePeer`: a pty whose other end answers requests with a Python function.

Every process and thread started here is stopped by its owner's `close()`/`stop()`, which the
fixtures call in `finally`.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import termios
import threading
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rig.power.relay import crc16, frame

REPO = Path(__file__).resolve().parents[2]
FIRMWARE = REPO / "firmware"
BUILD = FIRMWARE / "build"
HOST_BINARY = BUILD / "powerboard-host"
AVR_ELF = BUILD / "powerboard.elf"
BRIDGE_BINARY = BUILD / "simavr-bridge"

_LAG = re.compile(r"(?:lag|pin) .*lag_us=(-?\d+)")
_MONO = re.compile(r"mono_ns=(\d+)")
_PIN = re.compile(r"pin ch=(\d+) on=(\d) .*mcu_us=(\d+) mono_ns=(\d+) clk_us=(\d+)")


@dataclass(frozen=True)
class Pin:
    channel: int
    on: bool
    mcu_us: int  # µs since the (simulated) MCU reset
    mono_ns: int  # host CLOCK_MONOTONIC when the pin line was logged
    clk_us: int  # the firmware's own clock (the `t=` timeline) when the pin changed


class Twin:
    """One running firmware twin; `stop()` ends it by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        argv = [str(HOST_BINARY)] if kind == "host" else [str(BRIDGE_BINARY), str(AVR_ELF)]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )
        self.pins: list[Pin] = []
        self.resets: list[int] = []  # mono_ns of each simulated reset
        self.lags: list[tuple[int, int]] = []  # simavr: (mono_ns, µs simulation behind the wall)
        self.on_pin: Callable[[Pin], None] | None = None  # called by the reader thread
        self._lock = threading.Lock()
        try:
            assert self.proc.stdout is not None
            ready, _, _ = select.select([self.proc.stdout], [], [], 10)
            first = self.proc.stdout.readline() if ready else ""
            if not first.startswith("pty "):
                raise RuntimeError(f"{kind} twin did not report its pty: {first!r}")
            self.pty = first.split()[1]
        except BaseException:
            self.stop()
            raise
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = _PIN.match(line)
            lag, lag_at = _LAG.match(line), _MONO.search(line)
            with self._lock:
                if lag and lag_at:
                    self.lags.append((int(lag_at.group(1)), int(lag.group(1))))
                if m:
                    ch, on, mcu, mono, clk = (int(g) for g in m.groups())
                    self.pins.append(Pin(ch, bool(on), mcu, mono, clk))
                    if self.on_pin is not None:
                        self.on_pin(self.pins[-1])
                elif line.startswith("reset "):
                    at = re.search(r"mono_ns=(\d+)", line)
                    self.resets.append(int(at.group(1)) if at else time.monotonic_ns())

    def stall_us(self, from_ns: int, to_ns: int) -> int:
        """How much the simulated MCU clock departed from the host clock over [from_ns, to_ns]:
        the spread of the bridge's lag reports (a loaded host stalls the simulator; a clock
        mapping cannot be better than that). 0 for the host build, which runs on the host
        clock."""
        with self._lock:
            before = [lag for at, lag in self.lags if at < from_ns][-1:]
            inside = [lag for at, lag in self.lags if from_ns <= at <= to_ns]
        values = before + inside
        return max(values) - min(values) if values else 0

    def pins_since(self, mono_ns: int) -> list[Pin]:
        with self._lock:
            return [p for p in self.pins if p.mono_ns >= mono_ns]

    def wait_pins(self, count: int, since_ns: int, timeout_s: float = 5.0) -> list[Pin]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pins = self.pins_since(since_ns)
            if len(pins) >= count:
                return pins
            time.sleep(0.005)
        return self.pins_since(since_ns)

    def final_pins(self, timeout_s: float = 60.0) -> list[Pin]:
        """Every pin change of the run: the twin is stopped (SIGTERM: it writes out what it
        logged, then exits) and its log read to the end. The log is another process's pipe,
        read by a thread of ours, and a pin line may follow the reply to the request that made
        it (the host build prints pins from its main loop after the reply), so a log read while
        the twin runs may lack the last pin changes, under load for milliseconds or more."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout_s)
        self._reader.join(timeout_s)
        assert not self._reader.is_alive(), "the twin's log was not read to its end"
        with self._lock:
            return list(self.pins)

    def reset(self) -> int:
        """Simulated MCU reset (SIGUSR1 to the twin); returns the host time it was asked."""
        now = time.monotonic_ns()
        self.proc.send_signal(signal.SIGUSR1)
        return now

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # this PID only
                self.proc.wait(5.0)
        reader = getattr(self, "_reader", None)  # (none when the twin failed to start)
        if reader is not None:
            reader.join(5.0)  # it reads to the end first: closing under it raises in its thread
        if self.proc.stdout is not None:
            with contextlib.suppress(Exception):
                self.proc.stdout.close()


def _raw_pty() -> tuple[int, int, str]:
    master, slave = os.openpty()
    tty.setraw(slave)
    return master, slave, os.ttyname(slave)


LineFilter = Callable[[bytes], bytes | None]  # a whole line with its "\n"; None drops it


class Proxy:
    """Driver <-> proxy pty <-> twin pty, line by line, with filters in both directions.

    One thread per direction: a write blocked on a full pty (a slow simulated UART on a loaded
    host) must not stop the other direction from being read, or both ends wait on each other."""

    def __init__(self, target_pty: str) -> None:
        self.master, self._slave, self.path = _raw_pty()
        self.board = os.open(target_pty, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.board)
        self.to_driver: LineFilter | None = None
        self.to_board: LineFilter | None = None
        self._held_until = {True: 0.0, False: 0.0}  # per direction (to_board?): monotonic s
        self.stalls: list[tuple[float, float]] = []  # (start, seconds) of each stall
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._pump, args=(self.master, self.board, True), daemon=True),
            threading.Thread(target=self._pump, args=(self.board, self.master, False), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump(self, source: int, sink: int, to_board: bool) -> None:
        buf = b""
        while not self._stop.is_set():
            if time.monotonic() < self._held_until[to_board]:
                time.sleep(0.01)  # stalled: the bytes wait in the kernel's pty buffers
                continue
            ready, _, _ = select.select([source], [], [], 0.05)
            if not ready or time.monotonic() < self._held_until[to_board]:
                continue  # (a stall may have begun while it waited)
            try:
                buf += os.read(source, 4096)
            except OSError:
                continue
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                flt = self.to_board if to_board else self.to_driver
                out = flt(line + b"\n") if flt is not None else line + b"\n"
                if out is not None:
                    with contextlib.suppress(OSError):  # closed under us at the end of a test
                        os.write(sink, out)

    def stall(
        self,
        seconds: float,
        to_board: bool = True,
        to_driver: bool = True,
        block_writes: bool = False,
    ) -> None:
        """Move no byte in the chosen directions for `seconds` from now. `block_writes` also
        stops the output of the driver's side of the pty, so the driver's writes block as on
        an adapter that takes nothing."""
        now = time.monotonic()
        self.stalls.append((now, seconds))
        if to_board:
            self._held_until[True] = now + seconds
        if to_driver:
            self._held_until[False] = now + seconds
        if block_writes:
            # Output of the driver's side stopped (as by XOFF): its writes take no byte.
            termios.tcflow(self._slave, termios.TCOOFF)
            timer = threading.Timer(seconds, self._resume_output)
            timer.daemon = True
            timer.start()

    def _resume_output(self) -> None:
        with contextlib.suppress(OSError):  # closed at the end of a test
            termios.tcflow(self._slave, termios.TCOON)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(2.0)
        for fd in (self.master, self._slave, self.board):
            with contextlib.suppress(OSError):
                os.close(fd)


def corrupt(line: bytes) -> bytes:
    """The same line with one character of its body changed, so its checksum fails."""
    i = line.index(b" ") + 1
    flipped = bytes([line[i] ^ 0x01]) if line[i] != ord("*") else b"#"
    return line[:i] + flipped + line[i + 1 :]


Handler = Callable[[int, str, list[str]], str | None]  # (seq, CMD, args) -> reply body or None


class FakePeer:
    """A pty whose far end answers each well-framed request line with `handler`."""

    def __init__(self, handler: Handler) -> None:
        self.master, self._slave, self.path = _raw_pty()
        self.handler = handler
        self.received: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def send(self, body: str) -> None:
        os.write(self.master, frame(body))

    def _run(self) -> None:
        buf = b""
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                buf += os.read(self.master, 4096)
            except OSError:
                continue
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                text = raw.rstrip(b"\r").decode("ascii", "replace")
                body, _, check = text.rpartition("*")
                if not body or check != f"{crc16(body.encode()):04X}":
                    continue
                self.received.append(body)
                seq, cmd, *args = body.split(" ")
                reply = self.handler(int(seq), cmd, args)
                if reply is not None:
                    self.send(reply)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        for fd in (self.master, self._slave):
            with contextlib.suppress(OSError):
                os.close(fd)
