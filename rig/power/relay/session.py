"""The driver's conversation with one board as a whole: the handshake on open (identify, refuse
another protocol version, apply the driver's settings, sync the clock, read the channels), the
resynchronisation after an MCU reset, and re-reading the board after the driver stood aside.

One resynchronisation runs at a time (its lock is the outermost of the driver's locks); public
calls run a pending one first, or wait for the one under way (`begin`).
"""

from __future__ import annotations

import logging
import threading
import time

from rig.errors import PowerError, PowerTimeoutError, ProtocolMismatchError
from rig.power.relay.events import Sinks
from rig.power.relay.link import Link
from rig.power.relay.model import (
    BoardIdentity,
    BoardRefusedError,
    BoardResetError,
    ChannelStates,
    ResetInfo,
    ResyncTicket,
)
from rig.power.relay.state import BoardState
from rig.power.relay.wire import FIRMWARE_VERSION, PROTOCOL_VERSION, Line

log = logging.getLogger(__name__)

RESYNC_ATTEMPTS = 5  # resets in a row during one resynchronisation before giving up


class Session:
    def __init__(
        self,
        link: Link,
        state: BoardState,
        sinks: Sinks,
        watchdog_ms: int | None,
        sync_interval_s: float,
        sync_burst: int,
    ) -> None:
        self.port = link.port
        self._link = link
        self._state = state
        self._sinks = sinks
        self._watchdog_ms = watchdog_ms
        self.sync_interval_ns = int(sync_interval_s * 1e9)
        self._burst_n = max(1, sync_burst)
        self._resync_lock = threading.Lock()
        self.resets: list[ResetInfo] = []
        self.last_burst_ns = 0
        # How long the line may stay idle before a heartbeat: set from the board's watchdog.
        self.heartbeat_ns = int(min(sync_interval_s, 1.0) * 1e9)

    def begin(self) -> int:
        """Before a public call: run a pending resynchronisation, or wait for one under way
        (the caller must not act on the board's state half-way through it). Returns the clock
        epoch the call's requests belong to (`Link.request(epoch=)`): a reset after this
        point fails them unsent instead of letting them reach a board not yet resynchronised
        with."""
        while True:
            self._state.check_usable()
            self.resync()
            epoch = self._state.epoch
            if not self._state.resync_needed:
                return epoch

    # ---- open ----

    def handshake(self, boot_timeout_s: float, stall_timeout_s: float) -> None:
        """Identify the board (a silent port fails within `boot_timeout_s`), then configure
        and sync it over a link that rides out stalls of up to `stall_timeout_s`."""
        try:
            identity = self.identify(boot_timeout_s)
        except PowerTimeoutError as e:
            raise PowerTimeoutError(
                f"no relay board answers on {self.port} (is it the board, at 115200 baud, "
                f"with firmware v{FIRMWARE_VERSION}?): {e}"
            ) from e
        self._link.stall_timeout_s = stall_timeout_s
        self._state.start(identity)
        if identity.watchdog_trips:
            log.warning(
                "relay board on %s: its watchdog tripped %d time(s) since its reset (a host "
                "went silent); channels were put in their safe state",
                self.port,
                identity.watchdog_trips,
            )
        self.configure()
        self.sync_burst()
        self.read_states()
        if self._state.resync_needed:  # it reset during the handshake: start over once it is up
            self.resync()

    def identify(self, boot_timeout_s: float = 0.0) -> BoardIdentity:
        """`ID`, retried until `boot_timeout_s` (a board that resets as its port opens);
        `ProtocolMismatchError` for another protocol version or a device that refuses ID."""
        deadline = time.monotonic() + boot_timeout_s
        while True:
            try:
                line = self._link.request("ID").line
                break
            except BoardResetError:
                continue  # the board booted while we asked (e.g. DTR reset on open)
            except PowerTimeoutError:
                if time.monotonic() >= deadline:
                    raise
            except BoardRefusedError as e:
                raise ProtocolMismatchError(
                    f"the device on {self.port} does not answer ID ({e}); "
                    f"reflash firmware v{FIRMWARE_VERSION} (protocol {PROTOCOL_VERSION})"
                ) from e
        proto = line.fields.get("proto")
        if proto != str(PROTOCOL_VERSION):
            raise ProtocolMismatchError(
                f"relay board on {self.port} speaks protocol {proto} (firmware "
                f"{line.fields.get('fw', '?')}), this host speaks {PROTOCOL_VERSION}: "
                f"reflash firmware v{FIRMWARE_VERSION}"
            )
        return BoardIdentity.from_reply(line)

    def configure(self) -> None:
        """Board settings the driver owns, (re)applied after open and after every reset."""
        if self._watchdog_ms is not None:
            wdog = self._link.request("WDOG", self._watchdog_ms).line.num("wdog_ms")
        else:
            wdog = self._state.identity.watchdog_ms
        interval_s = self.sync_interval_ns / 1e9
        period_s = wdog / 4000 if wdog else interval_s
        self.heartbeat_ns = int(max(0.02, min(period_s, interval_s)) * 1e9)
        for ch, config in self._state.rail_configs():
            self._link.request("RAIL", ch, *config)

    def sync_burst(self, epoch: int | None = None) -> None:
        for _ in range(self._burst_n):
            self._link.request("SYNC", epoch=epoch)
        self.last_burst_ns = time.monotonic_ns()

    def keep_alive(self) -> None:
        """A sync burst every sync interval; between them a heartbeat (SYNC) whenever the line
        was idle for `heartbeat_ns`, so the board's watchdog stays fed."""
        now = time.monotonic_ns()
        if now - self.last_burst_ns >= self.sync_interval_ns:
            self.sync_burst()
        elif now - self._link.last_tx_ns >= self.heartbeat_ns:
            self._link.request("SYNC")

    def read_states(self, epoch: int | None = None) -> ChannelStates:
        states = ChannelStates.from_reply(self._link.request("STATE", epoch=epoch).line)
        self._state.apply_states(states)
        return states

    def reread(self) -> None:
        """Identity, the driver's settings, the clock and the channel states, read again."""
        self._state.set_identity(self.identify())
        self.configure()
        self.sync_burst()
        self.read_states()

    # ---- after a reset ----

    def resync(self) -> None:
        """After an MCU reset: cancel any cut the fresh board may have taken from the line,
        re-identify, reapply settings, re-sync the clock, reconcile the channel states and
        report. Switches nothing itself (the reset already applied the safe states), except to
        undo a cut that was on its way across the reset and fired on the fresh board before it
        could be cancelled."""
        with self._resync_lock:
            for _ in range(RESYNC_ATTEMPTS):
                ticket = self._state.take_resync()
                if ticket is None:
                    return
                if self._resync_once(ticket):
                    return
            raise PowerError(f"relay board on {self.port} keeps resetting")

    def _resync_once(self, ticket: ResyncTicket) -> bool:
        """One attempt; False if the board reset again meanwhile."""
        boot = ticket.boot
        detected_ns = boot.rx_ns if boot is not None else time.monotonic_ns()
        boot_on = tuple(bool(v) for v in boot.flags("on")) if boot is not None else ()
        try:
            identity, states = self._recover(ticket.inflight, boot_on)
        except BoardResetError:
            return False
        except PowerError:
            self._state.resync_failed()
            raise
        edges = self._state.finish_resync(ticket, boot_on or states.on, detected_ns)
        if edges is None:
            return False
        info = ResetInfo(
            detected_ns=detected_ns,
            reason=ticket.reason,
            identity=identity,
            states=states,
            boot_edges=tuple(edges),
            cuts_lost=tuple(ticket.inflight),
        )
        self._report(info)
        return True

    def _recover(
        self, inflight: list[int], boot_on: tuple[bool, ...]
    ) -> tuple[BoardIdentity, ChannelStates]:
        # First: a CUT in flight may have reached the fresh board (its line arrived after the
        # reset); cancel it before it fires.
        for ch in inflight:
            self._link.request("ABORT", ch)
        identity = self.identify(1.0)
        self._state.set_identity(identity)
        self.configure()
        self.sync_burst()
        states = self.read_states()
        stale = [ch for ch in inflight if ch < len(boot_on) and states.on[ch] != boot_on[ch]]
        for ch in stale:  # it fired first: back to the state the reset gave it
            log.warning(
                "relay board: a cut sent before the reset fired on channel %d after it; "
                "restoring the channel's boot state",
                ch,
            )
            self._link.request("SET", ch, int(boot_on[ch]))
        if stale:
            states = self.read_states()
        return identity, states

    def _report(self, info: ResetInfo) -> None:
        self._state.stats.resets += 1
        self.resets.append(info)
        log.warning(
            "relay board on %s reset (%s, cause %s): resynchronised; channels in safe "
            "state %s; cuts lost on %s",
            self.port,
            info.reason,
            info.identity.reset_cause,
            info.states.on,
            list(info.cuts_lost),
        )
        for edge in info.boot_edges:
            self._sinks.edge(edge)
        self._sinks.reset(info)

    # ---- after standing aside ----

    def aside_ended(self, last_evseq: int | None, boot: Line | None) -> None:
        """What went past while the driver stood aside, booked before anyone else may write
        (the wire still held): a request queued meanwhile (a heartbeat) then goes out in the
        new clock epoch, never as one of the old epoch answered by the fresh board."""
        if last_evseq is not None:
            self._state.events_seen_up_to(last_evseq)
        if boot is not None:
            self._state.declare_reset("boot event", boot)

    def after_aside(self, boot_seen: bool) -> None:
        """The driver has the line back: after a reset seen meanwhile, the full
        resynchronisation (`on_reset`); otherwise the board is read again."""
        if boot_seen:
            self.resync()
            return
        self.reread()
