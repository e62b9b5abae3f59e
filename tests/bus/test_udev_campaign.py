"""Whole campaigns through the production code on real loop devices and real udev events: the
drive is found again by identity under another node, a different drive at the old node is never
written, and every bus event, return and ready time lands in the store.

Power here is a loop device detached on the cut and attached again on power-on. A loop device
that is still open keeps taking writes after `losetup -d` (the kernel detaches it on last close),
where a drive without power fails them: `PoweredTarget` fails I/O while the power is off, as the
drive would; everything else (udev, O_DIRECT, interlocks, identity, readiness) is the real thing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from fixtures import loopctl
from fixtures.fake_power import FakePowerSwitch
from rig.bus.udev import UdevPresence
from rig.campaign.observer import Lines, Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.config.campaign import DriveSpec
from rig.drive.node import DriveNode
from rig.health.tools import ToolRunner
from rig.io.blockio import BlockTarget
from rig.station.build import ToolDrives
from rig.station.model import Station
from rig.store import Store
from tests.health.health_paths import FAKEBIN
from tests.loopdev import loop_available

pytestmark = pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "ok")
LOOP = "Linux loop device"


class LoopPower:
    """The power input of one loop 'drive': off detaches it, on attaches an image again."""

    def __init__(self, image: str, indices: list[int], comes_back_as: str) -> None:
        self.powered = threading.Event()
        self.powered.set()
        self.image, self.comes_back_as = image, comes_back_as
        self.indices = indices  # every index used, for clean-up
        self.index = loopctl.free_index()
        indices.append(self.index)
        loopctl.attach(self.index, image)
        self.old = -1

    def set_power(self, on: bool) -> None:
        if not on:
            self.powered.clear()
            loopctl.detach_and_remove(self.index)  # the remove follows the rig's last close
            self.old = self.index
            return
        loopctl.detach_and_remove(self.old)  # closed by now: really removed
        if self.comes_back_as == self.image:
            self.index = self._attach_elsewhere()
        else:
            self.index = self.old  # another drive at the old node
            self.indices.append(self.index)
            loopctl.attach(self.index, self.comes_back_as)
        self.powered.set()

    def _attach_elsewhere(self) -> int:
        """Attach at a free index other than the old one; other tests on this machine allocate
        loop devices too, so an index found free may be taken before the attach: try another."""
        candidate = self.old + 1
        for _ in range(50):
            if candidate not in self.indices and not os.path.exists(f"/sys/block/loop{candidate}"):
                self.indices.append(candidate)
                try:
                    loopctl.attach(candidate, self.image)
                    return candidate
                except (OSError, subprocess.CalledProcessError):
                    pass
            candidate += 1
        raise RuntimeError("no free loop index to come back at")


class PoweredTarget:
    """A block target whose I/O fails while its drive has no power (see the module doc)."""

    def __init__(self, inner: BlockTarget, power: LoopPower) -> None:
        self.inner, self.power = inner, power

    def _check(self) -> None:
        if not self.power.powered.is_set():
            raise OSError(5, "Input/output error (no power)")

    @property
    def block_size(self) -> int:
        return self.inner.block_size

    @property
    def nblocks(self) -> int:
        return self.inner.nblocks

    def write(self, lba: int, data: npt.NDArray[np.uint8], durable: bool = False) -> None:
        self._check()
        self.inner.write(lba, data, durable)
        self._check()  # the drive lost power before acknowledging

    def read(self, lba: int, count: int) -> npt.NDArray[np.uint8]:
        self._check()
        return self.inner.read(lba, count)

    def flush(self) -> None:
        self._check()
        self.inner.flush()
        self._check()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def indices() -> Iterator[list[int]]:
    used: list[int] = []
    yield used
    for index in set(used):
        loopctl.detach_and_remove(index)


def image(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    with path.open("wb") as handle:
        handle.truncate(8 << 20)
    return str(path)


CAMPAIGN = """
[campaign]
name = "udev"
cycles = {cycles}
region_mib = 2
[station]
kind = "manual"
[workload]
workers = 2
write_blocks = [1, 2]
flush_every = 2
[cut]
delay_ms = [1, 5]
off_ms = 1
gone_timeout_s = 10
return_timeout_s = {back}
sample_blocks = 16
[[drive]]
channel = 0
model = "{model}"
serial = "{serial}"
"""


def station(power: LoopPower, tmp_path: Path, runner: ToolRunner | None = None) -> Station:
    drives = ToolDrives(runner, lock_dir=str(tmp_path / "locks"))

    def open_target(node: DriveNode, spec: DriveSpec) -> BlockTarget:
        return PoweredTarget(drives.open_target(node, spec), power)

    return Station(
        "loop",
        FakePowerSwitch({0: power}),
        UdevPresence(),
        open_target,
        ready=drives.ready,
        write_cache=drives.write_cache,
        claim=drives.claim,
    )


def events(store: Store, kind: str) -> list[dict[str, object]]:
    rows = store.query("SELECT detail FROM event WHERE kind = ? ORDER BY id", (kind,))
    return [json.loads(r["detail"]) for r in rows]


def test_a_drive_returning_under_another_node_is_found_by_identity(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    drive = image(tmp_path, "drive.img")
    power = LoopPower(drive, indices, comes_back_as=drive)
    first = f"/dev/loop{power.index}"
    campaign = campaign_file.parse(CAMPAIGN.format(cycles=3, back=10, model=LOOP, serial=drive))
    store = Store(str(tmp_path / "u.sqlite"))
    [summary] = run_campaign(campaign, station(power, tmp_path), store, Observer())
    rows = store.query("SELECT status, error, gone_ns, back_ns, cut_ns FROM cycle ORDER BY seq")
    assert [(r["status"], r["error"]) for r in rows] == [("ok", "")] * 3
    assert (summary.cycles, summary.errors, summary.dead, summary.failures) == (3, 0, False, {})
    assert all(r["cut_ns"] < r["gone_ns"] < r["back_ns"] for r in rows)
    back = [e["devnode"] for e in events(store, "bus_back")]
    assert len(back) == 3 and first not in back and len(set(back)) == 3
    ready = store.query("SELECT host_ns FROM event WHERE kind = 'ready' ORDER BY id")
    assert len(ready) == 3
    assert all(r["host_ns"] >= c["back_ns"] for r, c in zip(ready, rows, strict=True))
    udev = events(store, "udev")
    left = [e for e in udev if e["devnode"] == first and e["action"] == "change"]
    assert left, udev  # left the bus at the old node
    seqnums = [int(str(e["seqnum"])) for e in udev]
    assert all(n > 0 for n in seqnums)
    for node in back:  # and came back, by a real add/change, at each new one
        assert any(e["devnode"] == node and e["action"] in ("add", "change") for e in udev)
    assert events(store, "write_cache")[0] == {"enabled": None, "wanted": None}


def test_a_different_drive_at_the_old_node_is_never_written(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    ours, stranger = image(tmp_path, "ours.img"), image(tmp_path, "stranger.img")
    before = hashlib.sha256(Path(stranger).read_bytes()).hexdigest()
    power = LoopPower(ours, indices, comes_back_as=stranger)
    old_node = f"/dev/loop{power.index}"
    campaign = campaign_file.parse(CAMPAIGN.format(cycles=3, back=2, model=LOOP, serial=ours))
    store = Store(str(tmp_path / "u.sqlite"))
    [summary] = run_campaign(campaign, station(power, tmp_path), store, Observer())
    # our drive never came back: a dead device after one cycle, its channel stopped
    assert summary.dead and summary.cycles == 1
    [cycle] = store.query("SELECT status, error FROM cycle")
    assert cycle["status"] == "dead" and "did not return" in cycle["error"]
    assert hashlib.sha256(Path(stranger).read_bytes()).hexdigest() == before
    # the stranger's arrival at the old node is in the store, named as another drive
    arrivals = [e for e in events(store, "udev") if e.get("other_drive")]
    assert arrivals and arrivals[-1]["devnode"] == old_node
    assert arrivals[-1]["other_drive"] == f"{LOOP} s/n {stranger}"


class ImpostorPower(LoopPower):
    """Comes back at a new node with the same udev identity (backing file), but from then on
    the drive itself answers identify as another drive (through the fake smartctl)."""

    def __init__(self, image: str, indices: list[int], answer: Path) -> None:
        super().__init__(image, indices, comes_back_as=image)
        self.answer = answer

    def set_power(self, on: bool) -> None:
        if on:
            doc = {
                "json_format_version": [1, 0],
                "smartctl": {"version": [7, 3], "exit_status": 0},
                "device": {"name": "/dev/loop", "type": "sat", "protocol": "ATA"},
                "model_name": LOOP,
                "serial_number": "IMPOSTOR-0001",
                "firmware_version": "X",
            }
            self.answer.write_text(json.dumps(doc))
        super().set_power(on)


def test_a_drive_whose_own_identity_changes_after_a_return_stops_its_channel(
    tmp_path: Path, udevd: None, indices: list[int]
) -> None:
    drive = image(tmp_path, "drive.img")
    answer = tmp_path / "smartctl.json"
    # before the cut the fake smartctl has no answer (like the real one on a loop device)
    env = {**os.environ, "PATH": f"{FAKEBIN}{os.pathsep}{Path(sys.executable).parent}"}
    env = {k: v for k, v in env.items() if not k.startswith("FAKE_")}
    env["FAKE_SMARTCTL_OUTPUT"] = str(answer)
    runner = ToolRunner(env=env)
    power = ImpostorPower(drive, indices, answer)
    campaign = campaign_file.parse(CAMPAIGN.format(cycles=5, back=10, model=LOOP, serial=drive))
    store = Store(str(tmp_path / "u.sqlite"))
    lines: list[str] = []
    [summary] = run_campaign(campaign, station(power, tmp_path, runner), store, Lines(lines.append))
    assert summary.cycles == 1 and not summary.dead
    [cycle] = store.query("SELECT status, error, blocks_checked FROM cycle")
    assert cycle["status"] == "error" and cycle["blocks_checked"] == 0  # nothing read either
    assert "udev and smartctl -i disagree on its identity" in cycle["error"]
    assert "'IMPOSTOR-0001'" in cycle["error"]
    assert store.query("SELECT status FROM drive")[0]["status"] == "stopped"
    assert any(line.startswith("ch0: stopped: identify: refusing") for line in lines)
