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
