"""What a write engine shares with the writer that starts it (rig/io/workload.py): the live
counters cut strategies read, the context of one cycle's writes, and the target the native
engine can drive. Apart from workload.py so that the engines (workload_native.py,
workload_threads.py) need not import it back."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rig.io.blockio import BlockTarget
from rig.io.ledger import CycleLog, LbaState
from rig.io.workload_plan import IntentSink


class Live:
    """What the writer is doing right now, for cut strategies (campaign/cutcycle/cuts.py): acks
    seen, the host time of the last one, flushes in flight and done, writes issued. The native
    engine updates the same int64 words from C while it runs (and a sixth, its completions read
    from the AIO ring without a system call: a diagnostic)."""

    WORDS = 7  # engine.c LIVE_N

    def __init__(self) -> None:
        self.words = (ctypes.c_int64 * self.WORDS)()
        self._lock = threading.Lock()
        # called by the threads engine's writer thread with the first write's issue instant,
        # right after stamping it and before the write reaches the device (a uniform cut is
        # sent from there: campaign/cutcycle/cuts.py); the native engine does not call it
        self.on_first_issue: Callable[[int], None] | None = None
        self._discards = 0  # discards in flight (the threads engine's alone: C only writes)

    @property
    def discards_in_flight(self) -> int:
        return self._discards

    def discard_started(self) -> None:
        with self._lock:
            self._discards += 1

    def discard_ended(self) -> None:
        with self._lock:
            self._discards -= 1

    @property
    def acks(self) -> int:
        return int(self.words[0])

    @property
    def last_ack_ns(self) -> int:
        return int(self.words[1])

    @property
    def flushes_in_flight(self) -> int:
        return int(self.words[2])

    @property
    def flushes_done(self) -> int:
        return int(self.words[3])

    @property
    def writes_issued(self) -> int:
        """Writes sent to the device so far (failed ones included: they reached it)."""
        return int(self.words[4])

    @property
    def ring_reaped(self) -> int:
        """Native engine: completions it read from the AIO ring without calling io_getevents."""
        return int(self.words[5])

    @property
    def first_issue_ns(self) -> int:
        """Issue instant of the first write that reached the device (0 before it)."""
        return int(self.words[6])

    def issued(self, at_ns: int) -> None:
        with self._lock:
            first = not self.words[6]
            if first:
                self.words[6] = at_ns
            self.words[4] += 1
        if first and self.on_first_issue is not None:
            self.on_first_issue(at_ns)

    def acked(self, at_ns: int) -> None:
        with self._lock:
            self.words[1] = at_ns
            self.words[0] += 1

    def flush_started(self) -> None:
        with self._lock:
            self.words[2] += 1

    def flush_ended(self, ok: bool) -> None:
        with self._lock:
            self.words[2] -= 1
            self.words[3] += int(ok)


@runtime_checkable
class DescriptorTarget(Protocol):
    """A target with an O_DIRECT file descriptor the native engine can drive."""

    def fileno(self) -> int: ...


@dataclass(frozen=True)
class WriterContext:
    campaign: int
    target: BlockTarget
    state: LbaState
    log: CycleLog
    stop: threading.Event
    intent: IntentSink | None = None  # told every write's range before it can be issued
