"""A link that stalls (a USB serial adapter or hub that moves no byte for 1.5-3 s, as the QEMU
guest's did with four drives at once): the driver resends the same line (the board acts on a
seq+CRC once) instead of declaring the port lost. Ground truth is the host twin's pin log:
no edge is lost (every pin change reaches `on_edge`), no channel is left off, and each cut
either completes or fails with a `PowerError` (a rig ERROR of the cycle)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from rig.errors import PowerError
from rig.power.base import Edge
from rig.power.relay import RelayBoard
from tests.power.twins import Proxy, Twin


@dataclass
class Stalling:
    twin: Twin
    proxy: Proxy
    board: RelayBoard
    edges: list[Edge] = field(default_factory=list)


@pytest.fixture
def stalling(host_twin: Twin) -> Iterator[Stalling]:
    proxy = Proxy(host_twin.pty)
    try:
        edges: list[Edge] = []
        # The driver's defaults (0.5 s reply timeout, 3 resends) with a 5 s board watchdog.
        board = RelayBoard(proxy.path, on_edge=edges.append, watchdog_ms=5000)
        try:
            yield Stalling(host_twin, proxy, board, edges)
        finally:
            board.close()
    finally:
        proxy.close()


class StallOn:
    """A to-board filter that stalls the link once, as the first line containing `needle`
    goes past (the line itself is held with the rest)."""

    def __init__(self, proxy: Proxy, needle: bytes, seconds: float) -> None:
        self.proxy, self.needle, self.seconds, self.hits = proxy, needle, seconds, 0

    def __call__(self, line: bytes) -> bytes | None:
        if self.needle in line and self.hits == 0:
            self.hits += 1
            self.proxy.stall(self.seconds, to_board=False)  # its reply waits
        return line


def test_a_late_cut_reply_costs_resends_not_the_cut(stalling: Stalling) -> None:
    stall = StallOn(stalling.proxy, b" CUTAT ", 2.5)  # longer than 4 attempts of 0.5 s
    stalling.proxy.to_board = stall
    since = time.monotonic_ns()
    pending = stalling.board.cut(0, 0.05, 0.2)
    off = pending.wait(10)
    back = pending.wait_restore(10)
    assert stall.hits == 1 and stalling.board.stats.timeouts >= 1
    pins = stalling.twin.wait_pins(2, since)
    time.sleep(0.2)
    assert [(p.channel, p.on) for p in stalling.twin.pins_since(since)] == [(0, False), (0, True)]
    assert (off.powered, back.powered) == (False, True)
    # Timed on the board: the mapping still holds the true edge, however late the reply was.
    assert abs(off.host_ns - pins[0].mono_ns) <= off.error_ns + 50_000


def test_a_port_that_takes_no_bytes_is_a_stall_not_a_lost_port(stalling: Stalling) -> None:
    since = time.monotonic_ns()
    stalling.proxy.stall(2.0, block_writes=True)
    edge = stalling.board.off(1)
    assert stalling.board.stats.write_stalls >= 1
    assert not edge.powered
    time.sleep(0.2)
    assert [(p.channel, p.on) for p in stalling.twin.pins_since(since)] == [(1, False)]
    stalling.board.on(1)  # the port still works
    assert stalling.board.states().on == (True, True, True, True)


def _channel_cycles(
    board: RelayBoard, channel: int, cycles: int, outcomes: list[str], rng: random.Random
) -> None:
    """Cut, wait for the edges, switch on in a teardown, as a campaign's cycle does."""
    for _ in range(cycles):
        try:
            pending = board.cut(channel, rng.uniform(0.0, 0.2), rng.uniform(0.05, 0.2))
            pending.wait(10)
            pending.wait_restore(10)
            outcomes.append("complete")
        except PowerError as e:
            outcomes.append(f"interrupted: {e}")
            for _ in range(3):  # the campaign's teardown (rig/campaign/cutcycle/cycle.py)
                try:
                    board.on(channel)
                    break
                except PowerError:
                    time.sleep(1.0)


def test_four_channels_at_once_ride_out_stalls(stalling: Stalling) -> None:
    """Four channels cycling together while the link stalls 1.5-3 s at random moments, in one
    direction or both, with the driver's writes blocked or not."""
    rng = random.Random(25)
    outcomes: dict[int, list[str]] = {ch: [] for ch in range(4)}
    since = time.monotonic_ns()
    workers = [
        threading.Thread(
            target=_channel_cycles,
            args=(stalling.board, ch, 6, outcomes[ch], random.Random(ch)),
        )
        for ch in range(4)
    ]
    for worker in workers:
        worker.start()
    for _ in range(4):
        time.sleep(rng.uniform(0.3, 1.0))
        direction = rng.choice([(True, True), (True, False), (False, True)])
        stalling.proxy.stall(rng.uniform(1.5, 3.0), *direction, block_writes=rng.random() < 0.5)
    for worker in workers:
        worker.join(120)
        assert not worker.is_alive()
    time.sleep(0.5)  # the last events
    assert stalling.board.states().on == (True, True, True, True)  # no channel left off
    pins = [(p.channel, p.on) for p in stalling.twin.pins_since(since)]
    edges = [(e.channel, e.powered) for e in stalling.edges if e.host_ns >= since]
    for ch in range(4):
        # No lost edge: every pin change the board made reached the sink, in order.
        assert [on for c, on in pins if c == ch] == [on for c, on in edges if c == ch]
        assert len(outcomes[ch]) == 6
        assert all(o == "complete" or o.startswith("interrupted") for o in outcomes[ch])
    assert stalling.board.stats.timeouts >= 1  # the stalls did reach the driver
    completed = sum(o == "complete" for ch in outcomes for o in outcomes[ch])
    assert completed >= 20, outcomes  # stalls shorter than the budget cost no cycle


def test_a_stall_right_after_the_board_answered_id_is_ridden_out(host_twin: Twin) -> None:
    """The handshake's first SYNC held longer than 4 attempts of 0.5 s (a starved simulator
    beside two busy loops did this): a board that answered ID opens once the link moves again;
    only a port that never answers is refused within the boot timeout."""
    proxy = Proxy(host_twin.pty)
    try:
        stall = StallOn(proxy, b" SYNC", 2.5)
        proxy.to_board = stall
        board = RelayBoard(proxy.path, watchdog_ms=5000)
        try:
            assert stall.hits == 1 and board.stats.timeouts >= 1
            assert board.states().on == (True,) * 4
        finally:
            board.close()
    finally:
        proxy.close()
