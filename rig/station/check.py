"""`rig station check`: prove a station's wiring before a campaign writes anything.

Per channel the campaign names, with the drive idle: a short cut (timed by the switch) must make
exactly the named drive leave the bus, and nothing else (every block device is watched:
rig/station/busrecord.py); power on brings it back. The times from the off edge to the drive
gone and from the on edge to it back are measured, and where the station senses its rails the
readings with power on and off are held against `[station.rail_sense]`. Before any cut the
drives are found, claimed and opened exactly as a campaign does (identity, interlocks, locks),
then closed again: nothing is ever written. One channel at a time; every drive that left is
waited back for before the next.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rig.config.campaign import Campaign, DriveSpec
from rig.drive.identity import DriveIdentity
from rig.drive.node import PresenceWatch
from rig.errors import RigError, UserError
from rig.power.base import RailResult, RailSensedCut
from rig.power.relay import BoardIdentity, BoardSet
from rig.station.busrecord import BusChange, BusDevice, BusRecorder
from rig.station.kinds.relay_board import RailSenseSpec, RelayBoardSpec
from rig.station.model import Station

SCHEMA = "rig.station-check/1"
EDGE_TIMEOUT_S = 10.0  # the switch reports its off edge
GRACE_S = 3.0  # after another disk left: how long the named one still may follow
SETTLE_S = 1.0  # after the named drive left or came back: what else still moves
# cuts another disk must leave in, every time, to count as powered by the channel: on a host
# where other programs attach and detach disks all day one can leave by chance during a cut
CONFIRM_CUTS = 3


@runtime_checkable
class IdentifiedBoard(Protocol):
    """A switch that says what it is and reads its rails (the relay board)."""

    @property
    def identity(self) -> BoardIdentity: ...

    def adc(self, channel: int) -> int: ...


@runtime_checkable
class RailReadings(Protocol):
    """A switch that reads its channels' rails (one relay board, or several)."""

    def adc(self, channel: int) -> int: ...


@dataclass
class RailCheck:
    on: int  # reading with power on, before the cut
    off: int  # reading with power off, after the drive left
    capture: dict[str, Any]  # the board's own capture of the off edge
    hi: int
    lo: int

    def problems(self, channel: int) -> list[str]:
        found = []
        if self.on < self.hi:
            found.append(
                f"channel {channel}: rail sense reads {self.on} with power on, below hi ="
                f" {self.hi} ([station.rail_sense]: calibrate hi)"
            )
        limit = self.lo or self.hi
        if self.off >= limit:
            found.append(
                f"channel {channel}: rail sense reads {self.off} with power off, not below"
                f" {'lo' if self.lo else 'hi'} = {limit} ([station.rail_sense]: calibrate)"
            )
        if self.capture.get("end") not in (None, "fell"):
            found.append(
                f"channel {channel}: the board's capture of the off edge ended"
                f" '{self.capture.get('end')}', not 'fell' (window or thresholds)"
            )
        return found


@dataclass
class ChannelCheck:
    channel: int
    drive: str  # the drive the campaign names on it
    devnode: str
    wiring: str = ""  # on a station of several boards: "board b ch1 (ch17)"
    left: list[str] = field(default_factory=list)  # every disk that left during the cut
    departure_s: float | None = None  # off edge -> the named drive seen gone
    return_s: float | None = None  # on edge -> the named drive back, proven
    rail: RailCheck | None = None
    problems: list[str] = field(default_factory=list)
    # disks that left during the first cut but not during a second: not this channel's
    coincidental: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "wiring": self.wiring,
            "drive": self.drive,
            "devnode": self.devnode,
            "ok": self.ok,
            "left": self.left,
            "departure_s": self.departure_s,
            "return_s": self.return_s,
            "rail": None if self.rail is None else vars(self.rail),
            "problems": self.problems,
            "coincidental": self.coincidental,
        }


@dataclass
class StationCheck:
    campaign: str
    station: str
    board: dict[str, Any] | None
    channels: list[ChannelCheck]
    boards: dict[str, dict[str, Any]] | None = None  # several boards: each one's facts by name

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.channels)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "campaign": self.campaign,
            "station": self.station,
            "board": self.board,
            "boards": self.boards,
            "ok": self.ok,
            "channels": [c.as_json() for c in self.channels],
        }


def board_facts(station: Station) -> dict[str, Any] | None:
    if not isinstance(station.power, IdentifiedBoard):
        return None  # a switch that cannot say what it is (manual), or several boards
    return _facts(station.power.identity)


def boards_facts(station: Station) -> dict[str, dict[str, Any]] | None:
    """Each board's facts by name, on a station of several boards."""
    power = station.power
    if not isinstance(power, BoardSet):
        return None
    return {name: _facts(power.board(name).identity) for name in power.names}


def _facts(ident: BoardIdentity) -> dict[str, Any]:
    return {
        "board": ident.board,
        "firmware": ident.firmware,
        "protocol": ident.proto,
        "build": ident.build,
        "channels": ident.channels,
        "reset_cause": ident.reset_cause,
        "watchdog_trips": ident.watchdog_trips,
        "watchdog_ms": ident.watchdog_ms,
    }


def run_check(campaign: Campaign, station: Station) -> StationCheck:
    """Every channel of the campaign, in channel order, on a station already built."""
    with ExitStack() as held:
        nodes = {}
        for spec in campaign.drives:  # as a campaign starts: found, claimed, opened, checked
            node = station.presence.find(spec.identity)
            if node is None:
                raise UserError(f"drive {spec.identity.label()} not found on the bus")
            if station.claim is not None:
                held.enter_context(station.claim(node, campaign.name))
            station.open_target(node, spec).close()  # the interlocks; idle again for the cut
            nodes[spec.channel] = node.devnode
        rail = _rail_spec(campaign)
        checks = []
        for spec in sorted(campaign.drives, key=lambda d: d.channel):
            check = ChannelCheck(spec.channel, spec.identity.label(), nodes[spec.channel])
            check.wiring = spec.wiring() if spec.board else ""
            try:
                _check_channel(campaign, station, spec, check, rail)
            except RigError as error:  # the switch failed: this channel is not shown right
                check.problems.append(f"{channel_name(spec)}: {error}")
                _power_back(station, spec.channel, check)
            except BaseException:  # Ctrl-C, a bug: the channel on again before leaving
                _power_back(station, spec.channel, check)
                raise
            checks.append(check)
    facts = board_facts(station)
    return StationCheck(campaign.name, station.name, facts, checks, boards_facts(station))


def _rail_spec(campaign: Campaign) -> RailSenseSpec | None:
    spec = campaign.station
    return spec.rail_sense if isinstance(spec, RelayBoardSpec) else None


@dataclass
class CutRound:
    """One cut of a channel as the bus saw it."""

    changes: list[BusChange]  # every disk that left or arrived, cut to return (and settle)
    gone_ns: int | None  # the named drive seen gone (host ns), None if it never left
    departure_s: float | None
    return_s: float | None
    rail: RailCheck | None

    def others_left(self, identity: DriveIdentity) -> list[BusDevice]:
        return [
            c.device
            for c in self.changes
            if c.action == "left" and not identity.matches(c.device.identity)
        ]


def _check_channel(
    campaign: Campaign,
    station: Station,
    spec: DriveSpec,
    check: ChannelCheck,
    rail: RailSenseSpec | None,
) -> None:
    """A cut; if other disks left during it, more: a disk counts as powered by this channel
    only when it leaves in every one of `CONFIRM_CUTS` cuts and not while the channel stays on
    for as long (another program's disk that happened to go is reported as such, not as
    wiring)."""
    started = time.monotonic()
    first = _cut_round(campaign, station, spec, rail)
    seconds = time.monotonic() - started  # one cut, return and settle
    check.departure_s, check.return_s, check.rail = first.departure_s, first.return_s, first.rail
    others = first.others_left(spec.identity)
    by_chance: list[BusDevice] = []
    if others:
        for _ in range(CONFIRM_CUTS - 1):
            again = {d.identity for d in _cut_round(campaign, station, spec, None).others_left(
                spec.identity)}  # fmt: skip
            by_chance += [d for d in others if d.identity not in again]
            others = [d for d in others if d.identity in again]
            if not others:
                break
    if others:  # a disk that leaves as often with the power left on is busy on its own
        anyway = _left_unprompted(max(seconds, 2 * SETTLE_S))
        by_chance += [d for d in others if d.identity in anyway]
        others = [d for d in others if d.identity not in anyway]
    check.coincidental = [d.label() for d in by_chance]
    named_left = [
        c.device.label()
        for c in first.changes
        if c.action == "left" and spec.identity.matches(c.device.identity)
    ]
    if first.gone_ns is not None and not named_left:
        # gone by its watch only (a stale node, a simulated bus): no udev event of its own
        named_left = [f"{check.drive} ({check.devnode}; no udev event)"]
    check.left = named_left + [d.label() for d in others]
    check.problems += _wiring_problems(
        campaign, spec, [d.label() for d in others], first.gone_ns, first.return_s is not None
    )
    if check.rail is not None:
        check.problems += check.rail.problems(spec.channel)


def _cut_round(
    campaign: Campaign, station: Station, spec: DriveSpec, rail: RailSenseSpec | None
) -> CutRound:
    channel = spec.channel
    board = station.power if isinstance(station.power, RailReadings) else None
    on_reading = board.adc(channel) if board is not None and rail is not None else None
    recorder = BusRecorder()
    watch = station.presence.watch(spec.identity)
    departure_s = return_s = None
    rail_check = None
    try:
        pending = station.power.cut(channel, 0.0)
        off_edge = pending.wait(EDGE_TIMEOUT_S)
        changes, gone_ns = _await_departure(watch, recorder, campaign.cut.gone_timeout_s)
        if gone_ns is not None:
            departure_s = round((gone_ns - off_edge.host_ns) / 1e9, 3)
        if board is not None and rail is not None and on_reading is not None:
            capture = pending.rail(EDGE_TIMEOUT_S) if isinstance(pending, RailSensedCut) else None
            off_reading = board.adc(channel)
            rail_check = RailCheck(on_reading, off_reading, _capture(capture), rail.hi, rail.lo)
        on_edge = station.power.on(channel)
        back = watch.wait_back(campaign.cut.return_timeout_s) if gone_ns is not None else None
        if back is not None:
            return_s = round((time.monotonic_ns() - on_edge.host_ns) / 1e9, 3)
        changes += recorder.changes(SETTLE_S)
        changes += _await_returns(campaign, station, changes, recorder)
    finally:
        watch.close()
        recorder.close()
    return CutRound(changes, gone_ns, departure_s, return_s, rail_check)


def _left_unprompted(seconds: float) -> set[DriveIdentity]:
    """The disks that leave the bus within `seconds` while no channel is cut."""
    recorder = BusRecorder()
    left: set[DriveIdentity] = set()
    deadline = time.monotonic() + seconds
    try:
        while (wait := deadline - time.monotonic()) > 0:
            left |= {c.device.identity for c in recorder.changes(wait) if c.action == "left"}
    finally:
        recorder.close()
    return left


def _await_departure(
    watch: PresenceWatch, recorder: BusRecorder, timeout_s: float
) -> tuple[list[BusChange], int | None]:
    """Until the named drive is gone (then a short settle), or its timeout; once another disk
    left, the named one gets only `GRACE_S` more (a miswired channel is told in seconds)."""
    changes: list[BusChange] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        gone_ns = watch.wait_gone(min(0.2, max(0.0, deadline - time.monotonic())))
        changes += recorder.changes()
        if gone_ns is not None:
            changes += recorder.changes(SETTLE_S)
            return changes, gone_ns
        first_left = next((c for c in changes if c.action == "left"), None)
        if first_left is not None:  # (host_ns is on time.monotonic's clock)
            deadline = min(deadline, first_left.host_ns / 1e9 + GRACE_S)
    return changes, None


def _await_returns(
    campaign: Campaign, station: Station, changes: list[BusChange], recorder: BusRecorder
) -> list[BusChange]:
    """Wait for every campaign drive that left to be back (the next channel starts on the bus
    as it was); other disks are only reported."""
    more: list[BusChange] = []
    deadline = time.monotonic() + campaign.cut.return_timeout_s
    for spec in campaign.drives:
        left = any(c.action == "left" and spec.identity.matches(c.device.identity) for c in changes)
        while left and station.presence.find(spec.identity) is None:
            if time.monotonic() > deadline:
                break
            more += recorder.changes(0.2)
    return more


def channel_name(spec: DriveSpec) -> str:
    """`channel 2`, or on a station of several boards `channel 1 of board b (ch17)`."""
    if not spec.board:
        return f"channel {spec.channel}"
    return f"channel {spec.board_channel} of board {spec.board} (ch{spec.channel})"


def _wiring_problems(
    campaign: Campaign,
    spec: DriveSpec,
    others: list[str],
    gone_ns: int | None,
    returned: bool,
) -> list[str]:
    channel, named = channel_name(spec), spec.identity.label()
    if gone_ns is None and others:
        return [
            f"{channel} is miswired: cutting it made {', '.join(others)} leave the bus;"
            f" the campaign names {named} on {channel}"
        ]
    if gone_ns is None:
        return [
            f"{channel}: cutting it made no disk leave the bus within"
            f" {campaign.cut.gone_timeout_s:g} s; the campaign names {named} on it"
            " (is the drive's power wired through this channel?)"
        ]
    found = []
    if others:
        found.append(
            f"{channel}: cutting it made {named} leave the bus, and also"
            f" {', '.join(others)} (one channel powers more than its drive)"
        )
    if not returned:
        found.append(
            f"{channel}: {named} did not come back within"
            f" {campaign.cut.return_timeout_s:g} s of power-on"
        )
    return found


def _capture(result: RailResult | None) -> dict[str, Any]:
    if result is None:
        return {}
    return {
        "v0": result.v0,
        "hi_us": result.hi_us,
        "lo_us": result.lo_us,
        "min": result.minimum,
        "end": result.end,
    }


def _power_back(station: Station, channel: int, check: ChannelCheck) -> None:
    """After a switch fault: the channel on again (the board's watchdog would do it too)."""
    try:
        station.power.on(channel)
    except RigError as error:
        check.problems.append(f"channel {channel}: could not switch it on again: {error}")
