"""What the driver knows about the board, shared by its threads behind one lock.

`BoardState` is the only holder of that lock (a condition): every method takes it for a short
time and never does I/O, calls a sink or takes another lock while holding it, so it is the
innermost lock of the driver (order: resync, then the wire, then this). Waiters (a cut's edge,
a rail capture, an edge after SET) wait on its condition, woken by every change.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable

from rig.errors import PowerError, PowerTimeoutError
from rig.power.base import RailResult
from rig.power.clocksync import ClockError, ClockGlitch, ClockMap, Mapping, SyncSample
from rig.power.relay.model import (
    WHY_BOOT,
    BoardEdge,
    BoardIdentity,
    BoardResetError,
    BootEvent,
    Channel,
    ChannelStates,
    CutTicket,
    DriverStats,
    EdgeRecord,
    RailConfig,
    ResyncTicket,
)
from rig.power.relay.wire import Line

log = logging.getLogger(__name__)


class BoardState:
    def __init__(self, stats: DriverStats, rate_tolerance: float, nonlinear_ppm: float) -> None:
        self.stats = stats
        self._rate_tolerance = rate_tolerance
        self._nonlinear_ppm = nonlinear_ppm
        self._cond = threading.Condition(threading.Lock())
        self._epoch = 0
        self._clock = self._new_clock(1_000_000)
        self._identity: BoardIdentity | None = None
        self._chans: list[Channel] = []
        self._resync_needed = False
        self._reset_reason = ""
        self._boot_line: Line | None = None
        self._last_old_sample: SyncSample | None = None
        self._ev_next: int | None = None
        self._broken: PowerError | None = None
        self._closed = False
        self.last_boot: BootEvent | None = None  # the latest BOOT line seen
        # Work for the maintenance thread: a reset to resynchronise after, events to deliver.
        self.wake = threading.Event()

    def _new_clock(self, clock_hz: int) -> ClockMap:
        tick_ns = max(1000, math.ceil(1e9 / clock_hz)) if clock_hz > 0 else 1000
        return ClockMap(
            ns_per_us=1000.0,
            rate_tolerance=self._rate_tolerance,
            nonlinear_ppm=self._nonlinear_ppm,
            tick_ns=tick_ns,
        )

    # ---- identity, usability ----

    @property
    def identity(self) -> BoardIdentity:
        identity = self._identity
        if identity is None:
            raise PowerError("relay board not identified yet")
        return identity

    def start(self, identity: BoardIdentity) -> None:
        """The handshake identified the board: a fresh channel table and clock."""
        with self._cond:
            self._identity = identity
            self._chans = [Channel() for _ in range(identity.channels)]
            self._clock = self._new_clock(identity.clock_hz)
            self._resync_needed = False

    def set_identity(self, identity: BoardIdentity) -> None:
        with self._cond:
            self._identity = identity

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def broken(self) -> PowerError | None:
        return self._broken

    @property
    def closed(self) -> bool:
        return self._closed

    def check_usable(self) -> None:
        if self._closed:
            raise PowerError("relay board driver is closed")
        if self._broken is not None:
            raise self._broken

    def fail(self, error: PowerError) -> None:
        """The port is lost: every call and every waiter raises `error` from now on."""
        with self._cond:
            if self._broken is None:
                self._broken = error
                log.error("relay board: %s", error)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ---- resets ----

    def _declare_reset(self, reason: str, boot: Line | None) -> None:
        """Lock held. A new MCU clock epoch begins; waiters fail; resync follows."""
        self._epoch += 1
        if boot is not None:
            self.last_boot = BootEvent.from_line(boot)
        self._last_old_sample = self._clock.latest
        clock_hz = self._identity.clock_hz if self._identity is not None else 10**6
        self._clock = self._new_clock(clock_hz)
        self._boot_line = boot
        self._reset_reason = reason
        self._resync_needed = True
        self._cond.notify_all()
        self.wake.set()

    def declare_reset(self, reason: str, boot: Line | None) -> None:
        with self._cond:
            self._declare_reset(reason, boot)

    @property
    def resync_needed(self) -> bool:
        return self._resync_needed

    def take_resync(self) -> ResyncTicket | None:
        """The reset to resynchronise after, if one is pending; it is no longer pending."""
        with self._cond:
            if not self._resync_needed:
                return None
            self._resync_needed = False
            return ResyncTicket(
                epoch=self._epoch,
                boot=self._boot_line,
                reason=self._reset_reason,
                old_sample=self._last_old_sample,
                before=[c.known_on for c in self._chans],
                inflight=[ch for ch, c in enumerate(self._chans) if c.cut_inflight],
            )

    def resync_failed(self) -> None:
        with self._cond:
            self._resync_needed = True

    def finish_resync(
        self, ticket: ResyncTicket, boot_on: tuple[bool, ...], detected_ns: int
    ) -> list[BoardEdge] | None:
        """The resync of `ticket` is done; None if the board reset again meanwhile. Else the
        edges the reset caused: channels whose state differs from what the driver last knew.
        They happened after the last line of the old epoch was sent (lower bound) and before
        the BOOT line arrived, and no later than BOOT's `t`, when every channel drives its safe
        state (upper bound, by extrapolation; not used if it contradicts the lower bound: the
        new clock is then wrong, and the causal bound is the honest one)."""
        with self._cond:
            if self._epoch != ticket.epoch:
                return None
            for ch in ticket.inflight:
                self._chans[ch].cut_inflight = False
            old = ticket.old_sample
            lo = old.lo_ns if old is not None else detected_ns - 10**9
            hi = detected_ns
            boot_us = ticket.boot.opt_num("t") if ticket.boot is not None else None
            if boot_us is not None:
                with contextlib.suppress(ClockError):
                    mapped = self._clock.map(boot_us).hi_ns
                    if mapped >= lo:
                        hi = min(hi, mapped)
            lo = min(lo, hi)
            edges = []
            for ch, was in enumerate(ticket.before):
                if ch >= len(boot_on) or was is None or was == boot_on[ch]:
                    continue
                half = math.ceil((hi - lo) / 2)
                edge = BoardEdge(
                    ch, boot_on[ch], (lo + hi) // 2, half, None, WHY_BOOT, ticket.epoch
                )
                self._chans[ch].edges.append(EdgeRecord(ticket.epoch, edge))
                self._chans[ch].known_on = boot_on[ch]
                edges.append(edge)
            self._cond.notify_all()
            return edges

    # ---- events, as the reader receives them ----

    def event_arrived(self, line: Line, last_tx_ns: int) -> tuple[int, ClockMap] | None:
        """Bookkeeping of an event line in arrival order: a BOOT declares a reset (None is
        returned: nothing to deliver); an event number gap counts lost events; a watchdog trip
        cancels every scheduled cut. Else the clock epoch and mapping to deliver it with."""
        assert line.seq is not None
        with self._cond:
            if line.word == "BOOT":
                self._declare_reset("boot event", line)
                self._ev_next = (line.seq + 1) % 65536
                return None
            if self._ev_next is not None and line.seq != self._ev_next:
                missed = (line.seq - self._ev_next) % 65536
                self.stats.events_lost += missed
                log.warning("relay board: %d event line(s) lost before #%d", missed, line.seq)
            self._ev_next = (line.seq + 1) % 65536
            if line.word == "WDOG":
                self.stats.watchdog_trips += 1
                # Says whether the host really was silent: a trip while requests flowed is a
                # firmware or clock fault, not a dead host.
                by = (
                    f"the board's watchdog (WDOG event #{line.seq} t={line.fields.get('t')} "
                    f"silent_ms={line.fields.get('silent_ms')}; the host's last request was "
                    f"written {(line.rx_ns - last_tx_ns) / 1e6:.1f} ms before it arrived)"
                )
                log.warning("relay board: %s", by)
                self._cancel_all(by)
            return self._epoch, self._clock

    def events_seen_up_to(self, evseq: int) -> None:
        """Events up to `evseq` went past the driver (a stand-aside): no gap to report."""
        with self._cond:
            self._ev_next = (evseq + 1) % 65536

    # ---- clock ----

    def add_sample(self, sample: SyncSample, epoch: int) -> bool:
        """A sync sample of `epoch` (ignored if the board reset since). True if its MCU time
        went back so far that the board must have reset (without a BOOT line): a reset is
        declared. An impossible reading (a glitch) is refused and counted."""
        reset = False
        with self._cond:
            if epoch != self._epoch:
                return False
            latest = self._clock.latest
            if latest is not None and sample.mcu_us < latest.mcu_us:
                # Backwards: a reset without a BOOT line if `t` fits as uptime since a reset
                # after the last sample, else an impossible reading (a glitch), refused.
                since_us = (sample.hi_ns - latest.lo_ns) / 1000 * (1 + self._rate_tolerance)
                if sample.mcu_us <= since_us:
                    self._declare_reset("clock went backwards", None)
                    reset = True
            try:
                self._clock.add(sample)
            except ClockGlitch as e:
                self.stats.clock_glitches += 1
                log.warning("relay board: refused an impossible MCU timestamp: %s", e)
        return reset

    def needs_sample_after(self, epoch: int, clock: ClockMap, mcu_us: int) -> bool:
        """Whether `clock` (of `epoch`) is current and has no sample at or after `mcu_us`."""
        with self._cond:
            latest = clock.latest
            return epoch == self._epoch and (latest is None or latest.mcu_us < mcu_us)

    def map_with(self, clock: ClockMap, mcu_us: int, not_after_ns: int | None = None) -> Mapping:
        """`mcu_us` mapped by `clock` (the current one or an older epoch's); `ClockError`."""
        with self._cond:
            return clock.map(mcu_us, not_after_ns=not_after_ns)

    def map(self, mcu_us: int, not_after_ns: int | None = None) -> Mapping:
        with self._cond:
            return self._clock.map(mcu_us, not_after_ns=not_after_ns)

    def to_mcu(self, host_ns: int) -> int | None:
        """The current clock's MCU instant at `host_ns` (ClockMap.to_mcu)."""
        with self._cond:
            return self._clock.to_mcu(host_ns)

    def map_latest(self) -> Mapping:
        """The mapping of the latest sample's MCU time."""
        with self._cond:
            latest = self._clock.latest
            assert latest is not None
            return self._clock.map(latest.mcu_us)

    def clock_report(self) -> dict[str, float | None]:
        with self._cond:
            clock = self._clock
            latest = clock.latest
            b_min, b_max = clock.rate_bounds()
            return {
                "samples": float(len(clock.samples)),
                "best_half_rtt_ns": min((s.half_ns for s in clock.samples), default=None),
                "worst_half_rtt_ns": max((s.half_ns for s in clock.samples), default=None),
                "latest_half_rtt_ns": latest.half_ns if latest else None,
                "drift_ppm": clock.drift_ppm(),
                "rate_bound_ppm": (b_max - b_min) / 2 / clock.nominal * 1e6,
                "residual_ns": clock.residual_ns,
                "latest_mcu_us": latest.mcu_us if latest else None,
            }

    # ---- channels ----

    def _cancel_all(self, by: str) -> None:
        for chan in self._chans:
            chan.cancel_gen += 1
            chan.cancelled_by = by
            chan.cut_inflight = False
        self._cond.notify_all()

    def cancel_all(self, by: str) -> None:
        """Every scheduled cut is off: wake their waiters with `by` as the reason."""
        with self._cond:
            self._cancel_all(by)

    def cancel(self, channel: int, by: str) -> None:
        """SET and ABORT (safe() sets) cancel a scheduled cut: wake its waiter."""
        with self._cond:
            chan = self._chans[channel]
            chan.cancel_gen += 1
            chan.cancelled_by = by
            chan.cut_inflight = False
            self._cond.notify_all()

    def cut_begins(self, channel: int, epoch: int) -> tuple[int, RailConfig | None]:
        """A CUT of `epoch` is about to go out: the channel's cancel generation and rail
        configuration. `BoardResetError` (not sent) if the board reset since."""
        with self._cond:
            if epoch != self._epoch:
                raise BoardResetError("relay board reset before the cut was sent", sent=False)
            chan = self._chans[channel]
            chan.cut_inflight = True
            return chan.cancel_gen, chan.rail_config

    def set_cut_inflight(self, channel: int, inflight: bool) -> None:
        with self._cond:
            self._chans[channel].cut_inflight = inflight

    def record_edge(self, epoch: int, edge: BoardEdge) -> None:
        with self._cond:
            if 0 <= edge.channel < len(self._chans):
                chan = self._chans[edge.channel]
                chan.edges.append(EdgeRecord(epoch, edge))
                if epoch == self._epoch:
                    chan.known_on = edge.powered
            self._cond.notify_all()

    def record_unmapped(self, epoch: int, channel: int, mcu_us: int, why_not: str) -> None:
        """An edge whose MCU time contradicts the clock sync: its waiters fail."""
        with self._cond:
            if 0 <= channel < len(self._chans):
                self._chans[channel].unmapped.append((epoch, mcu_us, why_not))
            self._cond.notify_all()

    def record_rail(self, epoch: int, result: RailResult) -> None:
        with self._cond:
            self._chans[result.channel].rails.append((epoch, result))
            self._cond.notify_all()

    def set_known_on(self, channel: int, on: bool) -> None:
        with self._cond:
            self._chans[channel].known_on = on

    def apply_states(self, states: ChannelStates) -> None:
        with self._cond:
            for ch, on in enumerate(states.on):
                if ch < len(self._chans):
                    self._chans[ch].known_on = on

    def has_channel(self, channel: int) -> bool:
        return 0 <= channel < len(self._chans)

    def rail_config(self, channel: int) -> RailConfig | None:
        with self._cond:
            return self._chans[channel].rail_config

    def set_rail_config(self, channel: int, config: RailConfig) -> None:
        with self._cond:
            self._chans[channel].rail_config = config

    def rail_configs(self) -> list[tuple[int, RailConfig]]:
        with self._cond:
            return [(ch, c.rail_config) for ch, c in enumerate(self._chans) if c.rail_config]

    # ---- waiting ----

    def find_edge(
        self, epoch: int, channel: int, match: Callable[[BoardEdge], bool], timeout_s: float
    ) -> BoardEdge | None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for rec in self._chans[channel].edges:
                    if rec.epoch == epoch and match(rec.edge):
                        return rec.edge
                left = deadline - time.monotonic()
                if left <= 0 or self._epoch != epoch or self._closed:
                    return None
                self._cond.wait(min(left, 0.1))

    def await_edge(self, cut: CutTicket, why: str, timeout_s: float) -> BoardEdge:
        """The `why` edge (cut or restore) of a scheduled cut, or why it will not come."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            chan = self._chans[cut.channel]
            while True:
                edge = self._cut_edge(chan, cut, why)
                if edge is not None:
                    return edge
                self._raise_if_not_coming(chan, cut, why)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PowerTimeoutError(
                        f"no {why} edge on channel {cut.channel} within {timeout_s:.3f} s"
                    )
                self._cond.wait(min(left, 0.1))

    def _cut_edge(self, chan: Channel, cut: CutTicket, why: str) -> BoardEdge | None:
        for rec in chan.edges:
            edge = rec.edge
            if (
                rec.epoch == cut.epoch
                and edge.why == why
                and edge.source_us is not None
                and edge.source_us >= cut.accept_us
            ):
                if why == "cut":
                    chan.cut_inflight = False
                return edge
        return None

    def _raise_if_not_coming(self, chan: Channel, cut: CutTicket, why: str) -> None:
        for epoch, t, why_not in chan.unmapped:
            if epoch == cut.epoch and t >= cut.accept_us:
                raise PowerError(
                    f"the {why} edge of channel {cut.channel} happened but its MCU "
                    f"timestamp t={t} contradicts the clock sync ({why_not})"
                )
        if self._epoch != cut.epoch:
            raise BoardResetError(
                f"relay board reset before the {why} edge of channel {cut.channel}"
            )
        if chan.cancel_gen != cut.gen:
            raise PowerError(
                f"the cut of channel {cut.channel} was cancelled by "
                f"{chan.cancelled_by} before its {why} edge"
            )
        if self._broken is not None:
            raise self._broken
        if self._closed:
            raise PowerError("relay board driver closed while waiting for an edge")

    def await_rail(self, cut: CutTicket, edge_us: int | None, timeout_s: float) -> RailResult:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            chan = self._chans[cut.channel]
            while True:
                for epoch, result in chan.rails:
                    if epoch == cut.epoch and result.edge_us == edge_us:
                        return result
                left = deadline - time.monotonic()
                if left <= 0 or self._epoch != cut.epoch or self._closed:
                    raise PowerTimeoutError(
                        f"no rail-sense result for channel {cut.channel} within {timeout_s:.3f} s"
                    )
                self._cond.wait(min(left, 0.1))
