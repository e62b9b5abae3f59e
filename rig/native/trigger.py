"""A cut timed from a request's completion, armed in the completion path (trigger.c).

The rig sets the delay before it issues the request; the thread that completes the request fires
the trigger natively, without the interpreter's lock, and the switch reads the edge's instant from
it: docs/decisions.md, "A cut after an event is armed in the completion path".
"""

from __future__ import annotations

import ctypes

from rig.native import lib


class Trigger(ctypes.Structure):
    """struct pfr_trigger (pfr.h). Fields in host CLOCK_MONOTONIC ns; `at_ns` 0 until fired."""

    _fields_ = (
        ("delay_ns", ctypes.c_int64),
        ("event_ns", ctypes.c_int64),
        ("armed_ns", ctypes.c_int64),
        ("at_ns", ctypes.c_int64),
    )

    @classmethod
    def after(cls, delay_s: float) -> Trigger:
        return cls(delay_ns=round(delay_s * 1e9))

    def fire(self, event_ns: int) -> None:
        """Fired by a caller that got the completion back (a target without a native completion
        path): the instant is the event plus the delay, or now when that has passed."""
        lib().pfr_trigger_fire(ctypes.byref(self), event_ns)

    @property
    def edge_ns(self) -> int:
        """The edge's instant once fired, else 0 (an acquire load: the other fields are set)."""
        return int(lib().pfr_trigger_at(ctypes.byref(self)))


def complete_at(complete_ns: int, trigger: Trigger | None) -> int:
    """A simulated request completing at `complete_ns`: this thread sleeps until then (the
    interpreter's lock released) and fires `trigger`, if any, the moment it wakes; returns the
    instant it woke."""
    ref = ctypes.byref(trigger) if trigger is not None else None
    return int(lib().pfr_complete_at(complete_ns, ref))


class Arrival:
    """A simulated request that arrived at `arrived_ns` and completes `latency_ns` later: its
    completion fires the trigger from a native thread of its own at that instant, however late
    the request's own thread gets there on a loaded host (the completion of a drive does not
    wait for the host). `join` before the trigger is read or freed."""

    def __init__(self, trigger: Trigger, latency_ns: int) -> None:
        self._trigger = trigger  # kept alive until joined: the thread writes it
        thread = ctypes.c_uint64()
        arrived = int(lib().pfr_arrive(ctypes.byref(trigger), latency_ns, ctypes.byref(thread)))
        if arrived < 0:
            raise OSError(-arrived, "no thread for the completion")
        self.arrived_ns, self._thread = arrived, thread.value
        self.complete_ns = arrived + latency_ns

    def join(self) -> None:
        if self._thread:
            lib().pfr_arrive_join(self._thread)
            self._thread = 0
