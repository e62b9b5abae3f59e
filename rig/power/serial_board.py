"""The relay board (firmware/) over a serial line: a `PowerSwitch` speaking protocol v2.

See `firmware/PROTOCOL.md` for the wire format and `docs/power-driver.md` for how this driver maps
the MCU clock to the host clock, retries, resynchronises after an MCU reset and what it raises.

Threads: the caller's (requests, one outstanding at a time), a reader (splits the line stream into
replies, matched by sequence number, and events) and a maintenance thread (heartbeats that feed the
firmware watchdog, periodic clock sync, resynchronisation after a reset, and delivery of every
event: it maps each edge to the host clock and hands it to `on_edge`). `close()` stops the
heartbeat: if the host process dies or closes without `safe()`, the firmware watchdog puts every
channel in its safe state after `wdog_ms`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import serial

from rig.errors import PowerError, PowerTimeoutError, ProtocolMismatchError
from rig.power.base import Edge, RailResult
from rig.power.clocksync import ClockError, ClockGlitch, ClockMap, Mapping, SyncSample

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 2
FIRMWARE_VERSION = "0.2.0"  # the firmware release that speaks PROTOCOL_VERSION
MAX_REQUEST = 80
MAX_LINE = 200
DURATION_MAX_US = 4_000_000_000
WHY_BOOT = "boot"  # edges the driver infers from a BOOT event (safe state applied by a reset)


class BoardResetError(PowerError):
    """The board reset while a request was in flight: it may or may not have been carried out
    before the reset (the reset itself puts every channel in its safe state)."""


class BoardRefusedError(PowerError):
    """The board answered a well-formed request with `ERR <code>`."""

    def __init__(self, command: str, code: str) -> None:
        super().__init__(f"relay board refused {command!r}: ERR {code}")
        self.command = command
        self.code = code


@dataclass(frozen=True)
class BoardEdge(Edge):
    """An `Edge` with the board's reason: set, cut, restore, wdog (host-silence watchdog) or
    boot (a reset put the channel in its safe state; inferred from BOOT, no MCU timestamp)."""

    why: str = ""
    epoch: int = 0  # MCU clock epoch: +1 at every reset the driver saw


@dataclass(frozen=True)
class BoardIdentity:
    proto: int
    firmware: str
    build: str
    board: str
    channels: int
    clock_hz: int
    reset_cause: str
    watchdog_trips: int
    watchdog_ms: int


@dataclass(frozen=True)
class ChannelStates:
    mcu_us: int
    on: tuple[bool, ...]
    safe: tuple[bool, ...]
    pending: tuple[int, ...]  # edges still scheduled per channel: 0, 1 or 2


@dataclass(frozen=True)
class BootEvent:
    """A `BOOT` line: the board (re)started. Every channel drives its safe state from `mcu_us`
    (MCU time of the new clock epoch) on."""

    evseq: int
    reset_cause: str
    on: tuple[bool, ...]
    mcu_us: int | None  # None from a board that does not send it (protocol 1)
    rx_ns: int  # host time the line had been received by


@dataclass(frozen=True)
class ResetInfo:
    """What the driver found after an MCU reset it did not ask for."""

    detected_ns: int
    reason: str  # "boot event" or "clock went backwards"
    identity: BoardIdentity
    states: ChannelStates
    boot_edges: tuple[BoardEdge, ...]  # channels the reset moved to their safe state
    cuts_lost: tuple[int, ...]  # channels whose scheduled cut the reset cancelled


@dataclass
class DriverStats:
    requests: int = 0
    retries: int = 0
    timeouts: int = 0
    bad_lines: int = 0
    nacks: int = 0
    stale_replies: int = 0
    events_lost: int = 0
    resets: int = 0
    watchdog_trips: int = 0
    sink_errors: int = 0
    clock_glitches: int = 0  # MCU timestamps refused as impossible (non-monotone)
    unmapped_edges: int = 0


# ---- wire format ----


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF); crc16(b"123456789") == 0x29B1."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def frame(body: str) -> bytes:
    """`body` with `*CRC` and the newline appended. A body with a byte outside 0x20..0x7E is
    refused (`ValueError`): the board answers such a line `- ERR frame`, and a `\r` in it is
    exactly what an older firmware dropped before executing the rest."""
    raw = body.encode("ascii")
    if not all(0x20 <= b <= 0x7E for b in raw):
        raise ValueError(f"request body not printable ASCII: {body!r}")
    return raw + b"*%04X\n" % crc16(raw)


class BadLine(ValueError):
    """A line from the board that fails its checksum or framing."""


@dataclass(frozen=True)
class Line:
    event: bool
    seq: int | None  # reply: echoed request seq (None for "-"); event: evseq
    word: str  # OK / ERR for replies, the KIND for events
    fields: dict[str, str]
    args: tuple[str, ...]
    rx_ns: int  # host time the line had been received by

    def num(self, key: str) -> int:
        try:
            return int(self.fields[key])
        except (KeyError, ValueError) as e:
            raise PowerError(f"relay board line lacks a numeric {key}=: {self}") from e

    def opt_num(self, key: str) -> int | None:
        value = self.fields.get(key)
        if value is None or value == "-":
            return None
        return self.num(key)

    def flags(self, key: str) -> tuple[int, ...]:
        try:
            return tuple(int(v) for v in self.fields[key].split(","))
        except (KeyError, ValueError) as e:
            raise PowerError(f"relay board line lacks a list {key}=: {self}") from e


def parse_line(raw: bytes, rx_ns: int = 0) -> Line:
    """Check and split one line (without its newline) from the board."""
    raw = raw.removesuffix(b"\r")  # one, right before the newline (PROTOCOL.md 1)
    if len(raw) > MAX_LINE or any(b < 0x20 or b > 0x7E for b in raw):
        raise BadLine("overlong or non-printable line")
    text = raw.decode("ascii")
    body, star, check = text.rpartition("*")
    if not star or len(check) != 4 or check.upper() != check:
        raise BadLine("no checksum")
    try:
        expected = int(check, 16)
    except ValueError as e:
        raise BadLine("malformed checksum") from e
    if crc16(body.encode("ascii")) != expected:
        raise BadLine("checksum mismatch")
    tokens = body.split(" ")
    event = tokens[0] == "!"
    if event:
        tokens = tokens[1:]
    if len(tokens) < 2:
        raise BadLine("too few tokens")
    head, word, rest = tokens[0], tokens[1], tokens[2:]
    if head == "-" and not event:
        seq = None
    elif head.isdigit():
        seq = int(head)
    else:
        raise BadLine("bad sequence number")
    fields: dict[str, str] = {}
    args: list[str] = []
    for tok in rest:
        key, eq, value = tok.partition("=")
        if eq:
            fields[key] = value
        else:
            args.append(tok)
    return Line(event, seq, word, fields, tuple(args), rx_ns)


# ---- udev ----


def find_port(serial_number: str, devices: Iterable[Any] | None = None) -> str:
    """The tty node of the USB serial adapter whose serial number (udev `ID_SERIAL_SHORT`) is
    `serial_number`. `devices` defaults to every tty device udev knows (pyudev)."""
    if devices is None:
        import pyudev

        devices = pyudev.Context().list_devices(subsystem="tty")
    nodes = set()
    for device in devices:
        props = device.properties
        ids = {props.get("ID_SERIAL_SHORT"), props.get("ID_USB_SERIAL_SHORT")}
        if serial_number in ids and device.device_node:
            nodes.add(device.device_node)
    if not nodes:
        raise PowerError(f"no relay board with USB serial number {serial_number!r} is attached")
    if len(nodes) > 1:
        raise PowerError(
            f"USB serial number {serial_number!r} matches several ports: {sorted(nodes)}"
        )
    return nodes.pop()


# ---- requests ----


class _Slot:
    """The one outstanding request; the reader thread posts what it heard."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.outcomes: queue.Queue[tuple[str, Line | None, int]] = queue.Queue()


@dataclass(frozen=True)
class _Reply:
    line: Line
    lo_ns: int  # host time the request was first sent
    epoch: int


@dataclass
class _RailPartial:
    line: Line
    mapping: Mapping | None
    epoch: int


@dataclass
class _EdgeRecord:
    epoch: int
    edge: BoardEdge


@dataclass
class _Channel:
    known_on: bool | None = None
    cancel_gen: int = 0
    cancelled_by: str = ""  # what last bumped cancel_gen, for the waiter's error message
    cut_inflight: bool = False
    edges: deque[_EdgeRecord] = field(default_factory=lambda: deque(maxlen=64))
    rails: deque[tuple[int, RailResult]] = field(default_factory=lambda: deque(maxlen=16))
    rail_config: tuple[int, int, int, int] | None = None
    rail_partial: _RailPartial | None = None
    unmapped: deque[tuple[int, int, str]] = field(default_factory=lambda: deque(maxlen=16))


class SerialPendingCut:
    """A cut scheduled on the board. `wait()` returns the off edge; with `off_s` given,
    `wait_restore()` returns the edge that powered the channel again."""

    def __init__(
        self,
        board: RelayBoard,
        channel: int,
        epoch: int,
        accept_us: int,
        at_us: int,
        gen: int,
        rail_config: tuple[int, int, int, int] | None = None,
    ) -> None:
        self._board = board
        self.channel = channel
        self.epoch = epoch
        self.accept_us = accept_us
        self.at_us = at_us  # MCU time the off edge is scheduled for
        self._gen = gen
        self.rail_config = rail_config  # (hi, lo, window_ms, samples) at scheduling

    def wait(self, timeout_s: float) -> Edge:
        return self._board._await_edge(self, "cut", timeout_s)

    def wait_restore(self, timeout_s: float) -> Edge:
        return self._board._await_edge(self, "restore", timeout_s)

    def wait_rail(self, timeout_s: float) -> RailResult:
        """The rail-sense capture started by this cut's off edge (needs `configure_rail`)."""
        edge = self.wait(timeout_s)
        return self._board._await_rail(self, edge, timeout_s)

    def rail(self, timeout_s: float) -> RailResult | None:
        """`RailSensedCut`: the capture of this cut's off edge, or None when the channel had no
        rail-sense thresholds when the cut was scheduled."""
        if self.rail_config is None:
            return None
        return self.wait_rail(timeout_s + self.rail_config[2] / 1000)


class RawSession:
    """Line-level access to the board while the driver stands aside: see
    `RelayBoard.raw_session()`. Lines are sent as given and every line the board sends comes
    here, in order, unparsed by the driver."""

    def __init__(self, board: RelayBoard) -> None:
        self._board = board
        self._lines: queue.Queue[tuple[bytes, int]] = queue.Queue()
        self.boot: Line | None = None  # a BOOT line passed through: the board reset
        self.last_evseq: int | None = None

    def send(self, body: str) -> None:
        """Send `body` with its `*CRC` and newline (`frame`)."""
        self._board._write(frame(body))

    def send_bytes(self, data: bytes) -> None:
        """Send `data` exactly as given (framing errors, noise, partial lines)."""
        self._board._write(data)

    def read_raw(self, timeout_s: float = 2.0) -> bytes:
        """The next non-empty line from the board, without its newline, unchecked."""
        try:
            raw, _ = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise PowerTimeoutError(f"no line from the relay board within {timeout_s} s") from None
        return raw

    def read_line(self, timeout_s: float = 2.0) -> str:
        """The next line with its checksum verified and `*CRC` removed; `BadLine` if it fails."""
        raw = self.read_raw(timeout_s)
        parse_line(raw)
        return raw.removesuffix(b"\r").decode("ascii").rpartition("*")[0]

    def drain(self, quiet_s: float = 0.2) -> list[bytes]:
        """Every line that arrives until none did for `quiet_s`."""
        lines = []
        while True:
            try:
                lines.append(self.read_raw(quiet_s))
            except PowerTimeoutError:
                return lines

    def _receive(self, raw: bytes, rx_ns: int) -> None:
        with contextlib.suppress(BadLine):
            line = parse_line(raw, rx_ns)
            if line.event:
                self.last_evseq = line.seq
                if line.word == "BOOT":
                    self.boot = line
        self._lines.put((raw, rx_ns))


class RelayBoard:
    """The firmware/ relay board over pyserial. Thread-safe; one request on the wire at a time."""

    def __init__(
        self,
        port: str,
        *,
        on_edge: Callable[[Edge], None] | None = None,
        on_rail: Callable[[RailResult], None] | None = None,
        on_reset: Callable[[ResetInfo], None] | None = None,
        baudrate: int = 115200,
        watchdog_ms: int | None = None,
        reply_timeout_s: float = 0.5,
        retries: int = 3,
        boot_timeout_s: float = 3.0,
        sync_interval_s: float = 2.0,
        sync_burst: int = 4,
        rate_tolerance: float = 0.005,
        edge_latency_us: float = 5.0,
        nonlinear_ppm: float = 2.0,
    ) -> None:
        """Open `port`, identify the board (refusing another protocol version) and start the
        reader and maintenance threads. `watchdog_ms` sets the board's host-silence watchdog
        (None leaves it as it is); heartbeats go out four times per watchdog period.
        `edge_latency_us` is how long before its timestamp an edge may have happened (the
        firmware reads the clock just after writing the pin)."""
        self.port = port
        self._on_edge = on_edge
        self._on_rail = on_rail
        self._on_reset = on_reset
        self._watchdog_ms = watchdog_ms
        self._reply_timeout_s = reply_timeout_s
        self._retries = retries
        self._sync_interval_ns = int(sync_interval_s * 1e9)
        self._burst_n = max(1, sync_burst)
        self._rate_tolerance = rate_tolerance
        self._nonlinear_ppm = nonlinear_ppm
        self._edge_latency_ns = int(edge_latency_us * 1000)
        self.stats = DriverStats()
        self.resets: list[ResetInfo] = []
        self.last_boot: BootEvent | None = None  # the latest BOOT line seen
        self._raw: RawSession | None = None

        self._io_lock = threading.Lock()
        self._resync_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._cond = threading.Condition(self._state_lock)
        self._slot: _Slot | None = None
        self._seq = secrets.randbelow(65536)
        self._epoch = 0
        self._clock = self._new_clock(1_000_000)
        self._resync_needed = False
        self._reset_reason = ""
        self._boot_line: Line | None = None
        self._last_old_sample: SyncSample | None = None
        self._ev_next: int | None = None
        self._events: queue.Queue[tuple[int, ClockMap, Line]] = queue.Queue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._closed = False
        self._broken: PowerError | None = None
        self._last_tx_ns = 0
        self._last_burst_ns = 0
        self._heartbeat_ns = int(min(sync_interval_s, 1.0) * 1e9)
        self._chans: list[_Channel] = []
        self.identity: BoardIdentity

        ser = serial.Serial()
        ser.port = port
        ser.baudrate = baudrate
        ser.timeout = 0.1
        ser.write_timeout = max(1.0, reply_timeout_s)
        # Keep DTR/RTS low: an Arduino resets when DTR rises (it still may on open, on Linux).
        ser.dtr = False
        ser.rts = False
        try:
            ser.open()
        except (serial.SerialException, OSError) as e:
            raise PowerError(f"cannot open relay board port {port}: {e}") from e
        self._ser = ser
        self._reader = threading.Thread(target=self._read_loop, name=f"relay-rx {port}")
        self._reader.daemon = True
        self._maint = threading.Thread(target=self._maintain, name=f"relay-hb {port}")
        self._maint.daemon = True
        try:
            self._ser.reset_input_buffer()
            self._ser.write(b"\n")  # ends whatever partial line the board's parser holds
            self._reader.start()
            self._handshake(boot_timeout_s)
        except BaseException:
            self._shutdown()
            raise
        self._maint.start()

    @classmethod
    def find(
        cls, serial_number: str, devices: Iterable[Any] | None = None, **kwargs: Any
    ) -> RelayBoard:
        """Open the board whose USB serial adapter has this serial number (udev identity)."""
        return cls(find_port(serial_number, devices), **kwargs)

    def __enter__(self) -> RelayBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _new_clock(self, clock_hz: int) -> ClockMap:
        tick_ns = max(1000, math.ceil(1e9 / clock_hz)) if clock_hz > 0 else 1000
        return ClockMap(
            ns_per_us=1000.0,
            rate_tolerance=self._rate_tolerance,
            nonlinear_ppm=self._nonlinear_ppm,
            tick_ns=tick_ns,
        )

    # ---- PowerSwitch ----

    @property
    def channels(self) -> int:
        return self.identity.channels

    def on(self, channel: int) -> Edge:
        return self._set(channel, True)

    def off(self, channel: int) -> Edge:
        return self._set(channel, False)

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> SerialPendingCut:
        self._check_channel(channel)
        delay_us = round(delay_s * 1e6)
        off_us = 0 if off_s is None else max(1, round(off_s * 1e6))
        if not 0 <= delay_us <= DURATION_MAX_US or not 0 <= off_us <= DURATION_MAX_US:
            raise ValueError(f"cut delay {delay_s} s / off {off_s} s out of range")
        self._begin()
        self._request("SYNC")  # fresh sample (and reset detection) just before the cut
        with self._state_lock:
            chan = self._chans[channel]
            chan.cut_inflight = True
            gen = chan.cancel_gen
            rail_config = chan.rail_config
        try:
            reply = self._request("CUT", channel, delay_us, off_us)
        except BoardRefusedError:
            with self._state_lock:
                chan.cut_inflight = False
            raise
        line = reply.line
        return SerialPendingCut(
            self, channel, reply.epoch, line.num("t"), line.num("at"), gen, rail_config
        )

    def glitch(self, channel: int, width_s: float, delay_s: float = 0.0) -> SerialPendingCut:
        """Power off for `width_s` (from about 10 µs), timed by the board, then on again."""
        return self.cut(channel, delay_s, width_s)

    def state(self, channel: int) -> bool:
        self._check_channel(channel)
        return self.states().on[channel]

    def safe(self) -> None:
        """Cancel every scheduled cut and put every channel in the board's safe state."""
        self._begin()
        states = self.states()
        for ch in range(self.channels):
            if states.on[ch] != states.safe[ch] or states.pending[ch]:
                self._set(ch, states.safe[ch])

    def close(self) -> None:
        """Stop heartbeats and release the port. Switches nothing: channels stay as they are
        until `wdog_ms` of silence, when the board's watchdog puts them in their safe state.
        Call `safe()` first for an orderly end."""
        if self._closed:
            return
        self._shutdown()

    # ---- more of the board ----

    @contextlib.contextmanager
    def raw_session(self) -> Iterator[RawSession]:
        """Exclusive line-level access to the board, for diagnostics and the protocol's
        conformance tests (every example of firmware/PROTOCOL.md runs through it). While it is
        open the driver sends nothing (no heartbeats: the board's watchdog keeps counting, and
        trips if the session stays silent for `wdog_ms`) and interprets nothing: every line
        goes to the session. Cuts scheduled through the driver before are no longer followed
        (their waiters get `PowerError`). On exit the driver re-reads the board: after a reset
        seen in the session, the full resynchronisation (`on_reset`); otherwise identity,
        its own settings, the clock and the channel states. Edges the session caused are not
        reported to `on_edge`: the session's owner saw them."""
        self._begin()
        session = RawSession(self)
        try:
            with self._io_lock:
                with self._cond:
                    for chan in self._chans:
                        chan.cancel_gen += 1
                        chan.cancelled_by = "a raw session on the port"
                        chan.cut_inflight = False
                    self._cond.notify_all()
                self._raw = session
                try:
                    yield session
                finally:
                    self._raw = None
        finally:
            self._after_raw(session)

    def _after_raw(self, session: RawSession) -> None:
        with self._cond:
            if session.last_evseq is not None:
                self._ev_next = (session.last_evseq + 1) % 65536
            if session.boot is not None:
                self._declare_reset("boot event", session.boot)
        if session.boot is not None:
            self._resync()
            return
        identity = self._identify()
        with self._state_lock:
            self.identity = identity
        self._configure()
        self._sync_burst()
        self._read_states()

    def states(self) -> ChannelStates:
        self._begin()
        return self._read_states()

    def _read_states(self) -> ChannelStates:
        line = self._request("STATE").line
        states = ChannelStates(
            mcu_us=line.num("t"),
            on=tuple(bool(v) for v in line.flags("on")),
            safe=tuple(bool(v) for v in line.flags("safe")),
            pending=line.flags("pend"),
        )
        with self._state_lock:
            for ch, on in enumerate(states.on):
                if ch < len(self._chans):
                    self._chans[ch].known_on = on
        return states

    def abort(self, channel: int) -> bool:
        """Cancel a scheduled cut or restore; the channel stays as it is. True if one was."""
        self._check_channel(channel)
        self._begin()
        self._cancel(channel, f"ABORT {channel}")
        return self._request("ABORT", channel).line.num("cancelled") == 1

    def set_safe_state(self, channel: int, on: bool) -> None:
        """The state the board applies at boot and on watchdog (kept in its EEPROM)."""
        self._check_channel(channel)
        self._begin()
        self._request("SAFE", channel, int(on))

    def configure_rail(
        self, channel: int, hi: int, lo: int, window_ms: int, samples: int = 0
    ) -> None:
        """Rail-sense thresholds in ADC counts (0 disables), capture window and how many samples
        to report. Re-applied by the driver after an MCU reset."""
        self._check_channel(channel)
        self._begin()
        self._request("RAIL", channel, hi, lo, window_ms, samples)
        with self._state_lock:
            self._chans[channel].rail_config = (hi, lo, window_ms, samples)

    def adc(self, channel: int) -> int:
        """One rail-sense reading now (0..1023)."""
        self._check_channel(channel)
        self._begin()
        return self._request("ADC", channel).line.num("v")

    def sync(self) -> Mapping:
        """Run a sync burst now; return the mapping of the board's current time."""
        self._begin()
        self._sync_burst()
        with self._state_lock:
            latest = self._clock.latest
            assert latest is not None
            return self._clock.map(latest.mcu_us)

    @property
    def last_request_ns(self) -> int:
        """Host time the last request (heartbeats included) was written: the board's watchdog
        counts the host's silence from when that request arrived."""
        return self._last_tx_ns

    def map_mcu_us(self, mcu_us: int) -> Mapping:
        """Map an instant of the board's current clock epoch to the host clock."""
        with self._state_lock:
            return self._clock.map(mcu_us)

    def clock_report(self) -> dict[str, float | None]:
        """Figures of the current clock mapping, for logs and the docs."""
        with self._state_lock:
            clock = self._clock
            latest = clock.latest
            b_min, b_max = clock.rate_bounds()
            return {
                "samples": float(len(clock.samples)),
                "best_half_rtt_ns": min((s.half_ns for s in clock.samples), default=None),
                "worst_half_rtt_ns": max((s.half_ns for s in clock.samples), default=None),
                "latest_half_rtt_ns": latest.half_ns if latest else None,
                "drift_ppm": clock.drift_ppm(),
                "rate_bound_ppm": (b_max - b_min) / 2 / clock.nominal * 1e6,
                "residual_ns": clock.residual_ns,
                "latest_mcu_us": latest.mcu_us if latest else None,
            }

    # ---- requests ----

    def _check_channel(self, channel: int) -> None:
        if not 0 <= channel < self.channels:
            raise PowerError(f"relay board has no channel {channel} (0..{self.channels - 1})")

    def _check_usable(self) -> None:
        if self._closed:
            raise PowerError("relay board driver is closed")
        if self._broken is not None:
            raise self._broken

    def _begin(self) -> None:
        """Before a public call: run a pending resynchronisation, or wait for one under way
        (the caller must not act on the board's state half-way through it)."""
        self._check_usable()
        self._resync()

    def _request(self, command: str, *args: int, timeout_s: float | None = None) -> _Reply:
        """Send one request and return its OK reply. Resends the same line (the board executes
        a line once and replays its reply) after a timeout, a line that failed its checksum, or
        a framing error report; raises `PowerTimeoutError`, `PowerError`, `BoardRefusedError`
        or `BoardResetError`."""
        self._check_usable()
        timeout_s = self._reply_timeout_s if timeout_s is None else timeout_s
        with self._io_lock:
            self._seq = (self._seq + 1) % 65536
            body = " ".join([str(self._seq), command, *(str(a) for a in args)])
            wire = frame(body)
            if len(wire) - 1 > MAX_REQUEST:
                raise ValueError(f"request too long: {body}")
            slot = _Slot(self._seq)
            epoch = self._epoch
            first_ns: int | None = None
            resends = 0
            timeouts = bad = 0
            self._slot = slot
            try:
                while True:
                    if self._epoch != epoch:
                        raise BoardResetError(f"relay board reset during {body!r}")
                    sent_ns = time.monotonic_ns()
                    self._write(wire)
                    self._last_tx_ns = sent_ns
                    if first_ns is None:
                        first_ns = sent_ns
                    self.stats.requests += 1
                    outcome = self._await_outcome(slot, timeout_s)
                    kind, line, line_epoch = outcome
                    if kind == "reply":
                        assert line is not None
                        break
                    if kind == "timeout":
                        timeouts += 1
                        self.stats.timeouts += 1
                    else:
                        bad += 1
                    if resends >= self._retries:
                        if timeouts and not bad:
                            raise PowerTimeoutError(
                                f"relay board did not answer {body!r} in {timeout_s:.3f} s "
                                f"({resends + 1} attempts)"
                            )
                        raise PowerError(
                            f"no valid reply to {body!r} after {resends + 1} attempts "
                            f"({bad} corrupted or refused lines, {timeouts} timeouts)"
                        )
                    resends += 1
                    self.stats.retries += 1
                    log.info("relay board: resending %r (%s)", body, kind)
            finally:
                self._slot = None
            reply = _Reply(line, first_ns, line_epoch)
            if line_epoch != epoch:
                if command == "CUT":
                    with self._state_lock:
                        self._chans[args[0]].cut_inflight = True  # resync aborts it
                raise BoardResetError(f"relay board reset during {body!r}")
            if line.word != "OK":
                raise BoardRefusedError(body, line.args[0] if line.args else line.word)
            if "t" in line.fields:
                self._add_sample(SyncSample(line.num("t"), first_ns, line.rx_ns), line_epoch)
            return reply

    def _await_outcome(self, slot: _Slot, timeout_s: float) -> tuple[str, Line | None, int]:
        """The reply, or why to resend. After a line that failed its checksum the reply may
        still come (that line may have been an event): wait a short grace before resending."""
        deadline = time.monotonic() + timeout_s
        grace_until: float | None = None
        while True:
            now = time.monotonic()
            limit = deadline if grace_until is None else min(deadline, grace_until)
            if self._broken is not None:
                raise self._broken
            try:
                kind, line, epoch = slot.outcomes.get(timeout=max(0.0, min(limit - now, 0.1)))
            except queue.Empty:
                now = time.monotonic()
                if grace_until is not None and now >= grace_until:
                    return "bad", None, self._epoch
                if now >= deadline:
                    return "timeout", None, self._epoch
                continue
            if kind in ("reply", "nack"):
                return kind, line, epoch
            # A corrupted line: ours or an event's. Give the real reply a moment.
            if grace_until is None:
                grace_until = time.monotonic() + min(0.05, timeout_s / 4)

    def _write(self, data: bytes) -> None:
        try:
            self._ser.write(data)
            self._ser.flush()
        except (serial.SerialException, OSError) as e:
            self._fail(PowerError(f"relay board port {self.port} failed: {e}"))
            raise self._broken from e  # type: ignore[misc]

    def _add_sample(self, sample: SyncSample, epoch: int) -> None:
        with self._state_lock:
            if epoch != self._epoch:
                return
            latest = self._clock.latest
            if latest is not None and sample.mcu_us < latest.mcu_us:
                # Backwards: a reset without a BOOT line if `t` fits as uptime since a reset
                # after the last sample, else an impossible reading (a glitch), refused.
                since_us = (sample.hi_ns - latest.lo_ns) / 1000 * (1 + self._rate_tolerance)
                if sample.mcu_us <= since_us:
                    self._declare_reset("clock went backwards", None)
                    self._wake.set()
            try:
                self._clock.add(sample)
            except ClockGlitch as e:
                self.stats.clock_glitches += 1
                log.warning("relay board: refused an impossible MCU timestamp: %s", e)

    def _sync_burst(self) -> None:
        for _ in range(self._burst_n):
            self._request("SYNC")
        self._last_burst_ns = time.monotonic_ns()

    def _set(self, channel: int, on: bool) -> Edge:
        self._check_channel(channel)
        self._begin()
        self._cancel(channel, f"SET {channel} {int(on)}")
        reply = self._request("SET", channel, int(on))
        line = reply.line
        t = line.num("t")
        if line.num("edge"):
            edge = self._find_edge(reply.epoch, channel, lambda e: e.source_us == t, 1.0)
            if edge is not None:
                return edge
            log.warning("relay board: no EDGE event for channel %d at t=%d", channel, t)
        with self._state_lock:
            self._chans[channel].known_on = on
            mapping = self._clock.map(t, not_after_ns=line.rx_ns)
        return BoardEdge(channel, on, mapping.host_ns, mapping.error_ns, t, "set", reply.epoch)

    def _cancel(self, channel: int, by: str) -> None:
        """SET and ABORT (safe() sets) cancel a scheduled cut: wake its waiter."""
        with self._cond:
            self._chans[channel].cancel_gen += 1
            self._chans[channel].cancelled_by = by
            self._chans[channel].cut_inflight = False
            self._cond.notify_all()

    # ---- waiting for events ----

    def _find_edge(
        self, epoch: int, channel: int, match: Callable[[BoardEdge], bool], timeout_s: float
    ) -> BoardEdge | None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for rec in self._chans[channel].edges:
                    if rec.epoch == epoch and match(rec.edge):
                        return rec.edge
                left = deadline - time.monotonic()
                if left <= 0 or self._epoch != epoch or self._closed:
                    return None
                self._cond.wait(min(left, 0.1))

    def _await_edge(self, cut: SerialPendingCut, why: str, timeout_s: float) -> Edge:
        deadline = time.monotonic() + timeout_s
        chan = self._chans[cut.channel]
        with self._cond:
            while True:
                for rec in chan.edges:
                    edge = rec.edge
                    if (
                        rec.epoch == cut.epoch
                        and edge.why == why
                        and edge.source_us is not None
                        and edge.source_us >= cut.accept_us
                    ):
                        if why == "cut":
                            chan.cut_inflight = False
                        return edge
                for epoch, t, why_not in chan.unmapped:
                    if epoch == cut.epoch and t >= cut.accept_us:
                        raise PowerError(
                            f"the {why} edge of channel {cut.channel} happened but its MCU "
                            f"timestamp t={t} contradicts the clock sync ({why_not})"
                        )
                if self._epoch != cut.epoch:
                    raise BoardResetError(
                        f"relay board reset before the {why} edge of channel {cut.channel}"
                    )
                if chan.cancel_gen != cut._gen:
                    raise PowerError(
                        f"the cut of channel {cut.channel} was cancelled by "
                        f"{chan.cancelled_by} before its {why} edge"
                    )
                if self._broken is not None:
                    raise self._broken
                if self._closed:
                    raise PowerError("relay board driver closed while waiting for an edge")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PowerTimeoutError(
                        f"no {why} edge on channel {cut.channel} within {timeout_s:.3f} s"
                    )
                self._cond.wait(min(left, 0.1))

    def _await_rail(self, cut: SerialPendingCut, edge: Edge, timeout_s: float) -> RailResult:
        deadline = time.monotonic() + timeout_s
        chan = self._chans[cut.channel]
        with self._cond:
            while True:
                for epoch, result in chan.rails:
                    if epoch == cut.epoch and result.edge_us == edge.source_us:
                        return result
                left = deadline - time.monotonic()
                if left <= 0 or self._epoch != cut.epoch or self._closed:
                    raise PowerTimeoutError(
                        f"no rail-sense result for channel {cut.channel} within {timeout_s:.3f} s"
                    )
                self._cond.wait(min(left, 0.1))

    # ---- reader thread ----

    def _read_loop(self) -> None:
        buf = bytearray()
        while not self._stop.is_set():
            try:
                data = self._ser.read(max(1, self._ser.in_waiting))
            except (serial.SerialException, OSError, TypeError, AttributeError) as e:
                if not self._stop.is_set():
                    self._fail(PowerError(f"relay board port {self.port} failed: {e}"))
                return
            if not data:
                continue
            rx_ns = time.monotonic_ns()
            buf += data
            while True:
                end = buf.find(b"\n")
                if end < 0:
                    break
                raw = bytes(buf[:end])
                del buf[: end + 1]
                if not raw.strip(b"\r"):
                    continue
                session = self._raw
                if session is not None:
                    session._receive(raw, rx_ns)
                else:
                    self._handle_line(raw, rx_ns)
            if len(buf) > 4 * MAX_LINE:  # noise without newlines
                buf.clear()
                self._bad_line()

    def _bad_line(self) -> None:
        self.stats.bad_lines += 1
        slot = self._slot
        if slot is not None:
            slot.outcomes.put(("bad", None, self._epoch))

    def _handle_line(self, raw: bytes, rx_ns: int) -> None:
        try:
            line = parse_line(raw, rx_ns)
        except BadLine as e:
            log.debug("relay board: bad line %r (%s)", raw, e)
            self._bad_line()
            return
        if line.event:
            self._handle_event(line)
            return
        slot = self._slot
        if line.seq is None:
            self.stats.nacks += 1
            if slot is not None:
                slot.outcomes.put(("nack", line, self._epoch))
        elif slot is not None and line.seq == slot.seq:
            slot.outcomes.put(("reply", line, self._epoch))
        else:
            self.stats.stale_replies += 1

    def _handle_event(self, line: Line) -> None:
        assert line.seq is not None
        if line.word == "BOOT":
            with self._cond:
                self._declare_reset("boot event", line)
                self._ev_next = (line.seq + 1) % 65536
            self._wake.set()
            return
        with self._cond:
            if self._ev_next is not None and line.seq != self._ev_next:
                missed = (line.seq - self._ev_next) % 65536
                self.stats.events_lost += missed
                log.warning("relay board: %d event line(s) lost before #%d", missed, line.seq)
            self._ev_next = (line.seq + 1) % 65536
            if line.word == "WDOG":
                self.stats.watchdog_trips += 1
                # Says whether the host really was silent: a trip while requests flowed is a
                # firmware or clock fault, not a dead host.
                by = (
                    f"the board's watchdog (WDOG event #{line.seq} t={line.fields.get('t')} "
                    f"silent_ms={line.fields.get('silent_ms')}; the host's last request was "
                    f"written {(line.rx_ns - self._last_tx_ns) / 1e6:.1f} ms before it arrived)"
                )
                log.warning("relay board: %s", by)
                for chan in self._chans:
                    chan.cancel_gen += 1
                    chan.cancelled_by = by
                    chan.cut_inflight = False
                self._cond.notify_all()
            self._events.put((self._epoch, self._clock, line))
        self._wake.set()

    def _declare_reset(self, reason: str, boot: Line | None) -> None:
        """State lock held. A new MCU clock epoch begins; waiters fail; resync follows."""
        self._epoch += 1
        if boot is not None:
            self.last_boot = BootEvent(
                boot.seq or 0,
                boot.fields.get("reset", "unknown"),
                tuple(bool(v) for v in boot.flags("on")) if "on" in boot.fields else (),
                boot.opt_num("t"),
                boot.rx_ns,
            )
        self._last_old_sample = self._clock.latest
        self._clock = self._new_clock(self.identity.clock_hz if self._has_identity() else 10**6)
        self._boot_line = boot
        self._reset_reason = reason
        self._resync_needed = True
        self._cond.notify_all()

    def _has_identity(self) -> bool:
        return hasattr(self, "identity")

    def _fail(self, error: PowerError) -> None:
        with self._cond:
            if self._broken is None:
                self._broken = error
                log.error("relay board: %s", error)
            self._cond.notify_all()
        slot = self._slot
        if slot is not None:
            slot.outcomes.put(("bad", None, self._epoch))

    # ---- handshake and resync ----

    def _identify(self, boot_timeout_s: float = 0.0) -> BoardIdentity:
        deadline = time.monotonic() + boot_timeout_s
        while True:
            try:
                line = self._request("ID").line
                break
            except BoardResetError:
                continue  # the board booted while we asked (e.g. DTR reset on open)
            except PowerTimeoutError:
                if time.monotonic() >= deadline:
                    raise
            except BoardRefusedError as e:
                raise ProtocolMismatchError(
                    f"the device on {self.port} does not answer ID ({e}); "
                    f"reflash firmware v{FIRMWARE_VERSION} (protocol {PROTOCOL_VERSION})"
                ) from e
        proto = line.fields.get("proto")
        if proto != str(PROTOCOL_VERSION):
            raise ProtocolMismatchError(
                f"relay board on {self.port} speaks protocol {proto} (firmware "
                f"{line.fields.get('fw', '?')}), this host speaks {PROTOCOL_VERSION}: "
                f"reflash firmware v{FIRMWARE_VERSION}"
            )
        return BoardIdentity(
            proto=int(proto),
            firmware=line.fields.get("fw", "?"),
            build=line.fields.get("build", "?"),
            board=line.fields.get("board", "?"),
            channels=line.num("ch"),
            clock_hz=line.num("clk_hz"),
            reset_cause=line.fields.get("reset", "unknown"),
            watchdog_trips=line.num("trips"),
            watchdog_ms=line.num("wdog_ms"),
        )

    def _configure(self) -> None:
        """Board settings the driver owns, (re)applied after open and after every reset."""
        if self._watchdog_ms is not None:
            wdog = self._request("WDOG", self._watchdog_ms).line.num("wdog_ms")
        else:
            wdog = self.identity.watchdog_ms
        period_s = wdog / 4000 if wdog else self._sync_interval_ns / 1e9
        self._heartbeat_ns = int(max(0.02, min(period_s, self._sync_interval_ns / 1e9)) * 1e9)
        with self._state_lock:
            configs = [(ch, c.rail_config) for ch, c in enumerate(self._chans)]
        for ch, config in configs:
            if config is not None:
                self._request("RAIL", ch, *config)

    def _handshake(self, boot_timeout_s: float) -> None:
        try:
            identity = self._identify(boot_timeout_s)
        except PowerTimeoutError as e:
            raise PowerTimeoutError(
                f"no relay board answers on {self.port} (is it the board, at 115200 baud, "
                f"with firmware v{FIRMWARE_VERSION}?): {e}"
            ) from e
        with self._state_lock:
            self.identity = identity
            self._chans = [_Channel() for _ in range(identity.channels)]
            self._clock = self._new_clock(identity.clock_hz)
            self._resync_needed = False
        if identity.watchdog_trips:
            log.warning(
                "relay board on %s: its watchdog tripped %d time(s) since its reset (a host "
                "went silent); channels were put in their safe state",
                self.port,
                identity.watchdog_trips,
            )
        self._configure()
        self._sync_burst()
        self._read_states()
        if self._resync_needed:  # it reset during the handshake: start over once it is up
            self._resync()

    def _resync(self) -> None:
        """After an MCU reset: cancel any cut the fresh board may have taken from the line,
        re-identify, reapply settings, re-sync the clock, reconcile the channel states and
        report. Switches nothing itself (the reset already applied the safe states), except to
        undo a cut that was on its way across the reset and fired on the fresh board before it
        could be cancelled."""
        with self._resync_lock:
            for _ in range(5):
                with self._state_lock:
                    if not self._resync_needed:
                        return
                    self._resync_needed = False
                    epoch = self._epoch
                    boot = self._boot_line
                    reason = self._reset_reason
                    old_sample = self._last_old_sample
                    before = [c.known_on for c in self._chans]
                    inflight = [ch for ch, c in enumerate(self._chans) if c.cut_inflight]
                detected_ns = boot.rx_ns if boot is not None else time.monotonic_ns()
                boot_on = tuple(bool(v) for v in boot.flags("on")) if boot is not None else ()
                try:
                    # First: a CUT in flight may have reached the fresh board (its line arrived
                    # after the reset); cancel it before it fires.
                    for ch in inflight:
                        self._request("ABORT", ch)
                    identity = self._identify(1.0)
                    with self._state_lock:
                        self.identity = identity
                    self._configure()
                    self._sync_burst()
                    states = self._read_states()
                    stale = [
                        ch for ch in inflight if ch < len(boot_on) and states.on[ch] != boot_on[ch]
                    ]
                    for ch in stale:  # it fired first: back to the state the reset gave it
                        log.warning(
                            "relay board: a cut sent before the reset fired on channel %d"
                            " after it; restoring the channel's boot state",
                            ch,
                        )
                        self._request("SET", ch, int(boot_on[ch]))
                    if stale:
                        states = self._read_states()
                except BoardResetError:
                    continue
                except PowerError:
                    with self._state_lock:
                        self._resync_needed = True
                    raise
                with self._state_lock:
                    if self._epoch != epoch:
                        continue
                    for ch in inflight:
                        self._chans[ch].cut_inflight = False
                    boot_on = boot_on or states.on
                    edges = self._boot_edges(boot, epoch, before, boot_on, old_sample, detected_ns)
                info = ResetInfo(
                    detected_ns=detected_ns,
                    reason=reason,
                    identity=identity,
                    states=states,
                    boot_edges=tuple(edges),
                    cuts_lost=tuple(inflight),
                )
                self.stats.resets += 1
                self.resets.append(info)
                log.warning(
                    "relay board on %s reset (%s, cause %s): resynchronised; channels in safe "
                    "state %s; cuts lost on %s",
                    self.port,
                    reason,
                    identity.reset_cause,
                    states.on,
                    list(inflight),
                )
                for edge in edges:
                    self._emit(edge)
                if self._on_reset is not None:
                    try:
                        self._on_reset(info)
                    except Exception:
                        self.stats.sink_errors += 1
                        log.exception("relay board: on_reset sink failed")
                return
            raise PowerError(f"relay board on {self.port} keeps resetting")

    def _boot_edges(
        self,
        boot: Line | None,
        epoch: int,
        before: list[bool | None],
        boot_on: tuple[bool, ...],
        old_sample: SyncSample | None,
        detected_ns: int,
    ) -> list[BoardEdge]:
        """State lock held. Edges the reset caused: channels whose state differs from what the
        driver last knew. They happened after the last line of the old epoch was sent (lower
        bound) and before the BOOT line arrived, and no later than BOOT's `t`, when every
        channel drives its safe state (upper bound, by extrapolation)."""
        lo = old_sample.lo_ns if old_sample is not None else detected_ns - 10**9
        hi = detected_ns
        boot_us = boot.opt_num("t") if boot is not None else None
        if boot_us is not None:
            with contextlib.suppress(ClockError):
                hi = min(hi, self._clock.map(boot_us).hi_ns)
        lo = min(lo, hi)
        edges = []
        for ch, was in enumerate(before):
            if ch >= len(boot_on) or was is None or was == boot_on[ch]:
                continue
            edge = BoardEdge(
                ch, boot_on[ch], (lo + hi) // 2, math.ceil((hi - lo) / 2), None, WHY_BOOT, epoch
            )
            self._chans[ch].edges.append(_EdgeRecord(epoch, edge))
            self._chans[ch].known_on = boot_on[ch]
            edges.append(edge)
        self._cond.notify_all()
        return edges

    # ---- maintenance thread ----

    def _maintain(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.02)
            self._wake.clear()
            if self._stop.is_set() or self._broken is not None:
                return
            try:
                if self._resync_needed:
                    self._resync()
                while True:
                    try:
                        epoch, clock, line = self._events.get_nowait()
                    except queue.Empty:
                        break
                    self._dispatch(epoch, clock, line)
                now = time.monotonic_ns()
                if now - self._last_burst_ns >= self._sync_interval_ns:
                    self._sync_burst()
                elif now - self._last_tx_ns >= self._heartbeat_ns:
                    self._request("SYNC")
            except PowerError as e:
                if not self._stop.is_set():
                    log.warning("relay board maintenance: %s", e)
                    self._stop.wait(0.05)
            except Exception:
                log.exception("relay board maintenance thread")
                self._stop.wait(0.05)

    def _map_event(self, epoch: int, clock: ClockMap, t: int, rx_ns: int) -> Mapping:
        """Map an event's MCU time; first get a sync sample after it when there is none, so the
        edge is interpolated between two samples instead of extrapolated."""
        with self._state_lock:
            latest = clock.latest
            current = epoch == self._epoch
        if current and (latest is None or latest.mcu_us < t):
            with contextlib.suppress(PowerError):
                self._request("SYNC")
        with self._state_lock:
            mapping = clock.map(t, not_after_ns=rx_ns)
        if self._edge_latency_ns:
            mapping = Mapping(mapping.lo_ns - self._edge_latency_ns, mapping.hi_ns, mapping.method)
        return mapping

    def _dispatch(self, epoch: int, clock: ClockMap, line: Line) -> None:
        # The board writes a capture's RAILS right after its RAIL: anything else next means
        # the samples line was lost; the capture is reported without them.
        for ch, chan in enumerate(self._chans):
            held = chan.rail_partial
            if held is not None and (
                line.word != "RAILS" or line.seq != ((held.line.seq or 0) + 1) % 65536
            ):
                chan.rail_partial = None
                self._finish_rail(ch, held, None)
        if line.word == "EDGE":
            ch, on, t = line.num("ch"), bool(line.num("on")), line.num("t")
            try:
                mapping = self._map_event(epoch, clock, t, line.rx_ns)
            except ClockError as e:
                # Timestamps that contradict causality: the edge instant is unknown. Fail the
                # channel's waiters (a rig fault, never a drive failure) rather than guess.
                log.error("relay board: cannot map edge %s: %s", line, e)
                self.stats.unmapped_edges += 1
                with self._cond:
                    if 0 <= ch < len(self._chans):
                        self._chans[ch].unmapped.append((epoch, t, str(e)))
                    self._cond.notify_all()
                return
            edge = BoardEdge(
                ch,
                on,
                mapping.host_ns,
                mapping.error_ns,
                t,
                line.fields.get("why", "?"),
                epoch,
            )
            with self._cond:
                if 0 <= ch < len(self._chans):
                    chan = self._chans[ch]
                    chan.edges.append(_EdgeRecord(epoch, edge))
                    if epoch == self._epoch:
                        chan.known_on = on
                self._cond.notify_all()
            if edge.why == "wdog":
                log.warning("relay board watchdog put channel %d %s", ch, "on" if on else "off")
            self._emit(edge)
        elif line.word == "WDOG":
            log.warning(
                "relay board watchdog tripped: host silent %s ms", line.fields.get("silent_ms")
            )
        elif line.word in ("RAIL", "RAILS"):
            self._dispatch_rail(epoch, clock, line)
        else:
            log.info("relay board: unknown event %s", line)

    def _dispatch_rail(self, epoch: int, clock: ClockMap, line: Line) -> None:
        ch = line.num("ch")
        if not 0 <= ch < len(self._chans):
            return
        chan = self._chans[ch]
        if line.word == "RAIL":
            try:
                mapping: Mapping | None = self._map_event(epoch, clock, line.num("t"), line.rx_ns)
            except ClockError:
                mapping = None
            partial = _RailPartial(line, mapping, epoch)
            nsamp = chan.rail_config[3] if chan.rail_config else 0
            if line.fields.get("end") != "busy" and nsamp > 0:
                chan.rail_partial = partial
                return
            self._finish_rail(ch, partial, None)
        else:
            held = chan.rail_partial
            chan.rail_partial = None
            if held is None or held.epoch != epoch:
                return
            self._finish_rail(ch, held, line)

    def _finish_rail(self, ch: int, partial: _RailPartial, samples: Line | None) -> None:
        rail, mapping = partial.line, partial.mapping
        config = self._chans[ch].rail_config
        values = samples.fields.get("v", "") if samples is not None else ""
        result = RailResult(
            channel=ch,
            edge_us=rail.num("t"),
            host_ns=mapping.host_ns if mapping else 0,
            error_ns=mapping.error_ns if mapping else -1,
            v0=rail.opt_num("v0"),
            hi_us=rail.opt_num("hi_us"),
            lo_us=rail.opt_num("lo_us"),
            minimum=rail.opt_num("min"),
            end=rail.fields.get("end", "?"),
            dt_us=samples.opt_num("dt_us") if samples is not None else None,
            samples=tuple(int(v) for v in values.split(",") if v),
            hi_threshold=config[0] if config else 0,
            lo_threshold=config[1] if config else 0,
            window_ms=config[2] if config else 0,
        )
        with self._cond:
            self._chans[ch].rails.append((partial.epoch, result))
            self._cond.notify_all()
        if self._on_rail is not None:
            try:
                self._on_rail(result)
            except Exception:
                self.stats.sink_errors += 1
                log.exception("relay board: on_rail sink failed")

    def _emit(self, edge: BoardEdge) -> None:
        if self._on_edge is None:
            return
        try:
            self._on_edge(edge)
        except Exception:
            self.stats.sink_errors += 1
            log.exception("relay board: on_edge sink failed")

    # ---- shutdown ----

    def _shutdown(self) -> None:
        self._closed = True
        self._stop.set()
        self._wake.set()
        if self._maint.is_alive() and threading.current_thread() is not self._maint:
            self._maint.join(2.0)
        with contextlib.suppress(Exception):
            self._ser.cancel_read()
        if self._reader.is_alive() and threading.current_thread() is not self._reader:
            self._reader.join(2.0)
        with contextlib.suppress(Exception):
            self._ser.close()
        with self._cond:
            self._cond.notify_all()
