"""Cut strategies: when, relative to what the writer is doing, the power goes off.

- uniform: `delay_ms` after the first write reaches the device, uniform in [low, high] (sub-ms
  delays included: the switch times the cut, the host never sleeps for it);
- during_flush: after a write phase of `delay_ms`, the cut is sent the moment a flush is in
  flight;
- after_ack: after a write phase of `delay_ms`, the writers stop, everything in flight
  completes, the rig writes one more block range itself and the cut falls `after_ms` (uniform in
  [low, high], up to an hour) after its acknowledgement: how long does a drive keep
  acknowledged data at risk?
- during_discard: after a write phase of `delay_ms`, the cut is sent the moment a discard is in
  flight (a workload with `discard_share`);
- idle: after a write phase of `delay_ms`, the writers stop, everything in flight completes, and
  the cut falls `after_ms` later on an idle drive.
- window: after a write phase of `delay_ms`, the writers stop, the rig issues one write or one
  flush itself ([cut.window].after: ack | flush), and the cut falls the delay the model's
  sequential design chose (rig/window/) after its completion, with no other write or flush
  between it and the edge: where is the drive's window of vulnerability?

Whether a cut hit its aim is measured afterwards from the ledger and the edge (`context`), since
the switch has latency of its own: every cycle records it.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rig.config.campaign import CutSpec
from rig.io.ledger import NOT_DONE, CycleLog
from rig.io.workload import Writer
from rig.native.trigger import Trigger
from rig.power.base import ArmedCut, Edge, PendingCut, PreparedCut
from rig.power.realtime import realtime

POLL_S = 0.0001  # how often a trigger looks at the writer's live signals


class Cutter(Protocol):
    """What a strategy cuts with: the station's switch, or its cut kind's shape on it
    (rig/power/shapes.py `ShapedCuts`)."""

    def cut(self, channel: int, delay_s: float) -> PendingCut: ...


@runtime_checkable
class ArmingCutter(Cutter, Protocol):
    """A cutter that can arm a cut on a completion the rig's request will fire."""

    def arm_after_completion(self, channel: int, delay_s: float) -> ArmedCut | None: ...


@runtime_checkable
class PreparingCutter(Cutter, Protocol):
    """A cutter that can make a cut ready ahead of its event (rig/power/base.py
    `PreparesCuts`: a relay board's CUTAT, its SYNC done before the event)."""

    def prepare_cut(self, channel: int, delay_s: float) -> PreparedCut | None: ...


def prepare(power: Cutter, channel: int, delay_s: float) -> PreparedCut | None:
    return power.prepare_cut(channel, delay_s) if isinstance(power, PreparingCutter) else None


@dataclass(frozen=True)
class CutDraw:
    """One cycle's draw: the write phase before the trigger, and the delay the switch times."""

    warmup_s: float
    delay_s: float


def draw(
    strategy: str,
    delay_ms: tuple[float, float],
    after_ms: tuple[float, float],
    rng: random.Random,
    planned_ms: float | None = None,
) -> CutDraw:
    """`planned_ms`: the window strategy's delay, chosen by its design (rig/window/planner.py)."""
    if strategy == "window":
        return CutDraw(rng.uniform(*delay_ms) / 1000, (planned_ms or 0.0) / 1000)
    if strategy == "uniform":
        return CutDraw(0.0, rng.uniform(*delay_ms) / 1000)
    warmup = rng.uniform(*delay_ms) / 1000
    in_flight = strategy in ("during_flush", "during_discard")
    delay = 0.0 if in_flight else rng.uniform(*after_ms) / 1000
    return CutDraw(warmup, delay)


def schedule(
    strategy: str,
    cut: CutDraw,
    writer: Writer,
    stop: threading.Event,
    power: Cutter,
    channel: int,
    trigger_timeout_s: float = 5.0,
    after: str = "ack",
    quiet_s: float = 0.0,
) -> tuple[PendingCut, dict[str, Any]]:
    """Wait for the strategy's trigger (the writer runs meanwhile), then schedule the cut.
    `after`: the window strategy's event (ack | flush); `quiet_s`: after a flush, the time
    since the writers' last flush before the rig's own write (rig/window/spec.py `quiet_s`).

    The edge is planned at the trigger's own instant (`trigger_ns`, as the ledger stamped it)
    plus the delay, not at the instant this thread saw the trigger: the switch is asked for
    what is left of the delay, so the time the trigger took to be seen is not added to it
    (only what is left of it when the delay is shorter than that). The wait for the trigger
    and the request to the switch run at real-time priority where allowed (realtime.py)."""
    detail: dict[str, Any] = {"strategy": strategy, "planned_delay_ns": int(cut.delay_s * 1e9)}
    if strategy != "uniform" and stop.wait(cut.warmup_s):
        return power.cut(channel, 0.0), {**detail, "trigger": "stopped"}
    with realtime() as fifo:
        detail["realtime"] = fifo
        return _trigger_and_cut(
            strategy, cut, writer, stop, power, channel, trigger_timeout_s, (after, quiet_s), detail
        )


def _trigger_and_cut(
    strategy: str,
    cut: CutDraw,
    writer: Writer,
    stop: threading.Event,
    power: Cutter,
    channel: int,
    timeout_s: float,
    window: tuple[str, float],
    detail: dict[str, Any],
) -> tuple[PendingCut, dict[str, Any]]:
    """`window`: the window strategy's event and quiet time (`schedule`'s after, quiet_s)."""
    live = writer.live
    after, quiet_s = window
    if strategy == "uniform":
        hook = live.on_first_issue
        if isinstance(hook, EventCut) and writer.engine == "threads":
            return hook.result(stop, timeout_s, power, channel, detail)
        if isinstance(hook, EventCut):
            hook.cancel()
        # timed from the first write the device got, not from the writer's start: a writer
        # slow to start (a loaded host) would otherwise be cut before it wrote anything
        _poll(lambda: live.writes_issued > 0 or stop.is_set(), timeout_s)
        why = "first_write" if live.writes_issued else "stopped" if stop.is_set() else ""
        return _cut_from(power, channel, cut, live.first_issue_ns, why or "timeout", detail)
    if strategy == "during_flush":
        seen = _poll(lambda: live.flushes_in_flight > 0, timeout_s)
        detail.update(
            trigger="flush_in_flight" if seen else "timeout", trigger_ns=time.monotonic_ns()
        )
        return power.cut(channel, 0.0), detail
    if strategy == "during_discard":
        seen = _poll(lambda: live.discards_in_flight > 0, timeout_s)
        detail.update(
            trigger="discard_in_flight" if seen else "timeout", trigger_ns=time.monotonic_ns()
        )
        return power.cut(channel, 0.0), detail
    if strategy in ("after_ack", "window"):
        event = "flush" if strategy == "window" and after == "flush" else "ack"
        waits = (timeout_s, quiet_s)
        return _after_event(event, cut, writer, stop, power, channel, waits, detail)
    if strategy == "idle":
        stop.set()
        quiet = writer.join(timeout_s)
        return _cut_from(power, channel, cut, 0, "idle" if quiet else "timeout", detail)
    raise ValueError(f"unknown cut strategy {strategy!r}")


def _after_event(
    event: str,
    cut: CutDraw,
    writer: Writer,
    stop: threading.Event,
    power: Cutter,
    channel: int,
    waits: tuple[float, float],
    detail: dict[str, Any],
) -> tuple[PendingCut, dict[str, Any]]:
    """`waits`: the writers' join timeout, and the quiet time after their last flush."""
    timeout_s, quiet_s = waits
    # The rig issues the write or flush the cut is timed from itself, from this thread,
    # once the writers are quiet: no other acknowledgement or flush of theirs can fall
    # between it and the edge (one the drive completes before the edge and a loaded host
    # stamps after it would re-arm the drive's timer unseen), the time the writers take to
    # stop is not part of the delay, and no writer thread has to be scheduled (nor take
    # the GIL) before the switch is told: docs/decisions.md, "A cut after an event is
    # timed from the rig's own event".
    stop.set()
    quiet = writer.join(timeout_s)
    if not quiet:
        return _cut_from(power, channel, cut, 0, "timeout", detail)
    if event == "flush" and quiet_s > 0:  # no earlier flush's destage timer left running
        _quiet_after_last_flush(writer.context.log, quiet_s)  # (rig/window/spec.py `quiet_s`)
    armed = None
    if isinstance(power, ArmingCutter):
        armed = power.arm_after_completion(channel, cut.delay_s)
    prepared = prepare(power, channel, cut.delay_s) if armed is None else None
    once = writer.flush_once if event == "flush" else writer.write_once
    # A flush the cut is timed from covers one fresh write of the rig's own: data the writers
    # left may have been destaged while they stopped, and a cut after a flush with nothing at
    # risk shows nothing of the window however short its delay
    if event == "flush" and writer.write_once() == NOT_DONE:
        once = _not_done
    if prepared is not None:
        sent = _prepared_after(prepared, once, event, detail)
        return sent or _cut_from(power, channel, cut, 0, "timeout", detail)
    if armed is None:
        done_ns = once()
        why = event if done_ns != NOT_DONE else "timeout"
        return _cut_from(power, channel, cut, 0 if why == "timeout" else done_ns, why, detail)
    # the instant is fixed by the completion path (rig/native/trigger.c), not by this
    # thread once it holds the interpreter again: docs/decisions.md, "A cut after an
    # event is armed in the completion path"
    done_ns = once(armed.trigger)
    pending = armed.settle()
    if done_ns == NOT_DONE:
        detail.update(trigger="timeout", trigger_ns=time.monotonic_ns())
    else:
        detail.update(trigger=event, trigger_ns=done_ns, armed_in="completion")
    return pending, detail


def _quiet_after_last_flush(log: CycleLog, quiet_s: float) -> None:
    """Sleep until `quiet_s` after the last flush the log saw complete (at once if none did,
    or that is past): this thread sleeps, it never spins at real-time priority."""
    done = log.column("flush_complete_ns")
    done = done[done != NOT_DONE]
    if len(done):
        left_s = (int(done.max()) + round(quiet_s * 1e9) - time.monotonic_ns()) / 1e9
        if left_s > 0:
            time.sleep(left_s)


def _not_done(trigger: Trigger | None = None) -> int:
    """The event a cut was to be timed from, when the requests before it failed: never done
    (`trigger` never fired)."""
    return NOT_DONE


def _prepared_after(
    prepared: PreparedCut, once: Any, event: str, detail: dict[str, Any]
) -> tuple[PendingCut, dict[str, Any]] | None:
    """The rig's own write or flush, then the prepared cut sent the moment it returned: the
    instant is its completion's plus the delay, and only one line is left to write. None:
    the request never completed (nothing was sent)."""
    try:
        done_ns = once()
        if done_ns == NOT_DONE:
            return None
        prepared.fire(done_ns)
    finally:
        prepared.cancel()  # (nothing once fired)
    detail.update(trigger=event, trigger_ns=done_ns, armed_in="prepared")
    return prepared.settle(), detail


class EventCut:
    """A uniform cut sent by the writer thread that issues the first write, the moment it has
    stamped it (rig/io/writer_context.py `Live.on_first_issue`; the threads engine): no other
    thread has to be scheduled, nor take the GIL, before the switch is told. Installed before
    the writer starts (`arm`), with the cut `prepared` where the switch makes one ready
    (a relay board: its SYNC done then, so the writer thread only writes the CUTAT line)."""

    def __init__(
        self, power: Cutter, channel: int, cut: CutDraw, prepared: PreparedCut | None = None
    ) -> None:
        self._power, self._channel, self._cut = power, channel, cut
        self._prepared = prepared
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._closed = False
        self._sent: tuple[PendingCut, dict[str, Any]] | None = None
        self._error: BaseException | None = None

    def __call__(self, issue_ns: int) -> None:
        with self._lock:
            if self._closed or self._sent is not None:
                return
            try:
                # the writer thread sends it at the cut thread's priority: a relay board's
                # SYNC and CUTAT must not wait behind the host's load
                with realtime():
                    if self._prepared is not None:  # its reply at once: the wire is free
                        self._prepared.fire(issue_ns)  # again for the board's other channels
                        detail = {"trigger_ns": issue_ns, "armed_in": "prepared"}
                        self._sent = self._prepared.settle(), detail
                    else:
                        self._sent = _cut_from(
                            self._power, self._channel, self._cut, issue_ns, "", {}
                        )
            except BaseException as error:  # raised again in the cycle's thread
                self._error = error
            self._done.set()

    def result(
        self,
        stop: threading.Event,
        timeout_s: float,
        power: Cutter,
        channel: int,
        detail: dict[str, Any],
    ) -> tuple[PendingCut, dict[str, Any]]:
        _poll(lambda: self._done.is_set() or stop.is_set(), timeout_s)
        with self._lock:
            self._closed = True  # a first write later than this sends nothing
            self.cancel()
            if self._error is not None:
                raise self._error
            if self._sent is None:
                why = "stopped" if stop.is_set() else "timeout"
                return _cut_from(power, channel, self._cut, 0, why, detail)
            pending, sent = self._sent
        detail.update(sent, trigger="first_write")
        return pending, detail

    def cancel(self) -> None:
        """A prepared cut never fired is given up (its board's wire freed)."""
        if self._prepared is not None:
            self._prepared.cancel()


def arm(strategy: str, cut: CutDraw, writer: Writer, power: Cutter, channel: int) -> None:
    """Before the writer starts: a uniform cut is sent by its first write (`EventCut`), made
    ready now where the switch can (the threads engine's writers call the hook)."""
    if strategy == "uniform":
        threads = writer.engine_to_run() == "threads"
        prepared = prepare(power, channel, cut.delay_s) if threads else None
        writer.live.on_first_issue = EventCut(power, channel, cut, prepared)


def _cut_from(
    power: Cutter,
    channel: int,
    cut: CutDraw,
    trigger_ns: int,
    why: str,
    detail: dict[str, Any],
) -> tuple[PendingCut, dict[str, Any]]:
    """The cut `cut.delay_s` after `trigger_ns` (0: now): the switch gets what is left."""
    now = time.monotonic_ns()
    trigger_ns = trigger_ns or now
    left_s = max(0.0, cut.delay_s - (now - trigger_ns) / 1e9)
    detail.update(trigger=why, trigger_ns=trigger_ns)
    return power.cut(channel, left_s), detail


def _poll(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


@dataclass(frozen=True)
class Fidelity:
    """Where a cut fell against its plan (stored per cycle: docs/schema.md)."""

    realized_ns: int | None  # the edge minus the event it was timed from (None: no edge)
    timed_from: str  # that event: the trigger of `schedule` ("" when none was scheduled)
    error_ns: int | None  # bound of the realized delay: the switch's clock mapping
    in_range: int | None  # 1 / 0: inside / outside the requested range; None: no range


def requested_range_ms(strategy: str, spec: CutSpec) -> tuple[float, float] | None:
    """The delays the campaign asked for, from the strategy's event (None: during_flush, cut
    the moment a flush is in flight, has no delay to keep)."""
    if strategy == "uniform":
        return spec.delay_ms
    if strategy == "window":
        return (spec.window.min_ms, spec.window.max_ms) if spec.window else None
    if strategy in ("after_ack", "idle"):
        return spec.after_ms
    return None


def fidelity(spec: CutSpec, scheduled: dict[str, Any] | None, edge: Edge | None) -> Fidelity:
    """`scheduled`: the detail `schedule` returned (event `cut_scheduled`)."""
    scheduled = scheduled or {}
    trigger_ns, why = scheduled.get("trigger_ns"), str(scheduled.get("trigger", ""))
    if edge is None or not trigger_ns or why in ("timeout", "stopped"):
        return Fidelity(None, why, None, None)
    realized, bound = edge.host_ns - int(trigger_ns), edge.error_ns
    wanted = requested_range_ms(spec.strategy, spec)
    inside = None
    if wanted is not None:  # outside only beyond the clock mapping's bound
        low, high = wanted[0] * 1e6, wanted[1] * 1e6
        inside = int(realized + bound >= low and realized - bound <= high)
    return Fidelity(realized, why, bound, inside)


def context(log: CycleLog, edge_ns: int) -> dict[str, Any]:
    """Where the edge really fell: flushes and writes in flight at it, time since the last
    acknowledgement and since the last completed flush (None when there was none)."""
    f_issue, f_done = log.column("flush_issue_ns"), log.column("flush_complete_ns")
    w_issue, w_done = log.column("issue_ns"), log.column("complete_ns")
    f_open = (f_issue <= edge_ns) & ((f_done == NOT_DONE) | (f_done > edge_ns))
    w_open = (w_issue <= edge_ns) & ((w_done == NOT_DONE) | (w_done > edge_ns))
    discards = log.column("discard") == 1
    acked = w_done[(w_done != NOT_DONE) & (w_done <= edge_ns)]
    flushed = f_done[(f_done != NOT_DONE) & (f_done <= edge_ns)]
    return {
        "flushes_in_flight": int(f_open.sum()),
        "writes_in_flight": int((w_open & ~discards).sum()),
        "discards_in_flight": int((w_open & discards).sum()),
        "since_last_ack_ns": int(edge_ns - acked.max()) if len(acked) else None,
        "since_last_flush_ns": int(edge_ns - flushed.max()) if len(flushed) else None,
        "writes_issued_before": int((w_issue <= edge_ns).sum()),
        "writes_issued_after": int((w_issue > edge_ns).sum()),
        "flushes_total": int(np.count_nonzero(f_issue <= edge_ns)),
    }
