"""The maintenance thread: resynchronisation after a reset, delivery of every event, periodic
clock sync bursts and heartbeats (a SYNC whenever the line was idle for a quarter of the board's
watchdog period, at most the sync interval) that keep the firmware watchdog fed. When it stops
(`close()`, or the host process dies) the board's watchdog puts every channel in its safe state
after `wdog_ms`."""

from __future__ import annotations

import logging
import queue
import threading

from rig.errors import PowerError
from rig.power.clocksync import ClockMap
from rig.power.relay.events import EventDelivery
from rig.power.relay.session import Session
from rig.power.relay.state import BoardState
from rig.power.relay.wire import Line

log = logging.getLogger(__name__)


class BoardMaintenance:
    def __init__(
        self,
        session: Session,
        delivery: EventDelivery,
        state: BoardState,
    ) -> None:
        self._session = session
        self._delivery = delivery
        self._state = state
        self._wake = state.wake
        self._events: queue.Queue[tuple[int, ClockMap, Line]] = queue.Queue()
        self._stop = threading.Event()
        name = f"relay-hb {session.port}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def post(self, epoch: int, clock: ClockMap, line: Line) -> None:
        """An event line to deliver (from the reader thread, in arrival order)."""
        self._events.put((epoch, clock, line))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(2.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.02)
            self._wake.clear()
            if self._stop.is_set() or self._state.broken is not None:
                return
            try:
                self._round()
            except PowerError as e:
                if not self._stop.is_set():
                    log.warning("relay board maintenance: %s", e)
                    self._stop.wait(0.05)
            except Exception:
                log.exception("relay board maintenance thread")
                self._stop.wait(0.05)

    def _round(self) -> None:
        if self._state.resync_needed:
            self._session.resync()
        while True:
            try:
                epoch, clock, line = self._events.get_nowait()
            except queue.Empty:
                break
            self._delivery.deliver(epoch, clock, line)
        self._session.keep_alive()
