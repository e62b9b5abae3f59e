"""The in-process drive's power edges against the requests it served: an off edge armed for an
instant that has already passed (the arming thread ran late on a loaded host) falls when the arm
arrives, so no request the drive served meanwhile comes after its edge (the rig refuses a cycle
where a write issued after the edge succeeded: rig/campaign/cutcycle/phases.py)."""

from __future__ import annotations

import errno
import time

import numpy as np
import pytest

from fixtures.fake_power import FakePowerSwitch
from fixtures.profiles import profile
from fixtures.virtual_drive import VirtualDrive
from rig.drive.identity import DriveIdentity
from rig.native.trigger import Arrival, Trigger
from rig.power.realtime import realtime


def drive() -> VirtualDrive:
    return VirtualDrive(DriveIdentity(model="EDGE", serial="EDGE0"), profile("honest"), seed=1)


def block(d: VirtualDrive) -> np.ndarray:
    return np.full(d.profile.block_size, 7, dtype=np.uint8)


def test_an_arm_for_a_past_instant_falls_after_every_request_served() -> None:
    d = drive()
    planned = time.monotonic_ns()
    time.sleep(0.02)  # the arming thread runs late: the drive serves a write meanwhile
    served = d.write(d.epoch, 0, block(d), False)
    armed = d.arm_off(planned)
    assert armed >= served > planned  # the edge falls after what the drive served
    with pytest.raises(OSError) as refused:
        d.write(d.epoch, 1, block(d), False)
    assert refused.value.errno == errno.EIO  # and nothing after it is served


def test_the_relays_edge_is_the_instant_the_drive_lost_power() -> None:
    d = drive()
    switch = FakePowerSwitch({0: d})
    served = d.write(d.epoch, 0, block(d), False)
    edge = switch.cut(0, 0.0).wait(5)
    assert edge.host_ns >= served and d.gone_ns == edge.host_ns


def _hold_the_interpreter(seconds: float) -> None:
    """Busy Python in this thread for `seconds`: what a loaded host's interpreter does to the
    thread a completion returns to."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_cut_armed_on_a_completion_falls_at_its_delay_however_late_the_thread_returns() -> None:
    d = drive()
    switch = FakePowerSwitch({0: d})
    armed = switch.arm_after_completion(0, 0.002)
    assert armed is not None
    target = d.open_target()
    with realtime():  # as the rig's cut thread, whose priority the completion's thread inherits
        done = target.write_fired(0, block(d), False, armed.trigger)
    assert armed.trigger.event_ns == done and armed.trigger.edge_ns == done + 2_000_000
    _hold_the_interpreter(0.01)  # the rig's thread is late: the relay has not been told
    with pytest.raises(OSError):  # the drive took the edge at the trigger's instant
        target.write(1, block(d), False)
    edge = armed.settle().wait(5)
    assert edge.host_ns == done + 2_000_000 == d.gone_ns


def test_the_completion_fires_its_trigger_while_the_requests_thread_is_held() -> None:
    """The completion path is a native thread of its own (rig/native/trigger.c `pfr_arrive`):
    a request whose thread is kept from the interpreter past its completion still fires the
    cut's trigger at the completion, not when the thread gets back."""
    trigger = Trigger.after(0.001)
    with realtime():  # as the rig's cut thread: the completion's thread inherits its priority
        arrival = Arrival(trigger, latency_ns=200_000)
    _hold_the_interpreter(0.02)
    arrival.join()
    assert trigger.event_ns == arrival.complete_ns
    # woke at it, not 20 ms later (bound for a host that refuses SCHED_FIFO, beside a busy
    # test worker)
    assert trigger.armed_ns - arrival.complete_ns < 10_000_000
    assert trigger.edge_ns == max(arrival.complete_ns + 1_000_000, trigger.armed_ns)
