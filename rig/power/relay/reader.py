"""The thread that reads the board's port: it splits the byte stream into lines, checks each
checksum and hands each line on, in arrival order: replies to the request waiting on the link,
events to `BoardState` (bookkeeping that must follow arrival order: resets, gaps, watchdog trips)
and then to the maintenance thread for delivery. Standing aside, it passes every line unparsed
to a listener instead."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

import serial

from rig.power.clocksync import ClockMap
from rig.power.realtime import realtime
from rig.power.relay.link import Link
from rig.power.relay.state import BoardState
from rig.power.relay.wire import BadLine, Line, LineSplitter, parse_line

log = logging.getLogger(__name__)

LineListener = Callable[[bytes, int], None]  # (line without its newline, host time received)
EventSink = Callable[[int, ClockMap, Line], None]  # (clock epoch, its mapping, event line)


class FrameReader:
    def __init__(
        self,
        ser: serial.Serial,
        link: Link,
        state: BoardState,
        post_event: EventSink,
    ) -> None:
        self._ser = ser
        self._link = link
        self._state = state
        self._post_event = post_event
        self._listener: LineListener | None = None
        self._stop = threading.Event()
        name = f"relay-rx {link.port}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the thread (it notices within one read timeout; the port's pending read is
        cancelled). The port itself stays open."""
        self._stop.set()
        with contextlib.suppress(Exception):
            self._ser.cancel_read()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(2.0)

    def divert(self, listener: LineListener | None) -> None:
        """Every line to `listener`, unparsed (None: back to the driver)."""
        self._listener = listener

    def _run(self) -> None:
        # a cut's request waits for its reply here (the SYNC before a CUTAT): read at the cut
        # thread's priority; it blocks in the port's read (0.1 s timeout), it never spins
        with realtime():
            self._read_lines()

    def _read_lines(self) -> None:
        splitter = LineSplitter()
        while not self._stop.is_set():
            try:
                data = self._ser.read(max(1, self._ser.in_waiting))
            except (serial.SerialException, OSError, TypeError, AttributeError) as e:
                if not self._stop.is_set():
                    self._link.port_failed(e)
                return
            if not data:
                continue
            rx_ns = time.monotonic_ns()
            for raw in splitter.feed(data):
                listener = self._listener
                if listener is not None:
                    listener(raw, rx_ns)
                else:
                    self._route(raw, rx_ns)
            if splitter.overflowed:  # noise without newlines
                self._link.bad_line()

    def _route(self, raw: bytes, rx_ns: int) -> None:
        try:
            line = parse_line(raw, rx_ns)
        except BadLine as e:
            log.debug("relay board: bad line %r (%s)", raw, e)
            self._link.bad_line()
            return
        if not line.event:
            self._link.deliver(line)
            return
        tagged = self._state.event_arrived(line, self._link.last_tx_ns)
        if tagged is not None:
            self._post_event(*tagged, line)
        self._state.wake.set()


class AsideWatch:
    """What the driver must know of the lines that went past it while it stood aside: the
    number of the last event, and a BOOT (the board reset)."""

    def __init__(self) -> None:
        self.boot: Line | None = None
        self.last_evseq: int | None = None

    def see(self, raw: bytes, rx_ns: int) -> None:
        try:
            line = parse_line(raw, rx_ns)
        except BadLine:
            return
        if line.event:
            self.last_evseq = line.seq
            if line.word == "BOOT":
                self.boot = line
