"""Readiness after power-on against the drive's own promise (CAP.TO / CRTO) and a lab limit.

Per power-on the campaign measures, on the host clock from the power-on edge: `bus_s`, the
drive back on the bus (its namespace enumerated as a block device), and `ready_s`, the ready
probe answered (rig/bus/ready.py: NVMe Identify Controller, a TEST UNIT READY, or the first
successful read of a block). The drive's promise counts from CC.EN, which a host can set only
once the link is up and the controller enumerated; PCIe gives a device 1.0 s after a
conventional reset to answer configuration requests (PCIe base spec, 6.6.1), so the rig grants
that second on top of the drive's own timeout and never calls a drive slow for its
enumeration. The lab's `[criteria] ready_limit_s` is compared with the figure as measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rig.health.snapshot import HealthSnapshot

ENUMERATION_ALLOWANCE_S = 1.0


@dataclass(frozen=True)
class ReadyTimes:
    bus_s: float | None  # power-on edge -> back on the bus
    ready_s: float | None  # power-on edge -> the ready probe answered (None: no probe)

    @property
    def last(self) -> tuple[str, float] | None:
        """The later of the two that was measured: what the drive made the host wait for."""
        if self.ready_s is not None:
            return "ready", self.ready_s
        return None if self.bus_s is None else ("bus", self.bus_s)


def ready_times(power_on_ns: int | None, back_ns: int | None, ready_ns: int | None) -> ReadyTimes:
    def since(ns: int | None) -> float | None:
        if power_on_ns is None or ns is None or ns < power_on_ns:
            return None
        return round((ns - power_on_ns) / 1e9, 6)

    return ReadyTimes(since(back_ns), since(ready_ns))


def slow_ready(
    times: ReadyTimes, promise: HealthSnapshot | None, limit_s: float | None
) -> dict[str, Any] | None:
    """The detail of a `slow_ready` finding, or None when the drive kept its promise (and the
    lab's limit). `promise`: the drive's latest snapshot (its ready_timeout_ms), if any."""
    last = times.last
    if last is None:
        return None
    phase, seconds = last
    timeout_ms = promise.ready_timeout_ms if promise is not None else None
    exceeded: list[str] = []
    if timeout_ms is not None and seconds > timeout_ms / 1000 + ENUMERATION_ALLOWANCE_S:
        exceeded.append("drive")
    if limit_s is not None and seconds > limit_s:
        exceeded.append("lab")
    if not exceeded:
        return None
    return {
        "phase": phase,
        "seconds": seconds,
        "bus_s": times.bus_s,
        "ready_s": times.ready_s,
        "drive_timeout_s": None if timeout_ms is None else timeout_ms / 1000,
        "drive_timeout_source": None if promise is None else promise.ready_timeout_source,
        "allowance_s": ENUMERATION_ALLOWANCE_S,
        "lab_limit_s": limit_s,
        "exceeded": exceeded,
    }
