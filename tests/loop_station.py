"""A relay-board station for tests that outlives the rig: `fixtures/loop_power.py` (the real
firmware behind a pty, each channel switching a loop device over an image file), started and
stopped by PID, its loop devices detached even when a test fails."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST_BINARY = REPO / "firmware" / "build" / "powerboard-host"
_POWER = re.compile(r"power ch=(\d+) on=(\d) node=(\S+) mono_ns=(\d+)")


@dataclass
class LoopStation:
    proc: subprocess.Popen[str]
    pty: str
    images: dict[int, Path]
    # (mono_ns, on) per channel, in order, as the station switched
    switches: dict[int, list[tuple[int, bool]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def powered(self, channel: int) -> bool:
        with self.lock:
            history = self.switches.get(channel, [])
            return bool(history) and history[-1][1]

    def switched_since(self, channel: int, mono_ns: int) -> list[tuple[int, bool]]:
        with self.lock:
            return [s for s in self.switches.get(channel, []) if s[0] >= mono_ns]

    def wait_powered(self, channel: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.powered(channel):
                return True
            time.sleep(0.01)
        return self.powered(channel)

    def wait_off_edge(self, since_ns: int, timeout_s: float) -> bool:
        """True once any channel switched off after `since_ns`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for channel in self.images:
                if any(not on for _, on in self.switched_since(channel, since_ns)):
                    return True
            time.sleep(0.002)
        return False


def _note(station: LoopStation, line: str) -> None:
    match = _POWER.match(line)
    if match:
        channel, on, _, mono = match.groups()
        with station.lock:
            station.switches.setdefault(int(channel), []).append((int(mono), on == "1"))


def _follow(station: LoopStation, copy: Path) -> None:
    assert station.proc.stdout is not None
    with open(copy, "a", encoding="utf-8") as out:
        for line in station.proc.stdout:
            out.write(line)
            out.flush()
            _note(station, line)


def detach_ours(images: dict[int, Path]) -> None:
    """Detach every loop device still bound to one of our images (ours by backing file)."""
    for image in images.values():
        found = subprocess.run(
            ["losetup", "-j", str(image)], capture_output=True, text=True, check=False
        )
        for line in found.stdout.splitlines():
            node = line.split(":", 1)[0]
            subprocess.run(["losetup", "-d", node], capture_output=True, check=False)


@contextmanager
def loop_station(tmp: Path, channels: int, size_mib: int = 8) -> Iterator[LoopStation]:
    images = {}
    for channel in range(channels):
        image = tmp / f"drive-ch{channel}.img"
        with open(image, "wb") as handle:
            handle.truncate(size_mib << 20)
        images[channel] = image
    argv = [sys.executable, "-m", "fixtures.loop_power"]
    for channel, image in images.items():
        argv += ["--image", f"{channel}={image}"]
    errors = open(tmp / "loop_power.err", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.PIPE, stderr=errors, text=True, bufsize=1
    )
    try:
        assert proc.stdout is not None
        pty = ""
        station = LoopStation(proc, "", images)
        deadline = time.monotonic() + 20
        while not pty and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1)
            if not ready:
                continue
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("pty "):
                pty = line.split()[1]
            _note(station, line)
        if not pty:
            why = (tmp / "loop_power.err").read_text()
            raise RuntimeError(f"loop station did not start: {why}")
        station.pty = pty
        copy = tmp / "loop_power.out"
        threading.Thread(target=_follow, args=(station, copy), daemon=True).start()
        yield station
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()  # this PID only
                proc.wait(5)
        errors.close()
        with contextlib.suppress(Exception):
            detach_ours(images)


def campaign_text(station: LoopStation, cycles: int, watchdog_ms: int = 500) -> str:
    drives = "".join(
        f'\n[[drive]]\nchannel = {ch}\nmodel = "Linux loop device"\nserial = "{image}"\n'
        for ch, image in station.images.items()
    )
    return f"""
[campaign]
name = "resume-kill"
cycles = {cycles}
seed = 11
region_mib = 4
region_offset_mib = 1

[station]
kind = "relay-board"
port = "{station.pty}"
watchdog_ms = {watchdog_ms}

[workload]
workers = 4
write_blocks = [1, 2, 4]
flush_every = 4

[cut]
delay_ms = [60, 120]
off_ms = 10
gone_timeout_s = 5
return_timeout_s = 10
sample_blocks = 64

[stop]
max_consecutive_errors = 1000

[health]
every = 0  # loop devices answer no health tool
{drives}"""


def requirements() -> str:
    """Empty when this machine can run a loop station, else why not."""
    if os.geteuid() != 0:
        return "needs root (loop devices)"
    if not HOST_BINARY.exists():
        return f"{HOST_BINARY} is not built (make setup)"
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control"
    return ""
