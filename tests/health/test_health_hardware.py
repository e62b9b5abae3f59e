"""Hardware tier for the health tools: a real SATA, SAS or NVMe drive, read-only (no write).

Set RIG_HEALTH_DEVICE to a whole-disk node (e.g. /dev/sdb, /dev/nvme0n1) on a machine that has
one; everything here only reads identity, health, readiness and the write-cache state.
"""

from __future__ import annotations

import os

import pytest

from rig.bus.udev import UdevPresence
from rig.health import crosscheck
from rig.health.tools import ToolRunner
from rig.station.build import ToolDrives

DEVICE = os.environ.get("RIG_HEALTH_DEVICE", "")

pytestmark = [
    pytest.mark.hardware,
    pytest.mark.skipif(not DEVICE, reason="no real drive: set RIG_HEALTH_DEVICE=/dev/sdX to run"),
]


def test_real_drive_identity_health_readiness_and_write_cache() -> None:
    node = next((n for n in UdevPresence().candidates() if n.devnode == DEVICE), None)
    assert node is not None, f"{DEVICE} is not a whole-disk drive udev knows"
    runner = ToolRunner()
    answers = crosscheck.drive_answers(node.devnode, runner)
    assert answers, "a SATA/SAS/NVMe drive must answer identify"
    for answer in answers:
        assert crosscheck.disagreement(node.identity, answer) is None, answer.tool
    drives = ToolDrives(runner)
    snapshot = drives.health(node)
    assert snapshot.identity.serial and snapshot.identity.serial.strip() == node.identity.serial
    assert snapshot.power_on_hours is not None
    assert drives.ready(node, 30.0) > 0
    assert drives.write_cache(node, None) in (True, False)
