"""`RelayBoard`: the `PowerSwitch` for the board in firmware/, and the pieces it wires together.

    wire.py         line format: framing, CRC, parsing (pure)
    port.py         opening the serial port; finding it by USB serial number (udev)
    link.py         requests: sequence numbers, one outstanding, resends, reply matching
    reader.py       the reader thread: lines to the link (replies) and to delivery (events)
    state.py        what the driver knows, behind its one innermost lock; the waiters
    session.py      handshake, resynchronisation after an MCU reset, re-reading the board
    maintenance.py  the maintenance thread: resync, event delivery, clock sync, heartbeats
    events.py       edges mapped to the host clock, sinks; rail.py: rail-sense captures

Lock order: a resynchronisation (session) before the wire (link) before the state (state).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rig.errors import PowerError
from rig.power.base import Edge, RailResult
from rig.power.clocksync import Mapping
from rig.power.relay.events import EventDelivery, Sinks
from rig.power.relay.link import Link, Prepared
from rig.power.relay.maintenance import BoardMaintenance
from rig.power.relay.model import (
    BoardEdge,
    BoardIdentity,
    BoardRefusedError,
    BoardResetError,
    BootEvent,
    ChannelStates,
    CutTicket,
    DriverStats,
    RailConfig,
    ResetInfo,
)
from rig.power.relay.port import find_port, open_port
from rig.power.relay.reader import AsideWatch, FrameReader, LineListener
from rig.power.relay.session import Session
from rig.power.relay.state import BoardState
from rig.power.relay.wire import CUTAT_AHEAD_MAX_US, DURATION_MAX_US

log = logging.getLogger(__name__)


class SerialPendingCut:
    """A cut scheduled on the board. `wait()` returns the off edge; with `off_s` given,
    `wait_restore()` returns the edge that powered the channel again."""

    def __init__(
        self, state: BoardState, ticket: CutTicket, at_us: int, rail_config: RailConfig | None
    ) -> None:
        self._state = state
        self._ticket = ticket
        self.channel = ticket.channel
        self.epoch = ticket.epoch
        self.accept_us = ticket.accept_us
        self.at_us = at_us  # MCU time the off edge is scheduled for
        self.rail_config = rail_config  # (hi, lo, window_ms, samples) at scheduling

    def wait(self, timeout_s: float) -> Edge:
        return self._state.await_edge(self._ticket, "cut", timeout_s)

    def wait_restore(self, timeout_s: float) -> Edge:
        return self._state.await_edge(self._ticket, "restore", timeout_s)

    def wait_rail(self, timeout_s: float) -> RailResult:
        """The rail-sense capture started by this cut's off edge (needs `configure_rail`)."""
        edge = self.wait(timeout_s)
        return self._state.await_rail(self._ticket, edge.source_us, timeout_s)

    def rail(self, timeout_s: float) -> RailResult | None:
        """`RailSensedCut`: the capture of this cut's off edge, or None when the channel had no
        rail-sense thresholds when the cut was scheduled."""
        if self.rail_config is None:
            return None
        return self.wait_rail(timeout_s + self.rail_config[2] / 1000)


class PreparedBoardCut:
    """A CUTAT ready to go (`RelayBoard.prepare_cut`): `fire` once the event happened, then
    `settle`; or `cancel` when it never did. Either ends it and frees the board's wire."""

    def __init__(
        self,
        state: BoardState,
        prepared: Prepared,
        ticket: tuple[int, int, RailConfig | None],
        delay_ns: int,
        off_us: int,
    ) -> None:
        self._state, self._prepared = state, prepared
        (self.channel, self._gen, self._rail_config) = ticket
        self._delay_ns, self._off_us = delay_ns, off_us
        self.fired = False

    def fire(self, event_ns: int) -> None:
        """The edge `delay` after `event_ns` (host clock), on the board's clock: one line out."""
        try:
            at_us = self._state.to_mcu(event_ns + self._delay_ns)
            assert at_us is not None  # (the SYNC of `prepare` gave a sample)
            self._prepared.send(self.channel, at_us & 0xFFFF_FFFF, self._off_us)
        except BaseException:
            self.cancel()
            raise
        self.fired = True

    def settle(self) -> SerialPendingCut:
        """The cut as the board took it (its reply); raises as `RelayBoard.cut` does."""
        assert self.fired
        try:
            reply = self._prepared.finish()
        except BoardRefusedError:
            self._state.set_cut_inflight(self.channel, False)
            raise
        except BoardResetError as e:
            if not e.sent:
                self._state.set_cut_inflight(self.channel, False)
            raise
        ticket = CutTicket(self.channel, reply.epoch, reply.line.num("t"), self._gen)
        return SerialPendingCut(self._state, ticket, reply.line.num("at"), self._rail_config)

    def cancel(self) -> None:
        if not self.fired:
            self._prepared.cancel()
            self._state.set_cut_inflight(self.channel, False)


class RelayBoard:
    """The firmware/ relay board over pyserial. Thread-safe; one request on the wire at a time."""

    def __init__(
        self,
        port: str,
        *,
        on_edge: Callable[[Edge], None] | None = None,
        on_rail: Callable[[RailResult], None] | None = None,
        on_reset: Callable[[ResetInfo], None] | None = None,
        baudrate: int = 115200,
        watchdog_ms: int | None = None,
        reply_timeout_s: float = 0.5,
        retries: int = 3,
        stall_timeout_s: float = 10.0,
        boot_timeout_s: float = 3.0,
        sync_interval_s: float = 2.0,
        sync_burst: int = 4,
        rate_tolerance: float = 0.005,
        edge_latency_us: float = 5.0,
        nonlinear_ppm: float = 2.0,
    ) -> None:
        """Open `port`, identify the board (refusing another protocol version) and start the
        reader and maintenance threads. `watchdog_ms` sets the board's host-silence watchdog
        (None leaves it as it is); heartbeats go out four times per watchdog period.
        `edge_latency_us` is how long before its timestamp an edge may have happened (the
        firmware reads the clock just after writing the pin). A link that stalls (no reply,
        or a write the port cannot take) is ridden out by resending the same line for up to
        `stall_timeout_s`; keep it above the board's watchdog period, so that a request that
        fails for a stall was either heard or the watchdog made every channel safe."""
        self.port = port
        self.stats = DriverStats()
        self._state = state = BoardState(self.stats, rate_tolerance, nonlinear_ppm)
        self._ser = open_port(port, baudrate, reply_timeout_s)
        self._link = link = Link(self._ser, port, state, reply_timeout_s, retries)
        sinks = Sinks(self.stats, on_edge, on_rail, on_reset)
        self._session = Session(link, state, sinks, watchdog_ms, sync_interval_s, sync_burst)
        delivery = EventDelivery(state, sinks, self._sync_once, int(edge_latency_us * 1000))
        self._maint = BoardMaintenance(self._session, delivery, state)
        self._reader = FrameReader(self._ser, link, state, self._maint.post)
        try:
            self._ser.reset_input_buffer()
            # the first request begins with a lone newline, which ends whatever partial line
            # the board's parser holds (written with it: a port slow to take a byte on a
            # loaded host is a stall the link rides out, not a failure to open)
            link.end_partial_line()
            self._reader.start()
            # Only a board that answered (ID) has a link that can stall: a silent port at
            # open is told within `boot_timeout_s`; the rest of the handshake rides out stalls.
            self._session.handshake(boot_timeout_s, stall_timeout_s)
        except BaseException:
            self._shutdown()
            raise
        self._maint.start()

    @classmethod
    def find(
        cls, serial_number: str, devices: Iterable[Any] | None = None, **kwargs: Any
    ) -> RelayBoard:
        """Open the board whose USB serial adapter has this serial number (udev identity)."""
        return cls(find_port(serial_number, devices), **kwargs)

    def __enter__(self) -> RelayBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def identity(self) -> BoardIdentity:
        return self._state.identity

    @property
    def resets(self) -> list[ResetInfo]:
        """Every reset the driver resynchronised after, in order."""
        return self._session.resets

    @property
    def lost(self) -> str:
        """Why the port is lost for good ("" while it works): every request now raises."""
        broken = self._state.broken
        return "" if broken is None else str(broken)

    def abandon(self, why: str) -> None:
        """Give the board up (its owner found it lost, silent or restarted): every request
        outstanding, queued or later, and every waiter, raises `PowerError(why)` at once, so no
        caller waits out a stall budget of its own. Nothing more is sent: no heartbeats, so the
        board's watchdog puts its channels in their safe state after `wdog_ms`."""
        self._state.fail(PowerError(why))

    @property
    def last_boot(self) -> BootEvent | None:
        """The latest BOOT line seen."""
        return self._state.last_boot

    # ---- PowerSwitch ----

    @property
    def channels(self) -> int:
        return self.identity.channels

    def on(self, channel: int) -> Edge:
        return self._set(channel, True)

    def off(self, channel: int) -> Edge:
        return self._set(channel, False)

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> SerialPendingCut:
        """The off edge `delay_s` from now, fixed on the board's clock (CUTAT): the deadline is
        taken here and mapped to MCU time after a fresh sample, so neither that round trip nor
        the request's own time on the line is added to the delay (a CUT's is: docs/decisions.md,
        "A cut's instant is sent on the board's clock: CUTAT").
        A deadline the request cannot reach in time fires at once, as late as the line made it."""
        deadline_ns = time.monotonic_ns() + round(delay_s * 1e9)
        self._check_channel(channel)
        delay_us = round(delay_s * 1e6)
        off_us = 0 if off_s is None else max(1, round(off_s * 1e6))
        if not 0 <= delay_us <= DURATION_MAX_US or not 0 <= off_us <= DURATION_MAX_US:
            raise ValueError(f"cut delay {delay_s} s / off {off_s} s out of range")
        epoch = self._session.begin()
        # A fresh sample (and reset detection) just before the cut.
        self._link.request("SYNC", epoch=epoch)
        at_us = self._state.to_mcu(deadline_ns) if delay_us <= CUTAT_AHEAD_MAX_US else None
        gen, rail_config = self._state.cut_begins(channel, epoch)
        try:
            if at_us is not None:
                at = at_us & 0xFFFF_FFFF  # (the board takes the nearest instant with these bits)
                reply = self._link.request("CUTAT", channel, at, off_us, epoch=epoch)
            else:
                reply = self._link.request("CUT", channel, delay_us, off_us, epoch=epoch)
        except BoardRefusedError:
            self._state.set_cut_inflight(channel, False)
            raise
        except BoardResetError as e:
            if not e.sent:  # never left: nothing for the resync to abort
                self._state.set_cut_inflight(channel, False)
            raise
        ticket = CutTicket(channel, reply.epoch, reply.line.num("t"), gen)
        return SerialPendingCut(self._state, ticket, reply.line.num("at"), rail_config)

    def prepare_cut(
        self, channel: int, delay_s: float, off_s: float | None = None
    ) -> PreparedBoardCut | None:
        """A cut `delay_s` after an event yet to come, its CUTAT made ready (the SYNC done, the
        wire held) so that `fire(event_ns)` only maps the instant and writes one line: no round
        trip nor lock between the event and the line (docs/decisions.md, "A board's cut is
        prepared before its event"). None: a delay too long for CUTAT (cut as before)."""
        self._check_channel(channel)
        delay_us = round(delay_s * 1e6)
        off_us = 0 if off_s is None else max(1, round(off_s * 1e6))
        if not 0 <= delay_us <= DURATION_MAX_US or not 0 <= off_us <= DURATION_MAX_US:
            raise ValueError(f"cut delay {delay_s} s / off {off_s} s out of range")
        if delay_us > CUTAT_AHEAD_MAX_US:
            return None
        epoch = self._session.begin()
        prepared = self._link.prepare("CUTAT", epoch)
        try:
            gen, rail_config = self._state.cut_begins(channel, epoch)
        except BaseException:
            prepared.cancel()
            raise
        ticket = (channel, gen, rail_config)
        return PreparedBoardCut(self._state, prepared, ticket, round(delay_s * 1e9), off_us)

    def glitch(self, channel: int, width_s: float, delay_s: float = 0.0) -> SerialPendingCut:
        """Power off for `width_s` (from about 10 µs), timed by the board, then on again."""
        return self.cut(channel, delay_s, width_s)

    def state(self, channel: int) -> bool:
        self._check_channel(channel)
        return self.states().on[channel]

    def safe(self) -> None:
        """Cancel every scheduled cut and put every channel in the board's safe state."""
        self._session.begin()
        states = self.states()
        for ch in range(self.channels):
            if states.on[ch] != states.safe[ch] or states.pending[ch]:
                self._set(ch, states.safe[ch])

    def close(self) -> None:
        """Stop heartbeats and release the port. Switches nothing: channels stay as they are
        until `wdog_ms` of silence, when the board's watchdog puts them in their safe state.
        Call `safe()` first for an orderly end."""
        if self._state.closed:
            return
        self._shutdown()

    # ---- more of the board ----

    def states(self) -> ChannelStates:
        return self._session.read_states(epoch=self._session.begin())

    def abort(self, channel: int) -> bool:
        """Cancel a scheduled cut or restore; the channel stays as it is. True if one was."""
        self._check_channel(channel)
        epoch = self._session.begin()
        self._state.cancel(channel, f"ABORT {channel}")
        return self._link.request("ABORT", channel, epoch=epoch).line.num("cancelled") == 1

    def set_safe_state(self, channel: int, on: bool) -> None:
        """The state the board applies at boot and on watchdog (kept in its EEPROM)."""
        self._check_channel(channel)
        self._link.request("SAFE", channel, int(on), epoch=self._session.begin())

    def configure_rail(
        self, channel: int, hi: int, lo: int, window_ms: int, samples: int = 0
    ) -> None:
        """Rail-sense thresholds in ADC counts (0 disables), capture window and how many samples
        to report. Re-applied by the driver after an MCU reset."""
        self._check_channel(channel)
        epoch = self._session.begin()
        self._link.request("RAIL", channel, hi, lo, window_ms, samples, epoch=epoch)
        self._state.set_rail_config(channel, (hi, lo, window_ms, samples))

    def adc(self, channel: int) -> int:
        """One rail-sense reading now (0..1023)."""
        self._check_channel(channel)
        return self._link.request("ADC", channel, epoch=self._session.begin()).line.num("v")

    def sync(self) -> Mapping:
        """Run a sync burst now; return the mapping of the board's current time."""
        self._session.sync_burst(epoch=self._session.begin())
        return self._state.map_latest()

    @property
    def last_request_ns(self) -> int:
        """Host time the last request (heartbeats included) was written: the board's watchdog
        counts the host's silence from when that request arrived."""
        return self._link.last_tx_ns

    def map_mcu_us(self, mcu_us: int) -> Mapping:
        """Map an instant of the board's current clock epoch to the host clock."""
        return self._state.map(mcu_us)

    def clock_report(self) -> dict[str, float | None]:
        """Figures of the current clock mapping, for logs and the docs."""
        return self._state.clock_report()

    @contextlib.contextmanager
    def stand_aside(self, on_line: LineListener) -> Iterator[Callable[[bytes], None]]:
        """The line to someone else (a diagnostic console, the protocol's conformance test in
        tests/): yields a writer of raw bytes, and every line the board sends goes to
        `on_line(raw, rx_ns)`, unparsed, on the reader thread (keep it short). Meanwhile the
        driver sends nothing (no heartbeats: the board's watchdog keeps counting, and trips if
        the line stays silent for `wdog_ms`) and interprets nothing. Cuts scheduled through
        the driver before are no longer followed (their waiters get `PowerError`). Afterwards
        the driver re-reads the board: after a reset seen meanwhile, the full
        resynchronisation (`on_reset`); otherwise identity, its own settings, the clock and the
        channel states. Edges caused meanwhile are not reported to `on_edge`: the line's user
        saw them."""
        self._session.begin()
        watch = AsideWatch()

        def listen(raw: bytes, rx_ns: int) -> None:
            watch.see(raw, rx_ns)
            on_line(raw, rx_ns)

        try:
            with self._link.exclusive() as write:
                self._state.cancel_all("a raw session on the port")
                self._reader.divert(listen)
                try:
                    yield write
                finally:
                    self._reader.divert(None)
                    self._session.aside_ended(watch.last_evseq, watch.boot)
        finally:
            self._session.after_aside(watch.boot is not None)

    # ---- internals ----

    def _set(self, channel: int, on: bool) -> Edge:
        self._check_channel(channel)
        epoch = self._session.begin()
        self._state.cancel(channel, f"SET {channel} {int(on)}")
        reply = self._link.request("SET", channel, int(on), epoch=epoch)
        line = reply.line
        t = line.num("t")
        if line.num("edge"):
            edge = self._state.find_edge(reply.epoch, channel, lambda e: e.source_us == t, 1.0)
            if edge is not None:
                return edge
            log.warning("relay board: no EDGE event for channel %d at t=%d", channel, t)
        self._state.set_known_on(channel, on)
        mapping = self._state.map(t, not_after_ns=line.rx_ns)
        return BoardEdge(channel, on, mapping.host_ns, mapping.error_ns, t, "set", reply.epoch)

    def _sync_once(self) -> None:
        """One sync sample now (event delivery: an edge with no sample after it yet)."""
        self._link.request("SYNC")

    def _check_channel(self, channel: int) -> None:
        if not 0 <= channel < self.channels:
            raise PowerError(f"relay board has no channel {channel} (0..{self.channels - 1})")

    def _shutdown(self) -> None:
        self._state.close()
        self._maint.stop()
        self._reader.stop()
        with contextlib.suppress(Exception):
            self._ser.close()
