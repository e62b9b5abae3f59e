"""The `PowerSwitch` capability: what every power backend offers the campaign.

Times are on the host's monotonic clock in nanoseconds (`time.monotonic_ns()`). A backend that
timestamps edges on another clock (the relay board's MCU) maps them to the host clock and reports
the mapping's error bound with every edge, so the checker can treat completions inside that bound
conservatively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rig.native.trigger import Trigger


@dataclass(frozen=True)
class Edge:
    """One switching edge of one channel, as the switch observed it."""

    channel: int
    powered: bool  # state after the edge
    host_ns: int  # edge instant mapped to the host monotonic clock
    error_ns: int  # bound on |true instant - host_ns|
    source_us: int | None = None  # raw timestamp on the switch's own clock, if it has one


@dataclass(frozen=True)
class RailResult:
    """Rail sense around one off edge: how the drive's supply rail fell, as the switch's ADC saw
    it. Readings are ADC counts (see the board's divider in hardware/); times are µs after the
    off edge, `None` when the rail never fell that far. `end`: fell (below `lo_threshold`, or
    `hi_threshold` when `lo_threshold` is 0), timeout (the window elapsed), on (powered again
    first) or busy (another channel's capture was running: not measured)."""

    channel: int
    edge_us: int  # the off edge on the switch's clock
    host_ns: int  # the off edge on the host clock (0 if it could not be mapped)
    error_ns: int  # bound of that mapping (-1 if unmapped)
    v0: int | None  # reading just before the edge
    hi_us: int | None
    lo_us: int | None
    minimum: int | None
    end: str
    dt_us: int | None = None  # spacing of `samples`, the first taken at the edge
    samples: tuple[int, ...] = ()
    hi_threshold: int = 0
    lo_threshold: int = 0
    window_ms: int = 0


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


@runtime_checkable
class RailSensedCut(Protocol):
    """A pending cut whose switch also measures the rail's fall (the relay board's rail sense)."""

    def rail(self, timeout_s: float) -> RailResult | None:
        """The rail-sense result of this cut's off edge, waiting at most `timeout_s` beyond the
        capture window; `None` when rail sense was not configured for the channel."""
        ...


class ArmedCut(Protocol):
    """A cut armed to fall a delay after a completion the rig has yet to issue: `trigger`
    (rig/native/trigger.py) goes with the request, whose completion path fixes the edge's
    instant; `settle` afterwards returns the pending cut (at once when the trigger never fired:
    the request failed)."""

    @property
    def trigger(self) -> Trigger: ...

    def settle(self) -> PendingCut: ...


@runtime_checkable
class ArmsAfterCompletion(Protocol):
    """A switch that takes its edge's instant from a completion path's trigger (the in-process
    software relay: its drives read the trigger at every request), besides `PowerSwitch`."""

    def arm_after_completion(
        self, channel: int, delay_s: float, off_s: float | None = None
    ) -> ArmedCut | None:
        """The cut `delay_s` after the trigger's event; None when the channel cannot take one
        (the caller cuts as before)."""
        ...


class PreparedCut(Protocol):
    """A cut made ready to be sent the moment its event happens (a relay board's CUTAT with
    its SYNC done and its wire held): `fire(event_ns)` sends it for `delay` after that host
    instant, `settle` then returns the pending cut; `cancel` when the event never came (once
    fired, it does nothing)."""

    def fire(self, event_ns: int) -> None: ...

    def settle(self) -> PendingCut: ...

    def cancel(self) -> None: ...


@runtime_checkable
class PreparesCuts(Protocol):
    """A switch whose cut request can be made ready ahead of its event, besides `PowerSwitch`."""

    def prepare_cut(
        self, channel: int, delay_s: float, off_s: float | None = None
    ) -> PreparedCut | None:
        """None: this channel or delay cannot be prepared (the caller cuts as before)."""
        ...
