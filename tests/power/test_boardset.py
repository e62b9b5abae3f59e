"""`BoardSet` (rig/power/relay/boardset.py) against fake boards: station channels, and what
puts a board down (lost, silent, restarted, its watchdog) and what a down board means: its
channels refused at once with the reason, the others untouched, `safe()` leaving it to its
watchdog."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from rig.errors import ChannelLostError, PowerError, PowerTimeoutError
from rig.power.base import Edge, PendingCut
from rig.power.relay import (
    BoardEdge,
    BoardIdentity,
    BoardResetError,
    BoardSet,
    ChannelStates,
    ResetInfo,
)

IDENTITY = BoardIdentity(3, "0.3.0", "x", "fake", 4, 1_000_000, "power-on", 0, 5000)


class FakeBoard:
    def __init__(self, name: str) -> None:
        self.name = name
        self.lost = ""
        self.fail: Exception | None = None  # raised by the next request
        self.on_state = [True] * 4
        self.safe_calls = 0
        self.edges: Callable[[Edge], None] | None = None
        self.resets: Callable[[ResetInfo], None] | None = None

    channels = 4
    identity = IDENTITY

    def _request(self) -> None:
        if self.fail is not None:
            raise self.fail

    def on(self, channel: int) -> Edge:
        self._request()
        self.on_state[channel] = True
        return Edge(channel, True, 1, 0)

    def off(self, channel: int) -> Edge:
        self._request()
        self.on_state[channel] = False
        return Edge(channel, False, 1, 0)

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> PendingCut:
        raise NotImplementedError

    def state(self, channel: int) -> bool:
        self._request()
        return self.on_state[channel]

    def adc(self, channel: int) -> int:
        self._request()
        return 800

    def safe(self) -> None:
        self._request()
        self.safe_calls += 1

    def abandon(self, why: str) -> None:
        self.lost = self.lost or why

    def close(self) -> None:
        pass


def _set(heard: list[Edge] | None = None) -> tuple[BoardSet, dict[str, FakeBoard]]:
    boards: dict[str, FakeBoard] = {}

    def opener(
        name: str, edges: Callable[[Edge], None], resets: Callable[[ResetInfo], None]
    ) -> FakeBoard:
        board = boards[name] = FakeBoard(name)
        board.edges, board.resets = edges, resets
        return board

    return BoardSet(("a", "b", "c"), opener, heard.append if heard is not None else None), boards


def test_station_channels_reach_their_board() -> None:
    heard: list[Edge] = []
    boards, fakes = _set(heard)
    assert boards.off(17).channel == 17 and fakes["b"].on_state == [True, False, True, True]
    assert not boards.state(17) and boards.state(16) and boards.state(35)
    assert fakes["c"].edges is not None
    fakes["c"].edges(Edge(2, False, 5, 0))  # board c's channel 2 is station channel 34
    assert heard == [Edge(34, False, 5, 0)]
    with pytest.raises(PowerError, match="no station channel 4 "):
        boards.on(4)  # a board of four channels has no channel 4
    with pytest.raises(PowerError, match="no station channel 48"):
        boards.on(48)


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        ("lost", "relay board b lost (port gone)"),
        (PowerTimeoutError("did not answer"), "relay board b silent (did not answer)"),
        (BoardResetError("reset during 'SET'"), "relay board b restarted (reset during 'SET')"),
        ("reset", "relay board b restarted (boot event, reset cause watchdog)"),
        ("wdog", "relay board b watchdog tripped"),
    ],
)
def test_a_board_down_refuses_only_its_channels(fault: object, why: str) -> None:
    boards, fakes = _set()
    b = fakes["b"]
    if fault == "lost":
        b.lost = "port gone"
    elif fault == "reset":
        assert b.resets is not None
        identity = dataclasses.replace(IDENTITY, reset_cause="watchdog")
        b.resets(ResetInfo(1, "boot event", identity, ChannelStates(0, (), (), ()), (), ()))
    elif fault == "wdog":
        assert b.edges is not None
        b.edges(BoardEdge(0, True, 1, 0, None, "wdog", 0))
    else:
        assert isinstance(fault, Exception)
        b.fail = fault
    with pytest.raises(ChannelLostError) as first:
        boards.on(16)
    assert str(first.value).startswith(why)
    b.fail = None
    with pytest.raises(ChannelLostError, match="relay board b"):  # refused at once from now
        boards.state(19)
    assert boards.on(0).channel == 0 and boards.state(35)  # the other boards go on
    assert list(boards.down()) == ["b"] and b.lost  # given up: nothing more is sent to it
    boards.safe()  # a down board is left to its watchdog, not raised
    assert [fakes[n].safe_calls for n in "abc"] == [1, 0, 1]


def test_a_plain_refusal_does_not_put_a_board_down() -> None:
    boards, fakes = _set()
    fakes["a"].fail = PowerError("relay board refused 'CUT 1': ERR off")
    with pytest.raises(PowerError) as refused:
        boards.off(1)
    assert not isinstance(refused.value, ChannelLostError) and boards.down() == {}


def test_safe_makes_the_others_safe_before_raising_a_failing_board() -> None:
    boards, fakes = _set()
    fakes["a"].fail = PowerError("relay board refused 'SET 0 1': ERR busy")
    with pytest.raises(PowerError, match="ERR busy"):
        boards.safe()
    assert [fakes[n].safe_calls for n in "abc"] == [0, 1, 1]
