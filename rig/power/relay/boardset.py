"""Several relay boards as one `PowerSwitch` (a station of sixteen drives on four boards).

Board i's channel c is station channel `BOARD_STRIDE * i + c`: the key the campaign, the store
and the progress use. A board that is lost (its port failed, or it stopped answering for longer
than the link rides out a stall) or restarted (a reset seen: BOOT or the clock going back; its
watchdog tripped) is *down* from then on: every request for its channels raises
`ChannelLostError` with one line saying why, so those channels' cycles end as rig ERRORs and
the channels stop (rig/campaign/cutcycle/cycle.py), while the other boards' channels go on.
Nothing is asked of a down board again, not even at the end (`safe`): a board the host cannot
reach is left to its own watchdog, which puts its channels in their safe state after
`watchdog_ms` of host silence (firmware/PROTOCOL.md, docs/campaign.md "Several relay boards").
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from rig.errors import ChannelLostError, PowerError, PowerTimeoutError
from rig.power.base import (
    Edge,
    PendingCut,
    PreparedCut,
    PreparesCuts,
    RailResult,
    RailSensedCut,
)
from rig.power.relay.model import BoardEdge, BoardIdentity, BoardResetError, ResetInfo

log = logging.getLogger(__name__)

BOARD_STRIDE = 16  # station channels per board: board i's channel c is 16 * i + c
T = TypeVar("T")


class Board(Protocol):
    """What the set uses of one board (rig/power/relay/board.py:RelayBoard)."""

    @property
    def channels(self) -> int: ...

    @property
    def identity(self) -> BoardIdentity: ...

    @property
    def lost(self) -> str: ...

    def on(self, channel: int) -> Edge: ...

    def off(self, channel: int) -> Edge: ...

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> PendingCut: ...

    def state(self, channel: int) -> bool: ...

    def adc(self, channel: int) -> int: ...

    def safe(self) -> None: ...

    def abandon(self, why: str) -> None: ...

    def close(self) -> None: ...


# (name, edge sink, reset sink) -> the board, connected
BoardOpener = Callable[[str, Callable[[Edge], None], Callable[[ResetInfo], None]], Board]


class _Pending:
    """A cut on one board, its edges told in station channels; a board lost meanwhile is a
    `ChannelLostError`."""

    def __init__(self, boards: BoardSet, index: int, pending: PendingCut) -> None:
        self._boards = boards
        self._index = index
        self._pending = pending

    def wait(self, timeout_s: float) -> Edge:
        edge = self._boards.guarded(self._index, lambda: self._pending.wait(timeout_s))
        return self._boards.to_station(self._index, edge)

    def rail(self, timeout_s: float) -> RailResult | None:
        if not isinstance(self._pending, RailSensedCut):
            return None
        pending = self._pending
        result = self._boards.guarded(self._index, lambda: pending.rail(timeout_s))
        if result is None:
            return None
        channel = self._boards.station_channel(self._index, result.channel)
        return dataclasses.replace(result, channel=channel)


class _Prepared:
    """A board's prepared cut, told in station channels; a board lost meanwhile is a
    `ChannelLostError`."""

    def __init__(self, boards: BoardSet, index: int, prepared: PreparedCut) -> None:
        self._boards, self._index, self._prepared = boards, index, prepared

    def fire(self, event_ns: int) -> None:
        self._boards.guarded(self._index, lambda: self._prepared.fire(event_ns))

    def settle(self) -> _Pending:
        pending = self._boards.guarded(self._index, self._prepared.settle)
        return _Pending(self._boards, self._index, pending)

    def cancel(self) -> None:
        self._prepared.cancel()


class BoardSet:
    """The boards of a station in order; thread-safe as each board is."""

    def __init__(
        self,
        names: Sequence[str],
        opener: BoardOpener,
        on_edge: Callable[[Edge], None] | None = None,
    ) -> None:
        """Connect to every board (`opener`), in order; one that cannot be opened closes the
        ones before and raises."""
        self.names = tuple(names)
        self._on_edge = on_edge
        self._lock = threading.Lock()
        self._down: dict[int, str] = {}  # board index -> why it is down
        self._boards: list[Board] = []
        try:
            for i, name in enumerate(self.names):
                self._boards.append(opener(name, self._edge_sink(i), self._reset_sink(i)))
        except BaseException:
            self.close()
            raise

    # ---- channels ----

    @staticmethod
    def station_channel(index: int, channel: int) -> int:
        return BOARD_STRIDE * index + channel

    def board_of(self, channel: int) -> tuple[int, int]:
        """(board index, its channel) of a station channel."""
        index, local = divmod(channel, BOARD_STRIDE)
        if not 0 <= index < len(self._boards) or local >= self._boards[index].channels:
            raise PowerError(f"no station channel {channel} on boards {', '.join(self.names)}")
        return index, local

    def to_station(self, index: int, edge: Edge) -> Edge:
        return dataclasses.replace(edge, channel=self.station_channel(index, edge.channel))

    def board(self, name: str) -> Board:
        return self._boards[self.names.index(name)]

    def down(self) -> dict[str, str]:
        """The boards that are down, by name, and why."""
        with self._lock:
            return {self.names[i]: why for i, why in self._down.items()}

    # ---- PowerSwitch ----

    @property
    def channels(self) -> int:
        return BOARD_STRIDE * len(self._boards)

    def on(self, channel: int) -> Edge:
        index, local = self.board_of(channel)
        edge = self.guarded(index, lambda: self._boards[index].on(local))
        return self.to_station(index, edge)

    def off(self, channel: int) -> Edge:
        index, local = self.board_of(channel)
        edge = self.guarded(index, lambda: self._boards[index].off(local))
        return self.to_station(index, edge)

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> _Pending:
        index, local = self.board_of(channel)
        pending = self.guarded(index, lambda: self._boards[index].cut(local, delay_s, off_s))
        return _Pending(self, index, pending)

    def prepare_cut(
        self, channel: int, delay_s: float, off_s: float | None = None
    ) -> _Prepared | None:
        """The board's prepared cut (`RelayBoard.prepare_cut`), its edges in station channels;
        None where the board cannot prepare one."""
        index, local = self.board_of(channel)
        board = self._boards[index]
        if not isinstance(board, PreparesCuts):
            return None
        prepared = self.guarded(index, lambda: board.prepare_cut(local, delay_s, off_s))
        return None if prepared is None else _Prepared(self, index, prepared)

    def state(self, channel: int) -> bool:
        index, local = self.board_of(channel)
        return self.guarded(index, lambda: self._boards[index].state(local))

    def adc(self, channel: int) -> int:
        index, local = self.board_of(channel)
        return self.guarded(index, lambda: self._boards[index].adc(local))

    def safe(self) -> None:
        """Every board that is up to its safe state; a down board is left to its watchdog
        (said in the log, not raised: its channels stopped when it went down). A board that
        fails here goes down and is raised, after the others were made safe."""
        failed: list[str] = []
        for index, board in enumerate(self._boards):
            why = self._why_down(index)
            if why:
                log.warning("%s: left to its watchdog (safe state after host silence)", why)
                continue
            try:
                self.guarded(index, board.safe)
            except PowerError as error:
                failed.append(str(error))
        if failed:
            raise PowerError("; ".join(failed))

    def close(self) -> None:
        for board in self._boards:
            board.close()

    # ---- what went wrong ----

    def guarded(self, index: int, request: Callable[[], T]) -> T:
        """Run one request of board `index`: refused at once when the board is down, and a
        failure that shows the board lost or restarted puts it down (`ChannelLostError`)."""
        why = self._why_down(index)
        if why:
            raise ChannelLostError(why)
        board = self._boards[index]
        try:
            return request()
        except BoardResetError as error:
            raise ChannelLostError(self._put_down(index, f"restarted ({error})")) from error
        except PowerTimeoutError as error:  # past the stall budget: the board is silent
            raise ChannelLostError(self._put_down(index, f"silent ({error})")) from error
        except PowerError as error:
            lost = board.lost or self._why_down(index)
            if lost:
                raise ChannelLostError(self._put_down(index, f"lost ({lost})")) from error
            raise

    def _why_down(self, index: int) -> str:
        with self._lock:
            why = self._down.get(index, "")
        if not why and self._boards[index].lost:
            why = self._put_down(index, f"lost ({self._boards[index].lost})")
        return why

    def _put_down(self, index: int, what: str) -> str:
        """Mark board `index` down (the first reason stays) and give it up: the requests of
        its other channels queued behind a silent one fail now, not each after its own stall
        budget. Returns the reason."""
        with self._lock:
            first = index not in self._down
            if first:
                self._down[index] = f"relay board {self.names[index]} {what}"
            why = self._down[index]
        if first:
            log.warning("%s: its channels stop", why)
            self._boards[index].abandon(why)
        return why

    def _edge_sink(self, index: int) -> Callable[[Edge], None]:
        def sink(edge: Edge) -> None:
            if isinstance(edge, BoardEdge) and edge.why == "wdog":
                self._put_down(index, "watchdog tripped (host silent): channels put safe")
            elif isinstance(edge, BoardEdge) and edge.why == "boot":
                self._put_down(index, "restarted (boot): channels put safe")
            if self._on_edge is not None:
                self._on_edge(self.to_station(index, edge))

        return sink

    def _reset_sink(self, index: int) -> Callable[[ResetInfo], None]:
        def sink(info: ResetInfo) -> None:
            cause = info.identity.reset_cause
            self._put_down(index, f"restarted ({info.reason}, reset cause {cause})")

        return sink
