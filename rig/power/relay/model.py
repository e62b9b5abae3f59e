"""What the relay board driver reports: its edges, the board's identity and channel states, a
reset and its consequences, counters, and its error types. Values only."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from rig.errors import PowerError
from rig.power.base import Edge, RailResult
from rig.power.clocksync import SyncSample
from rig.power.relay.wire import Line

WHY_BOOT = "boot"  # edges the driver infers from a BOOT event (safe state applied by a reset)


class BoardResetError(PowerError):
    """The board reset while a request was in flight: it may or may not have been carried out
    before the reset (the reset itself puts every channel in its safe state). `sent` is False
    when the reset came before the request was written: it was not carried out."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


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

    @classmethod
    def from_reply(cls, line: Line) -> BoardIdentity:
        """From the OK reply to `ID` (its `proto=` already checked)."""
        return cls(
            proto=line.num("proto"),
            firmware=line.fields.get("fw", "?"),
            build=line.fields.get("build", "?"),
            board=line.fields.get("board", "?"),
            channels=line.num("ch"),
            clock_hz=line.num("clk_hz"),
            reset_cause=line.fields.get("reset", "unknown"),
            watchdog_trips=line.num("trips"),
            watchdog_ms=line.num("wdog_ms"),
        )


@dataclass(frozen=True)
class ChannelStates:
    mcu_us: int
    on: tuple[bool, ...]
    safe: tuple[bool, ...]
    pending: tuple[int, ...]  # edges still scheduled per channel: 0, 1 or 2

    @classmethod
    def from_reply(cls, line: Line) -> ChannelStates:
        """From the OK reply to `STATE`."""
        return cls(
            mcu_us=line.num("t"),
            on=tuple(bool(v) for v in line.flags("on")),
            safe=tuple(bool(v) for v in line.flags("safe")),
            pending=line.flags("pend"),
        )


@dataclass(frozen=True)
class BootEvent:
    """A `BOOT` line: the board (re)started. Every channel drives its safe state from `mcu_us`
    (MCU time of the new clock epoch) on."""

    evseq: int
    reset_cause: str
    on: tuple[bool, ...]
    mcu_us: int | None  # None from a board that does not send it (protocol 1)
    rx_ns: int  # host time the line had been received by

    @classmethod
    def from_line(cls, boot: Line) -> BootEvent:
        return cls(
            boot.seq or 0,
            boot.fields.get("reset", "unknown"),
            tuple(bool(v) for v in boot.flags("on")) if "on" in boot.fields else (),
            boot.opt_num("t"),
            boot.rx_ns,
        )


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
    write_stalls: int = 0  # writes the port could not take within the reply timeout
    bad_lines: int = 0
    nacks: int = 0
    stale_replies: int = 0
    events_lost: int = 0
    resets: int = 0
    watchdog_trips: int = 0
    sink_errors: int = 0
    clock_glitches: int = 0  # MCU timestamps refused as impossible (non-monotone)
    unmapped_edges: int = 0


# ---- the driver's own records (rig/power/relay/state.py keeps them) ----

RailConfig = tuple[int, int, int, int]  # hi, lo, window_ms, samples


@dataclass
class EdgeRecord:
    epoch: int
    edge: BoardEdge


@dataclass
class Channel:
    known_on: bool | None = None
    cancel_gen: int = 0
    cancelled_by: str = ""  # what last bumped cancel_gen, for the waiter's error message
    cut_inflight: bool = False
    edges: deque[EdgeRecord] = field(default_factory=lambda: deque(maxlen=64))
    rails: deque[tuple[int, RailResult]] = field(default_factory=lambda: deque(maxlen=16))
    rail_config: RailConfig | None = None
    unmapped: deque[tuple[int, int, str]] = field(default_factory=lambda: deque(maxlen=16))


@dataclass(frozen=True)
class CutTicket:
    """What a scheduled cut's waiter compares against: its channel, clock epoch, MCU accept
    time and the channel's cancel generation when it was scheduled."""

    channel: int
    epoch: int
    accept_us: int
    gen: int


@dataclass(frozen=True)
class ResyncTicket:
    """A reset to resynchronise after, as the driver saw it when the resync began."""

    epoch: int
    boot: Line | None
    reason: str
    old_sample: SyncSample | None  # the last sample of the epoch before the reset
    before: list[bool | None]  # channel states the driver knew before the reset
    inflight: list[int]  # channels with a CUT on its way
