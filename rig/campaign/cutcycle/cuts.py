"""Cut strategies: when, relative to what the writer is doing, the power goes off.

- uniform: `delay_ms` after the first write reaches the device, uniform in [low, high] (sub-ms
  delays included: the switch times the cut, the host never sleeps for it);
- during_flush: after a write phase of `delay_ms`, the cut is sent the moment a flush is in
  flight;
- after_ack: after a write phase of `delay_ms`, at the next acknowledgement the writers stop
  issuing and the cut falls `after_ms` (uniform in [low, high], up to an hour) after that
  acknowledgement: how long does a drive keep acknowledged data at risk?
- idle: after a write phase of `delay_ms`, the writers stop, everything in flight completes, and
  the cut falls `after_ms` later on an idle drive.
- window: after a write phase of `delay_ms`, at the next acknowledgement or the next completed
  flush ([cut.window].after) the writers stop issuing and the cut falls the delay the model's
  sequential design chose (rig/window/) after it (after the flush: once the writers are quiet,
  so no flush falls between it and the edge): where is the drive's window of vulnerability?

Whether a cut hit its aim is measured afterwards from the ledger and the edge (`context`), since
the switch has latency of its own: every cycle records it.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rig.check.ledger import NOT_DONE, CycleLog
from rig.io.workload import Writer
from rig.power.base import PendingCut

POLL_S = 0.0001  # how often a trigger looks at the writer's live signals


class Cutter(Protocol):
    """What a strategy cuts with: the station's switch, or its cut kind's shape on it
    (rig/power/shapes.py `ShapedCuts`)."""

    def cut(self, channel: int, delay_s: float) -> PendingCut: ...


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
    delay = 0.0 if strategy == "during_flush" else rng.uniform(*after_ms) / 1000
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
) -> tuple[PendingCut, dict[str, Any]]:
    """Wait for the strategy's trigger (the writer runs meanwhile), then schedule the cut.
    `after`: the window strategy's event (ack | flush)."""
    detail: dict[str, Any] = {"strategy": strategy, "planned_delay_ns": int(cut.delay_s * 1e9)}
    if strategy == "uniform":
        # timed from the first write the device got, not from the writer's start: a writer
        # slow to start (a loaded host) would otherwise be cut before it wrote anything
        _poll(lambda: writer.live.writes_issued > 0 or stop.is_set(), trigger_timeout_s)
        why = "first_write" if writer.live.writes_issued else "stopped" if stop.is_set() else ""
        detail.update(trigger=why or "timeout", trigger_ns=time.monotonic_ns())
        return power.cut(channel, cut.delay_s), detail
    if stop.wait(cut.warmup_s):
        return power.cut(channel, 0.0), {**detail, "trigger": "stopped"}
    live = writer.live
    if strategy == "during_flush":
        seen = _poll(lambda: live.flushes_in_flight > 0, trigger_timeout_s)
        detail["trigger"] = "flush_in_flight" if seen else "timeout"
        return power.cut(channel, 0.0), detail
    if strategy == "window" and after == "flush":
        done = live.flushes_done
        seen = _poll(lambda: live.flushes_done > done, trigger_timeout_s)
        stop.set()  # nothing new is issued after the flush the cut is timed from
        # and the writers are quiet before the cut is timed: a worker past its stop check can
        # still issue a flush, which the drive completes before the edge and a loaded host
        # stamps after it: the cut would be timed from an earlier flush than the drive's
        # (decision 460)
        quiet = writer.join(trigger_timeout_s)
        flush_ns = time.monotonic_ns()  # seen within POLL_S; the ledger has the exact time
        trigger = "flush" if seen and quiet else "timeout"
        detail.update(trigger=trigger, trigger_ns=flush_ns)
        return power.cut(channel, cut.delay_s), detail
    if strategy in ("after_ack", "window"):
        before = live.acks
        seen = _poll(lambda: live.acks > before, trigger_timeout_s)
        stop.set()  # nothing new is issued after the acknowledgement the cut is timed from
        ack_ns = live.last_ack_ns if seen else time.monotonic_ns()
        late_s = (time.monotonic_ns() - ack_ns) / 1e9
        detail.update(trigger="ack" if seen else "timeout", trigger_ns=ack_ns)
        return power.cut(channel, max(0.0, cut.delay_s - late_s)), detail
    if strategy == "idle":
        stop.set()
        quiet = writer.join(trigger_timeout_s)
        detail.update(trigger="idle" if quiet else "timeout", trigger_ns=time.monotonic_ns())
        return power.cut(channel, cut.delay_s), detail
    raise ValueError(f"unknown cut strategy {strategy!r}")


def _poll(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def context(log: CycleLog, edge_ns: int) -> dict[str, Any]:
    """Where the edge really fell: flushes and writes in flight at it, time since the last
    acknowledgement and since the last completed flush (None when there was none)."""
    f_issue, f_done = log.column("flush_issue_ns"), log.column("flush_complete_ns")
    w_issue, w_done = log.column("issue_ns"), log.column("complete_ns")
    f_open = (f_issue <= edge_ns) & ((f_done == NOT_DONE) | (f_done > edge_ns))
    w_open = (w_issue <= edge_ns) & ((w_done == NOT_DONE) | (w_done > edge_ns))
    acked = w_done[(w_done != NOT_DONE) & (w_done <= edge_ns)]
    flushed = f_done[(f_done != NOT_DONE) & (f_done <= edge_ns)]
    return {
        "flushes_in_flight": int(f_open.sum()),
        "writes_in_flight": int(w_open.sum()),
        "since_last_ack_ns": int(edge_ns - acked.max()) if len(acked) else None,
        "since_last_flush_ns": int(edge_ns - flushed.max()) if len(flushed) else None,
        "writes_issued_before": int((w_issue <= edge_ns).sum()),
        "writes_issued_after": int((w_issue > edge_ns).sum()),
        "flushes_total": int(np.count_nonzero(f_issue <= edge_ns)),
    }
