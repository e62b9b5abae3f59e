"""The loop station's I/O gate (fixtures/loop_power.py): a gate timer that fires late, after the
off edge and the next power-on, must not gate the device attached since (seen in CI: the new
device came back with a 512-byte capacity, and the rig rightly reported a capacity change on a
perfect drive). The device ioctl is replaced by a recorder: this is the timer logic alone."""

from __future__ import annotations

import threading

import pytest

from fixtures import loop_power


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(loop_power, "set_limit", lambda node, limit: calls.append((node, limit)))
    return calls


class WatchedLock:
    """A lock that tells when someone starts waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.wanted = threading.Event()

    def __enter__(self) -> None:
        self.wanted.set()
        self._lock.acquire()

    def __exit__(self, *_: object) -> None:
        self._lock.release()


def _armed_channel(lock: WatchedLock) -> loop_power.Channel:
    channel = loop_power.Channel(0, "/nonexistent/drive.img")
    channel.index = 4242  # as if attached: gate_io acts on /dev/loop4242 (through the recorder)
    channel.arm_gate(0.0, lock)
    return channel


def _wait_timer(channel_gate: threading.Timer | None) -> None:
    assert channel_gate is not None
    channel_gate.join(5)
    assert not channel_gate.is_alive()


def test_a_gate_that_fires_gates_the_device(limits: list[tuple[str, int]]) -> None:
    lock = WatchedLock()
    with lock:
        channel = _armed_channel(lock)
        timer = channel.gate
    _wait_timer(timer)
    assert limits == [("/dev/loop4242", loop_power.POWERLESS_LIMIT)]
    assert channel.gated_at > 0


def test_a_gate_firing_late_does_nothing_after_a_cancel(limits: list[tuple[str, int]]) -> None:
    lock = WatchedLock()
    with lock:  # the off edge and the power-on hold the lock while the timer fires
        lock.wanted.clear()
        channel = _armed_channel(lock)
        timer = channel.gate
        assert lock.wanted.wait(5), "the gate timer did not fire"  # it now waits for the lock
        channel.cancel_gate()  # what power_on and power_off do first
    _wait_timer(timer)
    assert limits == [], "a cancelled gate still switched the device's I/O off"
    assert channel.gated_at == 0
