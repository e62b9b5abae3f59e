"""The threads that time a cut, at real-time priority while they do.

A cut timed from an event (the first write, an acknowledgement, a flush's completion) is sent
by the thread that saw the event; on a loaded host a thread at normal priority waits behind
every busy process for its turn, and the edge falls that much late. While it waits for its
trigger and sends the cut, the thread runs SCHED_FIFO where the host allows it (root, or
CAP_SYS_NICE / an rtprio limit), with one warning line where it does not; so does the relay
board's reader thread, which the cut's SYNC waits for (rig/power/relay/reader.py). None spins
at that priority: the cut thread sleeps between looks at the writer's live signals
(rig/campaign/cutcycle/cuts.py `POLL_S`) and the reader blocks in the port's read, so a busy
real-time thread cannot starve a 2-core host: docs/decisions.md, "A cut is timed from its
trigger's own instant".
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

PRIORITY = 10  # above every SCHED_OTHER thread, below the kernel's own real-time threads
_warned = threading.Event()  # the warning is said once per process


@contextlib.contextmanager
def realtime() -> Iterator[bool]:
    """The calling thread at SCHED_FIFO for the block (True), or as it was (False)."""
    try:
        policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    except OSError as error:
        if not _warned.is_set():
            _warned.set()
            logging.getLogger("rig").warning(
                "cut timing runs at normal priority (SCHED_FIFO refused: %s)", error.strerror
            )
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, param)
