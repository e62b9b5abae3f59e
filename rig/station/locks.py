"""One campaign per drive: an exclusive flock on a per-identity lock file, held for the campaign.

The lock file is named after the drive's identity (never its /dev node, which another campaign
may know under another name), and holds the holder's PID and campaign name so a refusal can say
who has the drive. flock is released by the kernel when the holder exits, however it exits, so
a crashed campaign never leaves a stale claim behind (only, then, an empty unlocked file).

Simulated drives repeat the same identities in every simulator instance: a simulated station
should pass a `lock_dir` private to its instance, or two independent simulations exclude each
other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from rig.drive.identity import DriveIdentity, normalise_wwn
from rig.errors import UserError

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
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DriveClaimedError(
                f"drive {identity.label()} is claimed by another campaign"
                f" ({holder_of(path)}; lock {path})"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # a releasing holder unlinked it between our open and flock: again
    try:
        yield path
    finally:
        # unlinked while still locked, so a new claimer either finds it gone or sees (above)
        # that the file it locked is no longer the one at the path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def claimed_by(identity: DriveIdentity, lock_dir: str = LOCK_DIR) -> str | None:
    """Who holds the drive now ("pid N, campaign 'x'"), or None. For listings: it holds a shared
    lock for an instant, so a campaign starting in that instant may be refused and can retry."""
    for name in lock_names(identity):
        path = os.path.join(lock_dir, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return holder_of(path)
        finally:
            os.close(fd)  # also drops the shared lock
    return None
