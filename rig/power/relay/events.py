"""Delivery of the board's events (on the maintenance thread): each `EDGE` is mapped to the host
clock, recorded for its waiters and handed to `on_edge`; `RAIL`/`RAILS` become a `RailResult`
for `on_rail`. Sinks are plain callables; their exceptions are logged and counted, never raised
into the driver."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from rig.errors import PowerError
from rig.power.base import Edge, RailResult
from rig.power.clocksync import ClockError, ClockMap, Mapping
from rig.power.relay.model import BoardEdge, DriverStats, ResetInfo
from rig.power.relay.rail import RailAssembler, RailPartial, rail_result
from rig.power.relay.state import BoardState
from rig.power.relay.wire import Line

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Sinks:
    """The driver's owner's callables: every edge, rail capture and reset it reports."""

    stats: DriverStats  # counts the sinks' exceptions
    on_edge: Callable[[Edge], None] | None
    on_rail: Callable[[RailResult], None] | None
    on_reset: Callable[[ResetInfo], None] | None

    def edge(self, edge: BoardEdge) -> None:
        self._call(self.on_edge, edge, "on_edge")

    def rail(self, result: RailResult) -> None:
        self._call(self.on_rail, result, "on_rail")

    def reset(self, info: ResetInfo) -> None:
        self._call(self.on_reset, info, "on_reset")

    def _call(self, sink: Callable[[T], None] | None, value: T, name: str) -> None:
        if sink is None:
            return
        try:
            sink(value)
        except Exception:
            self.stats.sink_errors += 1
            log.exception("relay board: %s sink failed", name)


class EventDelivery:
    """Turns event lines into edges and rail results. `sync` takes a fresh sync sample (a SYNC
    request): an edge with no sample after it is then interpolated, not extrapolated."""

    def __init__(
        self,
        state: BoardState,
        sinks: Sinks,
        sync: Callable[[], object],
        edge_latency_ns: int,
    ) -> None:
        self._state = state
        self._sinks = sinks
        self._sync = sync
        self._edge_latency_ns = edge_latency_ns
        self._rails = RailAssembler()

    def deliver(self, epoch: int, clock: ClockMap, line: Line) -> None:
        for ch, held in self._rails.interrupted_by(line):
            self._finish_rail(ch, held, None)
        if line.word == "EDGE":
            self._edge(epoch, clock, line)
        elif line.word == "WDOG":
            log.warning(
                "relay board watchdog tripped: host silent %s ms", line.fields.get("silent_ms")
            )
        elif line.word in ("RAIL", "RAILS"):
            self._rail(epoch, clock, line)
        else:
            log.info("relay board: unknown event %s", line)

    def _map_event(self, epoch: int, clock: ClockMap, t: int, rx_ns: int) -> Mapping:
        """Map an event's MCU time; first get a sync sample after it when there is none, so the
        edge is interpolated between two samples instead of extrapolated."""
        if self._state.needs_sample_after(epoch, clock, t):
            with contextlib.suppress(PowerError):
                self._sync()
        mapping = self._state.map_with(clock, t, not_after_ns=rx_ns)
        if self._edge_latency_ns:
            mapping = Mapping(mapping.lo_ns - self._edge_latency_ns, mapping.hi_ns, mapping.method)
        return mapping

    def _edge(self, epoch: int, clock: ClockMap, line: Line) -> None:
        ch, on, t = line.num("ch"), bool(line.num("on")), line.num("t")
        try:
            mapping = self._map_event(epoch, clock, t, line.rx_ns)
        except ClockError as e:
            # Timestamps that contradict causality: the edge instant is unknown. Fail the
            # channel's waiters (a rig fault, never a drive failure) rather than guess.
            log.error("relay board: cannot map edge %s: %s", line, e)
            self._state.stats.unmapped_edges += 1
            self._state.record_unmapped(epoch, ch, t, str(e))
            return
        why = line.fields.get("why", "?")
        edge = BoardEdge(ch, on, mapping.host_ns, mapping.error_ns, t, why, epoch)
        self._state.record_edge(epoch, edge)
        if edge.why == "wdog":
            log.warning("relay board watchdog put channel %d %s", ch, "on" if on else "off")
        self._sinks.edge(edge)

    def _rail(self, epoch: int, clock: ClockMap, line: Line) -> None:
        ch = line.num("ch")
        if not self._state.has_channel(ch):
            return
        if line.word == "RAIL":
            try:
                mapping: Mapping | None = self._map_event(epoch, clock, line.num("t"), line.rx_ns)
            except ClockError:
                mapping = None
            partial = RailPartial(line, mapping, epoch)
            config = self._state.rail_config(ch)
            nsamp = config[3] if config else 0
            if line.fields.get("end") != "busy" and nsamp > 0:
                self._rails.hold(ch, partial)
                return
            self._finish_rail(ch, partial, None)
        else:
            held = self._rails.take(ch, epoch)
            if held is not None:
                self._finish_rail(ch, held, line)

    def _finish_rail(self, ch: int, partial: RailPartial, samples: Line | None) -> None:
        result = rail_result(ch, partial, samples, self._state.rail_config(ch))
        self._state.record_rail(partial.epoch, result)
        self._sinks.rail(result)
