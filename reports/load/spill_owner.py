"""Whose a report's temporary folder is, so that none is left behind: the folder's
name says which process made it (its PID and the kernel's start time of that process, so a
reused PID is not taken for its owner); the process removes its folders at any exit it lives
through (normal, an exception, Ctrl-C, SIGTERM, SIGHUP), and a report removes the folders of
owners that are gone (a SIGKILL, a power loss) before it makes its own."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
import uuid
from types import FrameType

PREFIX = "rig-report-"
_NAME = re.compile(re.escape(PREFIX) + r"([0-9]+)-([0-9]+)-")
_tracked: set[str] = set()
_handled = False


def start_time(pid: int) -> int | None:
    """The kernel's start time (clock ticks after boot) of process `pid`; None if there is no
    such process (or no /proc to ask)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: count after its last ")"
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def prefix() -> str:
    """The name prefix of this process's folders."""
    return f"{PREFIX}{os.getpid()}-{start_time(os.getpid()) or 0}-"


def owner_alive(name: str) -> bool:
    """Whether the process that made the folder `name` still runs (True for a name not made
    by this module, or without /proc to ask: never removed)."""
    found = _NAME.match(name)
    if not found or not os.path.exists("/proc/self/stat"):
        return True
    pid, started = int(found.group(1)), int(found.group(2))
    now = start_time(pid)
    return now is not None and (started == 0 or now == started)


def remove_stale(folder: str | None = None) -> list[str]:
    """Remove the report folders (in `folder`, default the temporary directory) of owners that
    are gone: only directories named by this module and owned by this user. Returns them."""
    base = folder or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if not entry.name.startswith(PREFIX) or owner_alive(entry.name):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and entry.stat().st_uid == os.getuid():
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed.append(entry.path)
    return removed


def track(path: str) -> None:
    """Remove `path` if the process ends by SIGTERM or SIGHUP (an exit or an exception
    removes it already: tempfile.TemporaryDirectory's finalizer)."""
    _tracked.add(path)
    _handle_signals()


def _remove_tracked() -> None:
    for path in list(_tracked):
        shutil.rmtree(path, ignore_errors=True)
        _tracked.discard(path)


def _handle_signals() -> None:
    """On SIGTERM and SIGHUP (where nobody else handles them): remove the folders, then die of
    the signal as before (the same exit status)."""
    global _handled
    if _handled or threading.current_thread() is not threading.main_thread():
        return
    _handled = True
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _die)


def _die(sig: int, frame: FrameType | None) -> None:
    _remove_tracked()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


class SpillFolder:
    """A temporary folder for spilled tables, removed once nothing refers to it (and at any
    exit of the process but SIGKILL: this module; a later report removes what a
    killed one left)."""

    def __init__(self) -> None:
        remove_stale()
        self.folder = tempfile.TemporaryDirectory(prefix=prefix())
        track(self.folder.name)

    def base(self) -> str:
        """A new file name stem in the folder."""
        return os.path.join(self.folder.name, uuid.uuid4().hex)
