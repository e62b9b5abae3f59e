"""`kind = "relay-board"`: the rig's own relay boards (firmware/) on serial ports; drives on the
real bus. Its keys: port or usb_serial (one board), or [station.boards.NAME] tables (several,
each with its port or usb_serial), watchdog_ms, [station.rail_sense]."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rig.config.station_keys import StationSpec
from rig.config.tables import Table
from rig.errors import PowerError, UserError
from rig.power.base import Edge, PowerSwitch
from rig.power.relay import BOARD_STRIDE, BoardSet, RelayBoard, ResetInfo, find_port

if TYPE_CHECKING:
    from rig.config.campaign import Campaign


@dataclass(frozen=True)
class RailSenseSpec:
    """Relay board rail sense, for every campaign channel (ADC counts; see docs/campaign.md)."""

    hi: int
    lo: int
    window_ms: int
    samples: int


@dataclass(frozen=True)
class BoardSpec:
    """One board of a station of several ([station.boards.NAME]): by path or USB serial."""

    name: str
    port: str = ""
    usb_serial: str = ""  # udev ID_SERIAL_SHORT or ID_SERIAL of its tty

    def label(self) -> str:
        return f"{self.name}={self.usb_serial or self.port}"


@dataclass(frozen=True)
class RelayBoardSpec(StationSpec):
    port: str = ""  # the board by path
    usb_serial: str = ""  # or by its USB serial number (udev)
    watchdog_ms: int = 5000  # host silence after which every channel goes safe
    rail_sense: RailSenseSpec | None = None
    boards: tuple[BoardSpec, ...] = ()  # [station.boards.NAME]: several boards, in file order

    def label(self) -> str:
        if self.boards:
            return f"relay-boards {' '.join(b.label() for b in self.boards)}"
        return f"relay-board {self.usb_serial or self.port}"

    def place(self, board: str, channel: int, where: str) -> tuple[str, int]:
        """On a station of several boards, board i's channel c is station channel
        BOARD_STRIDE * i + c; a drive that names no board is on the only one."""
        if not self.boards:
            return super().place(board, channel, where)
        names = [b.name for b in self.boards]
        if not board:
            if len(names) > 1:
                raise UserError(f"campaign: {where} needs board (one of {', '.join(names)})")
            board = names[0]
        if board not in names:
            raise UserError(
                f"campaign: {where}.board = {board!r} is not a board of [station.boards]"
                f" ({', '.join(names)})"
            )
        if channel >= BOARD_STRIDE:
            raise UserError(f"campaign: {where}.channel = {channel}: a board has 0..15")
        return board, BOARD_STRIDE * names.index(board) + channel


_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")


def settings(keys: Table, common: StationSpec) -> RelayBoardSpec:
    spec = RelayBoardSpec(
        **vars(common),
        port=keys.get("port", str, ""),
        usb_serial=keys.get("usb_serial", str, ""),
        # The firmware accepts 50..600000 (0 would disable it: not offered, power must end safe).
        watchdog_ms=keys.integer("watchdog_ms", 5000, 50, 600_000),
        rail_sense=_rail_sense(keys.table("rail_sense")) if "rail_sense" in keys.data else None,
        boards=_boards(keys.table("boards")) if "boards" in keys.data else (),
    )
    if spec.boards and (spec.port or spec.usb_serial):
        raise UserError(
            "campaign: [station] names its boards in [station.boards]: port and usb_serial"
            " go in each board's table"
        )
    if not (spec.port or spec.usb_serial or spec.boards):
        raise UserError(
            "campaign: a relay-board station needs [station].port or .usb_serial, or"
            " [station.boards.NAME] tables"
        )
    return spec


def _boards(keys: Table) -> tuple[BoardSpec, ...]:
    boards = []
    for name in keys.data:
        if not _NAME.fullmatch(name):
            raise UserError(f"campaign: [station.boards] name {name!r}: letters, digits, - and _")
        table = keys.table(name)
        board = BoardSpec(name, table.get("port", str, ""), table.get("usb_serial", str, ""))
        table.done()
        if bool(board.port) == bool(board.usb_serial):
            raise UserError(f"campaign: {table.where} needs port or usb_serial (one of them)")
        boards.append(board)
    if not boards:
        raise UserError("campaign: [station.boards] names no board")
    ids = [b.port or b.usb_serial for b in boards]
    if len(set(ids)) != len(ids):
        raise UserError("campaign: two boards of [station.boards] are the same port or serial")
    return tuple(boards)


def _rail_sense(keys: Table) -> RailSenseSpec:
    rail = RailSenseSpec(
        hi=keys.integer("hi", None, 0, 1023),
        lo=keys.integer("lo", 0, 0, 1023),
        window_ms=keys.integer("window_ms", 50, 1, 60_000),
        samples=keys.integer("samples", 0, 0, 32),
    )
    keys.done()
    if rail.hi == 0 or rail.lo >= rail.hi:
        raise UserError("campaign: [station.rail_sense] needs hi > 0 and lo < hi (ADC counts)")
    return rail


def power(campaign: Campaign, on_edge: Callable[[Edge], None] | None) -> PowerSwitch:
    """Connects to the board (or each of [station.boards]), checks it has the campaign's
    channels, sets up rail sense."""
    spec = campaign.station
    assert isinstance(spec, RelayBoardSpec)
    if spec.boards:
        return _board_set(campaign, spec, on_edge)
    channels = max(d.channel for d in campaign.drives) + 1
    port = find_port(spec.usb_serial) if spec.usb_serial else spec.port
    board = _connect(spec, port, on_edge, None)
    try:
        if board.channels < channels:
            raise UserError(f"relay board has {board.channels} channels; campaign uses {channels}")
        _configure(board, spec, [d.channel for d in campaign.drives])
    except BaseException:
        board.close()
        raise
    return board


def _connect(
    spec: RelayBoardSpec,
    port: str,
    on_edge: Callable[[Edge], None] | None,
    on_reset: Callable[[ResetInfo], None] | None,
) -> RelayBoard:
    # The watchdog setting is applied at connect and again after every MCU reset. A stalled
    # link is ridden out for longer than the watchdog period: a request that fails for a stall
    # was either heard by the board or its watchdog made every channel safe.
    stall_s = max(10.0, spec.watchdog_ms / 1000 + 1.0)
    return RelayBoard(
        port,
        on_edge=on_edge,
        on_reset=on_reset,
        watchdog_ms=spec.watchdog_ms,
        stall_timeout_s=stall_s,
    )


def _configure(board: RelayBoard, spec: RelayBoardSpec, channels: list[int]) -> None:
    rail = spec.rail_sense
    if rail is not None:
        for channel in channels:
            board.configure_rail(channel, rail.hi, rail.lo, rail.window_ms, rail.samples)


def _board_set(
    campaign: Campaign, spec: RelayBoardSpec, on_edge: Callable[[Edge], None] | None
) -> BoardSet:
    """Every board of [station.boards], found (by USB serial through udev, or its port) and
    connected before anything is written; a board missing, or without a drive's channel, is
    bad input (one line)."""
    by_name = {b.name: b for b in spec.boards}

    def opener(
        name: str, edges: Callable[[Edge], None], resets: Callable[[ResetInfo], None]
    ) -> RelayBoard:
        board_spec = by_name[name]
        where = f"[station.boards.{name}]"
        try:
            port = find_port(board_spec.usb_serial) if board_spec.usb_serial else board_spec.port
            board = _connect(spec, port, edges, resets)
        except PowerError as error:
            raise UserError(f"campaign: {where}: {error}") from error
        try:
            used = [d.board_channel for d in campaign.drives if d.board == name]
            beyond = [ch for ch in used if ch >= board.channels]
            if beyond:
                raise UserError(
                    f"campaign: [[drive]] on board {name} channel {beyond[0]}: the board has"
                    f" {board.channels} channels (0..{board.channels - 1})"
                )
            _configure(board, spec, used)
        except BaseException:
            board.close()
            raise
        return board

    return BoardSet([b.name for b in spec.boards], opener, on_edge)
