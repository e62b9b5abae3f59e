"""Requests on the wire: sequence numbers, one request outstanding at a time, resends and the
matching of replies (posted by the reader thread) to the request that waits for them.

The board executes a `seq`+CRC once and replays its reply, so the same line is resent unchanged
after a timeout, a `- ERR crc|frame|long`, or a line that failed its checksum when no reply
followed within a short grace (it may have been an event, not our reply).

A stalled link (a USB serial adapter or hub that stops moving bytes for seconds, a simulator
starved of CPU) is ridden out: a write the port cannot take in time and a reply that does not
come are both timeouts, and the same line keeps being resent until the stall budget is spent.
Resending is safe because the board acts on a `seq`+CRC once. Only an error from the port
itself (an adapter unplugged) is a lost port.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import serial

from rig.errors import PowerError, PowerTimeoutError
from rig.power.clocksync import SyncSample
from rig.power.relay.model import BoardRefusedError, BoardResetError
from rig.power.relay.state import BoardState
from rig.power.relay.wire import Line, request_line

log = logging.getLogger(__name__)


class Slot:
    """The one outstanding request; the reader thread posts what it heard."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.outcomes: queue.Queue[tuple[str, Line | None, int]] = queue.Queue()


@dataclass(frozen=True)
class Reply:
    line: Line
    lo_ns: int  # host time the request was first sent
    epoch: int


class Link:
    """The write side of the port and the request/reply exchange. Thread-safe: callers queue on
    one lock (the wire), held for a whole exchange, resends included."""

    def __init__(
        self,
        ser: serial.Serial,
        port: str,
        state: BoardState,
        reply_timeout_s: float,
        retries: int,
    ) -> None:
        self.port = port  # the port's name, for messages
        self._ser = ser
        self._state = state
        self._stats = state.stats
        self._reply_timeout_s = reply_timeout_s
        self._retries = retries
        # Timeouts go on being resent until this long after the first send (at least
        # `retries` times): a stall shorter than it costs resends, not the request.
        self.stall_timeout_s = 0.0
        self._resync_parser = False  # a write timed out: the board may hold part of a line
        self._io_lock = threading.Lock()
        # Random start: a new process never repeats the previous one's last seq+line, which
        # the board would replay instead of executing.
        self._seq = secrets.randbelow(65536)
        self._slot: Slot | None = None
        self.last_tx_ns = 0  # host time the last request was written

    # ---- the caller's side ----

    def request(
        self, command: str, *args: int, timeout_s: float | None = None, epoch: int | None = None
    ) -> Reply:
        """Send one request and return its OK reply (every reply with `t=` is a sync sample of
        the clock). Raises `PowerTimeoutError`, `PowerError`, `BoardRefusedError` or
        `BoardResetError` (the board reset while it was outstanding). With `epoch` (the clock
        epoch a public call began in), a request the board reset before is not sent at all
        (`BoardResetError`): it belongs to a board the driver has not resynchronised with."""
        self._state.check_usable()
        with self._io_lock:
            return self._request_held(command, args, timeout_s, epoch)

    def prepare(self, command: str, epoch: int) -> Prepared:
        """One request whose arguments are known only later (a cut's instant, once its event
        happened), with a SYNC sent now: a fresh sample to build it on, and a reset seen
        before. `Prepared.send` then takes the wire and writes the line, no round trip left
        to wait for; the wire is not held in between (a trigger that never comes must not
        silence the board's heartbeats)."""
        self.request("SYNC", epoch=epoch)
        return Prepared(self, command, epoch)

    def _request_held(
        self, command: str, args: tuple[int, ...], timeout_s: float | None, epoch: int | None
    ) -> Reply:
        self._seq = (self._seq + 1) % 65536
        body, wire = request_line(self._seq, command, args)
        if epoch is not None and self._state.epoch != epoch:
            raise BoardResetError(f"relay board reset before {body!r} was sent", sent=False)
        return self._exchange_held(Slot(self._seq), body, wire, self._state.epoch, timeout_s)

    def _exchange_held(
        self,
        slot: Slot,
        body: str,
        wire: bytes,
        epoch: int,
        timeout_s: float | None,
        first: tuple[int, bool] | None = None,
    ) -> Reply:
        """The whole exchange of one request (`first`: its first send already went out then,
        and whether the port took it)."""
        timeout_s = self._reply_timeout_s if timeout_s is None else timeout_s
        self._slot = slot
        try:
            line, first_ns, line_epoch = self._exchange(slot, body, wire, epoch, timeout_s, first)
        finally:
            self._slot = None
        if line_epoch != epoch:
            raise BoardResetError(f"relay board reset during {body!r}")
        if line.word != "OK":
            raise BoardRefusedError(body, line.args[0] if line.args else line.word)
        if "t" in line.fields:
            self._state.add_sample(SyncSample(line.num("t"), first_ns, line.rx_ns), line_epoch)
        return Reply(line, first_ns, line_epoch)

    def _exchange(
        self,
        slot: Slot,
        body: str,
        wire: bytes,
        epoch: int,
        timeout_s: float,
        first: tuple[int, bool] | None = None,
    ) -> tuple[Line, int, int]:
        """Send `wire` until a reply comes: (reply, host time of the first send, its epoch).
        `first`: the first send already went out (`Prepared.send`)."""
        first_ns: int | None = None
        resends = timeouts = bad = 0
        while True:
            if self._state.epoch != epoch:
                raise BoardResetError(f"relay board reset during {body!r}")
            if first is not None:  # (only the first time round)
                (first_ns, written), first = first, None
            else:
                sent_ns = time.monotonic_ns()
                written = self._write_request(wire)
                self.last_tx_ns = sent_ns
                if first_ns is None:
                    first_ns = sent_ns
                self._stats.requests += 1
            if written:
                kind, line, line_epoch = self._await_outcome(slot, timeout_s)
            else:  # the write itself waited out the timeout
                kind, line, line_epoch = "timeout", None, self._state.epoch
            if kind == "reply":
                assert line is not None
                return line, first_ns, line_epoch
            if kind == "timeout":
                timeouts += 1
                self._stats.timeouts += 1
            else:
                bad += 1
            stalled_s = (time.monotonic_ns() - first_ns) / 1e9
            if bad > self._retries or (
                resends >= self._retries and stalled_s >= self.stall_timeout_s
            ):
                if timeouts and bad <= self._retries:
                    raise PowerTimeoutError(
                        f"relay board did not answer {body!r} in {timeout_s:.3f} s "
                        f"({resends + 1} attempts over {stalled_s:.1f} s)"
                    )
                raise PowerError(
                    f"no valid reply to {body!r} after {resends + 1} attempts "
                    f"({bad} corrupted or refused lines, {timeouts} timeouts)"
                )
            resends += 1
            self._stats.retries += 1
            log.info("relay board: resending %r (%s)", body, kind)

    def end_partial_line(self) -> None:
        """The next request goes out after a lone `\n` (see `_write_request`)."""
        self._resync_parser = True

    def _write_request(self, wire: bytes) -> bool:
        """Write one request line; False if the port could not take it within the reply
        timeout (a stalled link: part of it may have gone, so the next write begins with a
        lone `\n`, which ends that part as a line the board refuses and never acts on)."""
        if self._resync_parser:
            wire = b"\n" + wire
        try:
            self._ser.write(wire)
        except serial.SerialTimeoutException:
            self._stats.write_stalls += 1
            self._resync_parser = True
            log.warning("relay board: port %s took no bytes for a while (stalled link)", self.port)
            return False
        except (serial.SerialException, OSError) as e:
            self.port_failed(e)
            raise self._state.broken or PowerError(str(e)) from e
        self._resync_parser = False
        return True

    def _await_outcome(self, slot: Slot, timeout_s: float) -> tuple[str, Line | None, int]:
        """The reply, or why to resend. After a line that failed its checksum the reply may
        still come (that line may have been an event): wait a short grace before resending."""
        deadline = time.monotonic() + timeout_s
        grace_until: float | None = None
        while True:
            now = time.monotonic()
            limit = deadline if grace_until is None else min(deadline, grace_until)
            broken = self._state.broken
            if broken is not None:
                raise broken
            try:
                kind, line, epoch = slot.outcomes.get(timeout=max(0.0, min(limit - now, 0.1)))
            except queue.Empty:
                now = time.monotonic()
                if grace_until is not None and now >= grace_until:
                    return "bad", None, self._state.epoch
                if now >= deadline:
                    return "timeout", None, self._state.epoch
                continue
            if kind in ("reply", "nack"):
                return kind, line, epoch
            # A corrupted line: ours or an event's. Give the real reply a moment.
            if grace_until is None:
                grace_until = time.monotonic() + min(0.05, timeout_s / 4)

    def _write(self, data: bytes) -> None:
        # No flush (tcdrain): it waits without a limit for a stalled adapter, and the clock
        # samples need only the host time before the write, not the time it left the port.
        try:
            self._ser.write(data)
        except serial.SerialTimeoutException as e:
            self._stats.write_stalls += 1
            raise PowerTimeoutError(f"relay board port {self.port} took no bytes: {e}") from e
        except (serial.SerialException, OSError) as e:
            self.port_failed(e)
            raise self._state.broken or PowerError(str(e)) from e

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[Callable[[bytes], None]]:
        """The wire to oneself (no request goes out meanwhile): yields a writer of raw bytes."""
        with self._io_lock:
            yield self._write

    # ---- the reader's side ----

    def deliver(self, line: Line) -> None:
        """A reply line (an `OK`/`ERR` with our seq, or a `- ERR` the board could not
        attribute) for the request outstanding, if any."""
        slot = self._slot
        if line.seq is None:
            self._stats.nacks += 1
            if slot is not None:
                slot.outcomes.put(("nack", line, self._state.epoch))
        elif slot is not None and line.seq == slot.seq:
            slot.outcomes.put(("reply", line, self._state.epoch))
        else:
            self._stats.stale_replies += 1

    def bad_line(self) -> None:
        """A line that failed its checksum or framing: maybe our reply."""
        self._stats.bad_lines += 1
        slot = self._slot
        if slot is not None:
            slot.outcomes.put(("bad", None, self._state.epoch))

    def port_failed(self, cause: Exception) -> None:
        """The port is lost: fail the request outstanding and every later one."""
        self._state.fail(PowerError(f"relay board port {self.port} failed: {cause}"))
        slot = self._slot
        if slot is not None:
            slot.outcomes.put(("bad", None, self._state.epoch))


class Prepared:
    """One request made ready (`Link.prepare`): `send` writes it once with its arguments and
    holds the wire until `finish` (its reply, resent as any request's) or `cancel`."""

    def __init__(self, link: Link, command: str, epoch: int) -> None:
        self._link, self.command, self.epoch = link, command, epoch
        self._sent: tuple[Slot, str, bytes, int, bool] | None = None
        self._held = False

    def send(self, *args: int) -> int:
        """Write the request now (after any exchange in progress); the host time just before
        the write. `BoardResetError` (not sent) when the board reset since `prepare`."""
        assert self._sent is None and not self._held
        link = self._link
        link._io_lock.acquire()
        self._held = True
        try:
            if link._state.epoch != self.epoch:
                raise BoardResetError(
                    f"relay board reset before {self.command} was sent", sent=False
                )
            link._seq = (link._seq + 1) % 65536
            body, wire = request_line(link._seq, self.command, args)
            slot = Slot(link._seq)
            link._slot = slot  # (a reply can come before the write returns)
            sent_ns = time.monotonic_ns()
            written = link._write_request(wire)
        except BaseException:
            self._release()
            raise
        link.last_tx_ns = sent_ns
        link._stats.requests += 1
        self._sent = (slot, body, wire, sent_ns, written)
        return sent_ns

    def finish(self, timeout_s: float | None = None) -> Reply:
        """The reply of the request sent (resent until one comes, as `Link.request`)."""
        assert self._sent is not None
        slot, body, wire, sent_ns, written = self._sent
        try:
            return self._link._exchange_held(
                slot, body, wire, self.epoch, timeout_s, (sent_ns, written)
            )
        finally:
            self._release()

    def cancel(self) -> None:
        """Never sent, or given up on: the wire is free again."""
        self._release()

    def _release(self) -> None:
        if self._held:
            self._held = False
            self._link._slot = None
            self._link._io_lock.release()
