"""Real loop block devices for tests, detached even when a test fails."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def loop_available() -> str:
    """Empty when loop devices work here, else the reason they do not."""
    probe = subprocess.run(["losetup", "--find"], capture_output=True, text=True, check=False)
    return "" if probe.returncode == 0 else f"no loop devices: {probe.stderr.strip()}"


@contextmanager
def attached(
    image: Path, direct_io: bool = True, sector_size: int = 4096, partscan: bool = False
) -> Iterator[str]:
    args = ["losetup", "--find", "--show", f"--sector-size={sector_size}"]
    if partscan:
        args.append("--partscan")  # partitions made by the kernel go away on detach
    if direct_io:
        args.append("--direct-io=on")
    devnode = subprocess.run(
        [*args, str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        yield devnode
    finally:
        subprocess.run(["losetup", "-d", devnode], check=False)


@contextmanager
def mounted(devnode: str, where: Path) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", devnode, str(where)], check=True, capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def drop_partitions(devnode: str) -> None:
    """Delete partitions added with `partx -a`; they outlive a detach and would show up on the
    next user of the same loop index. udev may still be probing a new partition (EBUSY): retry."""
    import os
    import time

    name = os.path.basename(devnode)
    subprocess.run(["udevadm", "settle", "--timeout=10"], check=False, capture_output=True)
    for _ in range(50):
        subprocess.run(["partx", "-d", devnode], check=False, capture_output=True)
        base = f"/sys/class/block/{name}"
        left = [e for e in os.listdir(base) if os.path.exists(f"{base}/{e}/partition")]
        if not left:
            return
        time.sleep(0.1)
    raise RuntimeError(f"partitions of {devnode} could not be deleted: {left}")
