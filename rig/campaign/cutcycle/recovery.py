"""Cuts during recovery: the burst phase of a cycle with [cut.recovery] (rig/power/recovery.py).

After the restore phase's power-on, each cut of the burst falls its drawn on-time after the
power-on before it, timed by the switch; meanwhile the rig watches the drive return on the bus
and asks whether it is ready, so each power-on records where its cut fell: `booting` (not back
on the bus), `not_ready` (back, not answering I/O) or `ready`. Nothing is written during the
burst and the target stays closed (closed at the cut, opened again only once the identify
phase has proved the drive); only the station's readiness probe asks the drive, as after any
return. Then the cycle goes on as any other: its last power-on is observed, the drive
identified, and the whole region read back against what was durable at the cycle's first cut
(a recovery may damage any block, not only the ones at risk).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rig.bus.ready import NotReady
from rig.campaign.model import Cycle, CycleRecord, PowerOn
from rig.errors import RigError

if TYPE_CHECKING:
    from rig.campaign.model import CycleDrive

CUT_WAIT_S = 10.0  # beyond its delay, how long a recovery cut's edge may take to be reported


def recovery(drive: CycleDrive, c: Cycle) -> None:
    """The burst of recovery cuts, if the campaign asks for one."""
    spec = drive.campaign.cut.recovery
    if spec is None:
        return
    assert c.watch is not None
    c.full_scan = True
    power, channel = drive.station.power, drive.spec.channel
    on_ns = last_power_on_ns(c)
    for n in range(spec.burst):
        on_s = spec.draw_s(drive.rng)
        wait_s = max(0.0, on_s - (time.monotonic_ns() - on_ns) / 1e9)
        pending = power.cut(channel, wait_s)
        back_ns, ready_ns = _watch_on_time(drive, c, time.monotonic() + wait_s)
        c.restored = False  # from here the teardown guarantee puts power back (cycle.py)
        edge = pending.wait(wait_s + CUT_WAIT_S)
        state = _state(edge.host_ns, back_ns, ready_ns)
        detail: dict[str, Any] = {"error_ns": edge.error_ns, "recovery": n + 1}
        detail.update(after_power_on_ms=round((edge.host_ns - on_ns) / 1e6, 3), state=state)
        c.events.append((edge.host_ns, "power_off", detail))
        c.power_ons.append(PowerOn(n, on_ns, back_ns, ready_ns, edge.host_ns, state))
        if back_ns is not None and c.watch.wait_gone(drive.campaign.cut.gone_timeout_s) is None:
            raise RigError("drive did not leave the bus after a recovery cut")
        _tell_tracker(drive, back_ns is not None)
        time.sleep(drive.campaign.cut.off_ms / 1000)
        on = power.on(channel)
        c.restored, on_ns = True, on.host_ns
        c.events.append((on_ns, "power_on", {"error_ns": on.error_ns, "recovery": n + 1}))


def evidence(drive: CycleDrive, c: Cycle) -> None:
    """After the check of a burst: each failure names the burst it follows (how many cuts
    during recovery, and where each fell), so a report shows why old data changed."""
    if not c.power_ons:
        return
    burst = {"recovery_cuts": len(c.power_ons), "states": [p.state_at_cut for p in c.power_ons]}
    for finding in c.findings:
        if finding.failure:
            finding.detail.update(burst)


def _watch_on_time(drive: CycleDrive, c: Cycle, deadline: float) -> tuple[int | None, int | None]:
    """Until the recovery cut's instant: when the drive was back on the bus, and ready."""
    assert c.watch is not None
    node = c.watch.wait_back(max(0.0, deadline - time.monotonic()))
    if node is None:
        return None, None
    back_ns = time.monotonic_ns()
    ready = drive.station.ready
    left = deadline - time.monotonic()
    if ready is None or left <= 0:
        return back_ns, None
    try:
        ready_ns = ready(node, left)
    except NotReady:
        return back_ns, None
    return back_ns, ready_ns if ready_ns <= time.monotonic_ns() else None


def _state(cut_ns: int, back_ns: int | None, ready_ns: int | None) -> str:
    if back_ns is None or back_ns > cut_ns:
        return "booting"
    return "ready" if ready_ns is not None and ready_ns <= cut_ns else "not_ready"


def _tell_tracker(drive: CycleDrive, was_back: bool) -> None:
    """A drive counts a power loss once it runs its firmware; cut before it was back on the
    bus, whether it counted one is unknown: the next snapshot is then a new baseline."""
    if drive.tracker is None:
        return
    if was_back:
        drive.tracker.power_off_between_cycles()
    else:
        drive.tracker.uncertain = True


def last_power_on_ns(c: CycleRecord) -> int:
    ons = [ns for ns, kind, _ in c.events if kind == "power_on"]
    return ons[-1] if ons else time.monotonic_ns()


def power_on_rows(c: CycleRecord) -> list[PowerOn]:
    """Every power-on of the cycle: the burst's, then the last (observed by observe_return)."""
    ons = [ns for ns, kind, _ in c.events if kind == "power_on"]
    if not ons:
        return list(c.power_ons)
    ready = [ns for ns, kind, _ in c.events if kind == "ready" and ns >= ons[-1]]
    last = PowerOn(len(c.power_ons), ons[-1], c.back_ns, ready[-1] if ready else None)
    return [*c.power_ons, last]
