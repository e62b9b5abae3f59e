"""The `PowerSwitch` capability: what every power backend offers the campaign.

Times are on the host's monotonic clock in nanoseconds (`time.monotonic_ns()`). A backend that
timestamps edges on another clock (the relay board's MCU) maps them to the host clock and reports
the mapping's error bound with every edge, so the checker can treat completions inside that bound
conservatively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Edge:
    """One switching edge of one channel, as the switch observed it."""

    channel: int
    powered: bool  # state after the edge
    host_ns: int  # edge instant mapped to the host monotonic clock
    error_ns: int  # bound on |true instant - host_ns|
    source_us: int | None = None  # raw timestamp on the switch's own clock, if it has one


class PendingCut(Protocol):
    """A cut scheduled on the switch; the edge arrives later."""

    def wait(self, timeout_s: float) -> Edge:
        """Block until the off edge happened; raise `PowerTimeoutError` after `timeout_s`."""
        ...


class PowerSwitch(Protocol):
    """Switches the power rail of numbered channels (one drive per channel)."""

    @property
    def channels(self) -> int: ...

    def on(self, channel: int) -> Edge:
        """Power the channel now; return the on edge."""
        ...

    def off(self, channel: int) -> Edge:
        """Remove power now; return the off edge."""
        ...

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> PendingCut:
        """Schedule an off edge `delay_s` from now, timed by the switch itself (the host never
        sleeps to time a cut). With `off_s`, the switch restores power by itself after that long;
        without it the channel stays off until `on()`."""
        ...

    def state(self, channel: int) -> bool:
        """True when the channel is powered."""
        ...

    def safe(self) -> None:
        """Put every channel in its declared safe state (used on every exit path)."""
        ...

    def close(self) -> None: ...
