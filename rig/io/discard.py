"""Discard (TRIM / UNMAP / deallocate) of a test region, and the alignment check.

Three ways, as a storage engineer would pick per transport:
- `blkdiscard`: the kernel's BLKDISCARD ioctl on the block device (any transport whose driver
  supports discard; loop devices do, by punching holes in their image);
- `sg_unmap` (sg3_utils): SCSI UNMAP, for SAS/SATA behind a SCSI stack;
- `nvme`: NVMe Dataset Management with the deallocate attribute (`nvme dsm --ad`).
The tool invocations are plain argv lists, so they are tested with fake executables.
"""

from __future__ import annotations

import fcntl
import struct
import subprocess

from rig.errors import RigError
from rig.io.blockio import BLKDISCARD, queue_bytes

SG_UNMAP_MAX_BLOCKS = 0xFFFFFFFF  # one UNMAP descriptor's block count is 32 bits
NVME_DSM_MAX_BLOCKS = 0xFFFFFFFF  # one DSM range: its length in blocks is a 32-bit field


class DiscardError(RigError):
    """The discard failed (a rig-side fault: the drive or tool refused it)."""


def blkdiscard(fd: int, offset_bytes: int, length_bytes: int) -> None:
    try:
        fcntl.ioctl(fd, BLKDISCARD, struct.pack("QQ", offset_bytes, length_bytes))
    except OSError as error:
        raise DiscardError(f"BLKDISCARD failed: {error}") from error


def sg_unmap_argv(devnode: str, lba: int, count: int) -> list[str]:
    return ["sg_unmap", f"--lba={lba}", f"--num={count}", devnode]


def nvme_dsm_argv(devnode: str, lba: int, count: int) -> list[str]:
    return ["nvme", "dsm", devnode, "--ad", f"--slbs={lba}", f"--blocks={count}"]


def _largest(field_max: int, device_max: int) -> int:
    return min(field_max, device_max) if device_max > 0 else field_max


def _ranges(lba: int, count: int, largest: int) -> list[tuple[int, int]]:
    end = lba + count
    return [(first, min(largest, end - first)) for first in range(lba, end, largest)]


def run_tool(argv: list[str], timeout_s: float = 120.0) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as error:
        raise DiscardError(f"{argv[0]} is not installed") from error
    except subprocess.TimeoutExpired as error:
        raise DiscardError(f"{argv[0]} did not finish within {timeout_s:g} s") from error
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise DiscardError(f"{' '.join(argv)}: exit {done.returncode}: {why[-1] if why else ''}")


def device_limit_blocks(devnode: str, block: int) -> int:
    """The most blocks the device takes in one discard, as its driver read it from the device
    (SCSI Block Limits VPD: MAXIMUM UNMAP LBA COUNT; NVMe: DMRSL) into sysfs
    `queue/discard_max_hw_bytes`; 0 where it says nothing (then one range's field is the
    limit). A tool sends what it is given as one command: a real drive refuses a larger one."""
    return queue_bytes(devnode, "discard_max_hw_bytes") // block


def discard(
    kind: str, devnode: str, fd: int, lba: int, count: int, block: int, device_max: int = 0
) -> None:
    """Discard `count` logical blocks from `lba` (in the drive's logical blocks). The tools get
    ranges no larger than `device_max` blocks (`device_limit_blocks`; 0: no such limit)."""
    if kind == "blkdiscard":  # the kernel splits to the device's limits itself
        blkdiscard(fd, lba * block, count * block)
    elif kind == "sg_unmap":
        for first, n in _ranges(lba, count, _largest(SG_UNMAP_MAX_BLOCKS, device_max)):
            run_tool(sg_unmap_argv(devnode, first, n))
    elif kind == "nvme":
        for first, n in _ranges(lba, count, _largest(NVME_DSM_MAX_BLOCKS, device_max)):
            run_tool(nvme_dsm_argv(devnode, first, n))
    elif kind != "none":
        raise ValueError(f"unknown discard kind {kind!r}")


def misalignment(first_lba: int, count: int, logical: int, physical: int) -> str:
    """Why the region [first_lba, +count) is not aligned to the physical block, or ""."""
    if physical <= logical or physical % logical:
        return ""
    per = physical // logical
    reasons = []
    if first_lba % per:
        reasons.append(f"starts {first_lba % per * logical} B into a physical block")
    if count % per:
        reasons.append(f"ends {count % per * logical} B into a physical block")
    if not reasons:
        return ""
    return (
        f"test region is not aligned to the {physical} B physical block ({', '.join(reasons)}):"
        " read-modify-write inside the drive will skew throughput and tears"
    )
