"""One campaign per drive: an exclusive flock on a per-identity lock file, held for the campaign.

The lock file is named after the drive's identity (never its /dev node, which another campaign
may know under another name), and holds the holder's PID and campaign name so a refusal can say
who has the drive. flock is released by the kernel when the holder exits, however it exits, so
a crashed campaign never leaves a stale claim behind.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from rig.errors import UserError
from rig.identity import DriveIdentity, normalise_wwn

LOCK_DIR = "/run/lock/rig"


class DriveClaimedError(UserError):
    """Another campaign holds this drive."""


def lock_names(identity: DriveIdentity) -> list[str]:
    """One file name per key the drive is known by: WWN, and serial + model.

    A drive found on the bus has both; locking both means two campaigns that name the same drive
    in different ways still exclude each other.
    """
    keys = []
    if identity.wwn:
        keys.append(f"wwn-{normalise_wwn(identity.wwn)}")
    if identity.serial:
        keys.append(f"sn-{identity.model}-{identity.serial}")
    return [re.sub(r"[^A-Za-z0-9._-]", "_", key)[:200] + ".lock" for key in keys]


def holder_of(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read().strip()
    except OSError:
        return "an unknown process"
    return text or "an unknown process"


@contextmanager
def claim(identity: DriveIdentity, campaign: str, lock_dir: str = LOCK_DIR) -> Iterator[list[str]]:
    """Hold the drive for the duration of the block; DriveClaimedError if another process does."""
    names = lock_names(identity)
    if not names:
        raise UserError(f"drive {identity.label()} has no WWN or serial to claim it by")
    os.makedirs(lock_dir, mode=0o755, exist_ok=True)
    with ExitStack() as held:
        paths = [held.enter_context(_flock(os.path.join(lock_dir, n), identity)) for n in names]
        for path in paths:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(f"pid {os.getpid()}, campaign '{campaign}'\n")
        yield paths


@contextmanager
def _flock(path: str, identity: DriveIdentity) -> Iterator[str]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DriveClaimedError(
                f"drive {identity.label()} is claimed by another campaign"
                f" ({holder_of(path)}; lock {path})"
            ) from None
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # the file stays: unlinking it would race with a new claimer
    finally:
        os.close(fd)
