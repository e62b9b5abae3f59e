"""Faults on the wire: a board speaking another protocol (a fake peer on a real pty), corrupted
replies and requests and a silent board (a line proxy in front of the host-build twin), and the
udev lookup of the port. The line format on its own: test_relay_wire.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from rig.errors import PowerError, PowerTimeoutError, ProtocolMismatchError
from rig.power.base import Edge
from rig.power.relay import BoardResetError, RelayBoard, find_port
from tests.power.twins import FakePeer, Proxy, Twin, corrupt

ID_V1 = (  # the previous protocol: its BOOT has no t=
    "OK proto=1 fw=0.1.0 build=abc board=nano328p ch=4 clk_hz=16000000 reset=power trips=0 "
    "wdog_ms=5000"
)


def test_protocol_mismatch_is_refused() -> None:
    peer = FakePeer(lambda seq, cmd, args: f"{seq} {ID_V1}" if cmd == "ID" else None)
    try:
        mismatch = r"speaks protocol 1 .*reflash firmware v0\.3\.0"
        with pytest.raises(ProtocolMismatchError, match=mismatch):
            RelayBoard(peer.path, reply_timeout_s=0.2)
        assert any(" ID" in body for body in peer.received)
        assert not any(" SET" in b or " CUT" in b for b in peer.received)
    finally:
        peer.close()


def test_device_that_does_not_know_id_is_refused() -> None:
    peer = FakePeer(lambda seq, cmd, args: f"{seq} ERR unknown")
    try:
        with pytest.raises(ProtocolMismatchError, match="reflash firmware"):
            RelayBoard(peer.path, reply_timeout_s=0.2)
    finally:
        peer.close()


def test_silent_device_times_out_with_a_typed_error() -> None:
    peer = FakePeer(lambda seq, cmd, args: None)
    try:
        start = time.monotonic()
        with pytest.raises(PowerTimeoutError, match="no relay board answers"):
            RelayBoard(peer.path, reply_timeout_s=0.1, retries=1, boot_timeout_s=0.3)
        assert time.monotonic() - start < 3
    finally:
        peer.close()


@dataclass
class Proxied:
    twin: Twin
    proxy: Proxy
    board: RelayBoard
    edges: list[Edge] = field(default_factory=list)


@pytest.fixture
def proxied(host_twin: Twin) -> Iterator[Proxied]:
    proxy = Proxy(host_twin.pty)
    try:
        edges: list[Edge] = []
        board = RelayBoard(
            proxy.path, on_edge=edges.append, reply_timeout_s=0.2, retries=2, stall_timeout_s=1.0
        )
        try:
            yield Proxied(host_twin, proxy, board, edges)
        finally:
            board.close()
    finally:
        proxy.close()


class Once:
    """A line filter that applies `action` to the first line containing `needle`."""

    def __init__(self, needle: bytes, action: str) -> None:
        self.needle = needle
        self.action = action
        self.hits = 0

    def __call__(self, line: bytes) -> bytes | None:
        if self.needle in line and self.hits == 0:
            self.hits += 1
            return None if self.action == "drop" else corrupt(line)
        return line


def test_corrupted_reply_is_retried_and_not_executed_twice(proxied: Proxied) -> None:
    flt = Once(b" edge=1", "corrupt")  # the reply to the SET
    proxied.proxy.to_driver = flt
    since = time.monotonic_ns()
    edge = proxied.board.off(2)
    assert flt.hits == 1
    assert proxied.board.stats.retries >= 1 and proxied.board.stats.bad_lines >= 1
    assert not edge.powered
    pins = proxied.twin.wait_pins(1, since)
    time.sleep(0.1)
    assert [(p.channel, p.on) for p in proxied.twin.pins_since(since)] == [(2, False)]
    assert [(e.channel, e.powered) for e in proxied.edges] == [(2, False)]
    assert abs(edge.host_ns - pins[0].mono_ns) <= edge.error_ns + 50_000


def test_corrupted_cut_reply_schedules_one_cut(proxied: Proxied) -> None:
    flt = Once(b" at=", "corrupt")
    proxied.proxy.to_driver = flt
    since = time.monotonic_ns()
    edge = proxied.board.cut(0, 0.02, 0.01).wait(2)
    assert flt.hits == 1
    pins = proxied.twin.wait_pins(2, since)
    time.sleep(0.1)
    assert [(p.channel, p.on) for p in proxied.twin.pins_since(since)] == [(0, False), (0, True)]
    assert abs(edge.host_ns - pins[0].mono_ns) <= edge.error_ns + 50_000


def test_corrupted_event_does_not_break_the_reply_path(proxied: Proxied) -> None:
    flt = Once(b"EDGE", "corrupt")
    proxied.proxy.to_driver = flt
    proxied.board.off(3)  # its EDGE line is corrupted: no edge event for this one
    assert proxied.board.stats.bad_lines >= 1
    assert proxied.board.state(3) is False
    proxied.board.on(3)
    assert [(e.channel, e.powered) for e in proxied.edges] == [(3, True)]


def test_corrupted_request_is_refused_by_the_board_and_resent(proxied: Proxied) -> None:
    flt = Once(b" SET ", "corrupt")
    proxied.proxy.to_board = flt
    proxied.board.off(1)
    assert flt.hits == 1
    assert proxied.board.stats.nacks >= 1  # the board's "- ERR crc"
    assert proxied.board.state(1) is False


def test_lost_reply_is_resent_after_the_timeout(proxied: Proxied) -> None:
    flt = Once(b" edge=1", "drop")
    proxied.proxy.to_driver = flt
    since = time.monotonic_ns()
    proxied.board.off(0)
    assert proxied.board.stats.timeouts >= 1
    time.sleep(0.1)
    assert [(p.channel, p.on) for p in proxied.twin.pins_since(since)] == [(0, False)]


def test_board_gone_silent_raises_power_timeout(proxied: Proxied) -> None:
    proxied.proxy.to_board = lambda line: None  # nothing reaches the board any more
    start = time.monotonic()
    with pytest.raises(PowerTimeoutError):
        proxied.board.state(0)
    elapsed = time.monotonic() - start
    # resent every 0.2 s until the 1 s stall budget is spent (+ one attempt, waiting for the lock)
    assert 1.0 <= elapsed < 1.0 + 0.2 + 1.0


def test_watchdog_cancellation_names_the_trip(host_twin: Twin) -> None:
    """A cut cancelled by the board's watchdog says so, with the trip's own figures: a trip
    while the host was talking (a firmware or clock fault) must be told from a silent host."""
    proxy = Proxy(host_twin.pty)
    try:
        board = RelayBoard(proxy.path, watchdog_ms=200, reply_timeout_s=2.0)
        try:
            pending = board.cut(1, 30.0)
            proxy.to_board = lambda line: None  # the host falls silent for the board
            trip = (
                r"cancelled by the board's watchdog \(WDOG event #\d+ t=\d+ silent_ms=200; "
                r"the host's last request was written \d+\.\d ms before it arrived\)"
            )
            with pytest.raises(PowerError, match=trip):
                pending.wait(10)
            assert board.stats.watchdog_trips == 1
        finally:
            board.close()
    finally:
        proxy.close()


# ---- finding the port ----


@dataclass
class FakeUdevDevice:
    device_node: str | None
    properties: dict[str, str]


def test_find_port_by_usb_serial() -> None:
    devices = [
        FakeUdevDevice("/dev/ttyS0", {}),
        FakeUdevDevice("/dev/ttyUSB0", {"ID_SERIAL_SHORT": "A10KX3Z1"}),
        FakeUdevDevice("/dev/ttyUSB1", {"ID_SERIAL_SHORT": "OTHER"}),
    ]
    assert find_port("A10KX3Z1", devices) == "/dev/ttyUSB0"
    with pytest.raises(PowerError, match="no relay board"):
        find_port("MISSING", devices)
    with pytest.raises(PowerError, match="several"):
        find_port("A10KX3Z1", [*devices, FakeUdevDevice("/dev/ttyACM0", devices[1].properties)])


def test_find_opens_the_board(host_twin: Twin) -> None:
    devices = [FakeUdevDevice(host_twin.pty, {"ID_SERIAL_SHORT": "TWIN1"})]
    board = RelayBoard.find("TWIN1", devices)
    try:
        assert board.identity.board == "host"
    finally:
        board.close()


# ---- a reset between a public call's start and its request ----


class RebootingPeer:
    """A scripted board on a fake peer whose clock restarts (an MCU reset whose BOOT line was
    lost) when `reboot_at_next_sync` is set: the next SYNC answers t=1, from the new epoch."""

    ID = "OK proto=3 fw=0.3.0 build=x board=fake ch=4 clk_hz=16000000 reset=power trips=0 wdog_ms=0"

    def __init__(self) -> None:
        self.start_ns = time.monotonic_ns()
        self.reboot_at_next_sync = False
        self.peer = FakePeer(self.answer)

    def now_us(self) -> int:
        return (time.monotonic_ns() - self.start_ns) // 1000

    def answer(self, seq: int, cmd: str, args: list[str]) -> str:
        if cmd == "SYNC" and self.reboot_at_next_sync:
            self.reboot_at_next_sync = False
            self.start_ns = time.monotonic_ns()
            return f"{seq} OK t=1"
        t = self.now_us()
        replies = {
            "ID": self.ID,
            "SYNC": f"OK t={t}",
            "STATE": f"OK t={t} on=1,1,1,1 safe=1,1,1,1 pend=0,0,0,0",
            "CUT": f"OK t={t} at={t + 5_000_000} ch={args[0] if args else 0}",
            "CUTAT": f"OK t={t} at={t + 5_000_000} ch={args[0] if args else 0}",
            "ABORT": f"OK ch={args[0] if args else 0} cancelled=1",
        }
        return f"{seq} {replies.get(cmd, 'ERR unknown')}"


def test_a_reset_before_the_cut_is_sent_refuses_the_cut() -> None:
    """cut() checks for a reset, then sends SYNC and CUT: a reset noticed in between (the SYNC's
    clock went back) must not let the CUT reach the fresh board before the driver has
    resynchronised (it would be aborted by the resync and its waiter left to time out, and the
    channel states the resync compares with would already be the new ones)."""
    fake = RebootingPeer()
    try:
        board = RelayBoard(fake.peer.path, reply_timeout_s=0.5, sync_interval_s=60)
        try:
            fake.reboot_at_next_sync = True
            with pytest.raises(BoardResetError):
                board.cut(0, 5.0)
            assert not any(" CUT" in body for body in fake.peer.received), fake.peer.received
            deadline = time.monotonic() + 5
            while not board.resets and time.monotonic() < deadline:
                time.sleep(0.01)
            assert [r.reason for r in board.resets] == ["clock went backwards"]
            assert board.resets[0].cuts_lost == ()
            board.cut(1, 5.0)  # after the resync the driver works again
            assert any(" CUTAT 1 " in body for body in fake.peer.received)
        finally:
            board.close()
    finally:
        fake.peer.close()
