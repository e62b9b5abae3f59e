"""What ties a node to one attachment of one device, read from the kernel as it is now.

A /dev name says nothing: nodes are reused by other drives as soon as they are freed. Two facts
the kernel keeps do:
- the **disk sequence number** (`diskseq`, Linux 5.15+): every disk the kernel creates, and every
  new medium of a loop device, gets the next number of a boot-wide counter, never reused. sysfs
  shows it; `BLKGETDISKSEQ` reads it from an open descriptor, so a descriptor can be proven to
  belong to the attachment that was identified (a node reused after the check has another).
- a loop device's **backing file** as the kernel holds it (`LOOP_GET_STATUS64`: its device and
  inode numbers). A loop device has no identity of its own to ask; the file behind it does, and
  a reused node, a foreign image at the same path or a copy all have other numbers.
Where the kernel lacks either, the value is 0 or "" and the proof rests on the rest.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

BLKGETDISKSEQ = 0x80081280  # _IOR(0x12, 128, __u64)
LOOP_GET_STATUS64 = 0x4C05
_LOOP_INFO64 = struct.Struct("<QQQQQIIII64s64s32sQQ")  # struct loop_info64


def diskseq(sys_name: str) -> int:
    """The disk sequence number sysfs shows for a block device now (0: none, or gone)."""
    try:
        with open(f"/sys/class/block/{sys_name}/diskseq") as handle:
            return int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def fd_diskseq(fd: int) -> int:
    """The disk sequence number of the attachment an open descriptor belongs to (0: unknown)."""
    buffer = bytearray(8)
    try:
        fcntl.ioctl(fd, BLKGETDISKSEQ, buffer)
    except OSError:
        return 0
    return int(struct.unpack("<Q", buffer)[0])


def fd_backing(fd: int) -> str:
    """`dev MAJ:MIN ino N` of the file behind an open loop device, as the kernel holds it;
    "" when the descriptor is not a bound loop device."""
    buffer = bytearray(_LOOP_INFO64.size)
    try:
        fcntl.ioctl(fd, LOOP_GET_STATUS64, buffer)
    except OSError as error:
        if error.errno in (errno.ENXIO, errno.ENOTTY, errno.EINVAL):
            return ""
        raise
    device, inode = _LOOP_INFO64.unpack_from(buffer)[:2]
    return f"dev {os.major(device)}:{os.minor(device)} ino {inode}"


def attachment(devnode: str) -> tuple[int, str]:
    """(`fd_diskseq`, `fd_backing`) of the device at `devnode`, opened read-only for the question
    (only ever a node that already answers to the campaign's identity: never another user's
    device); (0, "") when it cannot be opened."""
    try:
        fd = os.open(devnode, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return 0, ""
    try:
        return fd_diskseq(fd), fd_backing(fd)
    finally:
        os.close(fd)
