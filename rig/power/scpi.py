"""A programmable bench supply as a `PowerSwitch` (and `ShapedSwitch`): one output per channel,
spoken to in SCPI through a VISA resource (PyVISA; the command set is its family's table,
rig/power/scpi_families.py).

- Identity by *IDN?: the maker must be the family's and the model the one the campaign names.
- Every switch is read back (the output's state, the set voltage) and the instrument's error
  queue (SYST:ERR?) is read after it: an error there fails the switch with the instrument's own
  words, so the cycle records them as its ERROR.
- A cut is output off. A sag or ramp is voltage steps sent by the host at their times (the two
  families here have no millisecond list mode: docs/decisions.md, "A supply is timed by the
  host and read back after every switch"); a sag whose duration is a whole
  number of the family's sequence steps (the Rigol's timer: seconds) is run by the instrument.
  The host cannot know when inside a command's round trip the instrument acted, nor where on the
  output's way down (at its fastest fall, or a ramp's slew) the drive lost power: each edge is
  reported at the middle of round trip (write, then *OPC? answered) plus fall, with half of each
  as its error bound.
- An instrument that stops answering raises `PowerTimeoutError` (the cycle is a rig ERROR; its
  output keeps whatever it was last told, which for every switch but a cut is on). The driver
  keeps which outputs the instrument last confirmed on; `safe()` tries every output and, if one
  fails, its error names each output not confirmed on ("output N may be off: check the supply").

Channel N of the campaign is the supply's output `outputs[N]` ([station].outputs; N + 1 unless
given).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from rig.errors import PowerError, PowerTimeoutError, UserError
from rig.power.base import Edge
from rig.power.scpi_families import Family
from rig.power.shapes import Shape

STEP_S = 0.001  # the host's step between voltage commands of a slewed edge
MAX_STEPS = 200  # ... and at most this many commands per edge


class Instrument(Protocol):
    """What the driver needs of a VISA message-based resource."""

    def write(self, message: str) -> object: ...

    def query(self, message: str) -> str: ...

    def close(self) -> None: ...


class Timeout(Exception):
    """Raised by an `Instrument` adapter when the instrument did not answer in time."""


def may_be_off(outputs: list[int]) -> str:
    """What an operator must check by hand after the supply could not be brought to safe."""
    if not outputs:
        return "every output was last read back on"
    if len(outputs) == 1:
        return f"output {outputs[0]} may be off: check the supply"
    return f"outputs {', '.join(map(str, outputs))} may be off: check the supply"


class _HostTimedCut:
    """A cut or shape run by the host at its time; the edge is where the rail left nominal."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.edge: Edge | None = None
        self.error: BaseException | None = None

    def wait(self, timeout_s: float) -> Edge:
        if not self._done.wait(timeout_s):
            raise PowerTimeoutError(f"the supply's cut did not happen within {timeout_s:.3f} s")
        if self.error is not None:
            raise self.error
        assert self.edge is not None
        return self.edge

    def finish(self) -> None:
        self._done.set()


class ScpiSupply:
    """`PowerSwitch` + `ShapedSwitch` over one instrument."""

    def __init__(
        self,
        instrument: Instrument,
        family: Family,
        model: str,
        outputs: tuple[int, ...],
        volts: float,
        current_a: float,
        on_edge: Callable[[Edge], None] | None = None,
    ) -> None:
        self.family, self.model = family, model
        self.volts, self.current_a = volts, current_a
        self._inst = instrument
        self._lock = threading.RLock()
        self._on_edge = on_edge
        self._outputs = outputs  # the supply's output (from 1) of each channel
        channels = len(outputs)
        self._cancel: dict[int, tuple[threading.Event, threading.Thread]] = {}
        # channels whose output the instrument read back on, with no switch sent since
        self._confirmed_on: set[int] = set()
        self.identity = self._identify()
        self.fall_v_per_ms = family.fall_v_per_ms[model]
        self.max_v = {ch: float(self._ask("volts_max", ch)) for ch in range(channels)}
        for ch in range(channels):
            if volts > self.max_v[ch]:
                raise UserError(
                    f"supply output {outputs[ch]} sets at most {self.max_v[ch]:g} V;"
                    f" the campaign's [station].volts is {volts:g}"
                )
        self._send("clear", 0)

    # identity and the wire -------------------------------------------------------------------
    def _identify(self) -> str:
        answer = self._query("*IDN?")
        fields = [f.strip() for f in answer.split(",")]
        if len(fields) < 2 or not fields[0].upper().startswith(self.family.maker.upper()):
            raise UserError(
                f"the instrument answers *IDN? with {answer!r}: not a {self.family.name}"
            )
        if fields[1] != self.model:
            raise UserError(
                f"the instrument is a {fields[1]} ({answer!r}); the campaign names a {self.model}"
            )
        if self.model not in self.family.fall_v_per_ms:
            raise UserError(f"the rig does not know the {self.model}'s limits ({self.family.name})")
        return answer

    def _query(self, text: str) -> str:
        try:
            return self._inst.query(text).strip()
        except Timeout as error:
            raise PowerTimeoutError(f"the supply did not answer {text!r}: {error}") from error

    def _write(self, text: str) -> None:
        try:
            self._inst.write(text)
        except Timeout as error:
            raise PowerTimeoutError(f"the supply did not take {text!r}: {error}") from error

    def _command(self, op: str, ch: int, v: float = 0.0, t: int = 0) -> str:
        return self.family.commands[op].format(
            ch=self._outputs[ch], v=v, a=self.current_a, t=t, nominal=self.volts
        )

    def _send(self, op: str, ch: int, v: float = 0.0, t: int = 0) -> None:
        select = self._command("select", ch)
        if select:
            self._write(select)
        for part in self._command(op, ch, v, t).split(";"):
            self._write(part)

    def _ask(self, op: str, ch: int) -> str:
        return self._query(self._command(op, ch))

    def _timed(self, op: str, ch: int, v: float = 0.0) -> tuple[int, int]:
        """Send and wait for *OPC?: (sent, answered) on the host clock; the instrument acted
        somewhere between."""
        with self._lock:
            start = time.monotonic_ns()
            self._send(op, ch, v)
            self._query(self._command("done", ch))
            return start, time.monotonic_ns()

    def _errors(self) -> list[str]:
        """The instrument's error queue, emptied (bounded: a queue that never empties is one)."""
        found = []
        for _ in range(16):
            answer = self._query(self._command("error_query", 0))
            if answer.startswith(self.family.no_error):
                break
            found.append(answer)
        return found

    def _checked(self, ch: int, want_on: bool, want_v: float) -> None:
        """Read back the output's state and set voltage, and the error queue."""
        errors = self._errors()
        if errors:
            raise PowerError(
                f"supply output {self._outputs[ch]}: the instrument reports {'; '.join(errors)}"
            )
        on = self._ask("output_query", ch) in self.family.on_replies
        volts = float(self._ask("volts_query", ch))
        if on != want_on or abs(volts - want_v) > 0.01 + 0.001 * want_v:
            state = "on" if on else "off"
            raise PowerError(
                f"supply output {self._outputs[ch]} reads back {state} at {volts:g} V;"
                f" asked {'on' if want_on else 'off'} at {want_v:g} V"
            )

    def _edge(self, ch: int, powered: bool, at: tuple[int, int], fall_v: float = 0.0) -> Edge:
        """The edge of a switch made between `at` (first command sent, last one answered),
        whose last step still had `fall_v` to fall at the output's fastest: the drive may have
        lost power anywhere in that span, so the edge is its middle and half of it the bound."""
        fall_ns = int(fall_v / self.fall_v_per_ms * 1e6) if fall_v > 0 else 0
        low, high = at[0], at[1] + fall_ns
        edge = Edge(ch, powered, (low + high) // 2, (high - low + 1) // 2)
        if self._on_edge is not None:
            self._on_edge(edge)
        return edge

    # PowerSwitch ------------------------------------------------------------------------------
    @property
    def channels(self) -> int:
        return len(self._outputs)

    def on(self, channel: int) -> Edge:
        self._stop_pending(channel)
        with self._lock:
            if "seq_stop" in self.family.commands:  # a sequence the instrument runs ends here
                self._send("seq_stop", channel)
            self._send("set_current", channel)  # (nothing of an `on` can take power away)
            self._send("set_volts", channel, self.volts)
            at = self._timed("output_on", channel)
            self._checked(channel, True, self.volts)
            self._confirmed_on.add(channel)
        return self._edge(channel, True, at)

    def off(self, channel: int) -> Edge:
        self._stop_pending(channel)
        with self._lock:
            self._confirmed_on.discard(channel)
            at = self._timed("output_off", channel)
            self._checked(channel, False, self.volts)
        return self._edge(channel, False, at, self.volts)

    def state(self, channel: int) -> bool:
        with self._lock:
            return self._ask("output_query", channel) in self.family.on_replies

    def safe(self) -> None:
        """Every output on at nominal: a drive is left powered. Every output is tried; if one
        fails, the first error is raised with the outputs the instrument has not confirmed on
        (a supply has no watchdog: an output cut when it went silent stays off)."""
        errors: list[PowerError] = []
        for channel in range(len(self._outputs)):
            try:
                self.on(channel)
            except PowerError as error:
                errors.append(error)
        if errors:
            doubtful = [o for ch, o in enumerate(self._outputs) if ch not in self._confirmed_on]
            timed_out = any(isinstance(e, PowerTimeoutError) for e in errors)
            kind = PowerTimeoutError if timed_out else PowerError
            raise kind(f"{errors[0]}; {may_be_off(doubtful)}") from errors[0]

    def close(self) -> None:
        for channel in list(self._cancel):
            self._stop_pending(channel)
        self._inst.close()

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> _HostTimedCut:
        def run(pending: _HostTimedCut, cancel: threading.Event) -> None:
            self._confirmed_on.discard(channel)
            at = self._timed("output_off", channel)
            pending.edge = self._edge(channel, False, at, self.volts)
            if off_s is not None and not cancel.wait(off_s):
                self.on(channel)

        return self._later(channel, delay_s, run)

    # ShapedSwitch ------------------------------------------------------------------------------
    def check_shape(self, channel: int, shape: Shape) -> None:
        depth = shape.volts(self.volts)
        fall = self.fall_v_per_ms
        if shape.kind == "sag" and depth >= self.volts:
            raise UserError(f"a sag to {depth:g} V is no sag from {self.volts:g} V nominal")
        if shape.kind in ("sag", "ramp") and shape.slew_v_per_s > fall * 1000:
            raise UserError(
                f"a {shape.kind} slewing {shape.slew_v_per_s / 1000:g} V/ms is faster than the"
                f" {self.model} can bring its output down ({fall:g} V/ms)"
            )
        reach_ms = (self.volts - depth) / fall
        if shape.kind == "sag" and reach_ms > shape.duration_s * 1000:
            raise UserError(
                f"a sag to {depth:g} V in {shape.duration_s * 1000:g} ms is deeper than the"
                f" {self.model} can set in that time (it falls {fall:g} V/ms: {reach_ms:g} ms)"
            )

    def instrument_timed(self, shape: Shape) -> bool:
        """Whether the instrument times this shape itself: a sag at full speed whose duration is
        a whole number of the family's sequence steps."""
        step = self.family.sequence_step_s
        if not step or shape.kind != "sag" or shape.slew_v_per_s > 0:
            return False
        steps = shape.duration_s / step
        return steps >= 1 and abs(steps - round(steps)) < 1e-6

    def shaped_cut(self, channel: int, delay_s: float, shape: Shape) -> _HostTimedCut:
        depth = shape.volts(self.volts)
        if self.instrument_timed(shape):
            seconds = round(shape.duration_s)

            def timed(pending: _HostTimedCut, cancel: threading.Event) -> None:
                with self._lock:
                    self._confirmed_on.discard(channel)
                    self._send("seq_setup", channel, depth, seconds)
                    at = self._timed("seq_start", channel)
                pending.edge = self._edge(channel, False, at, self.volts - depth)

            return self._later(channel, delay_s, timed)

        def run(pending: _HostTimedCut, cancel: threading.Event) -> None:
            at = self._slew(channel, (self.volts, depth), shape.slew_v_per_s, cancel)
            pending.edge = self._edge(channel, False, at[:2], at[2])
            if shape.kind == "sag" and not cancel.wait(shape.duration_s):
                self._slew(channel, (depth, self.volts), shape.slew_v_per_s, cancel)

        return self._later(channel, delay_s, run)

    def _slew(
        self, ch: int, span: tuple[float, float], slew_v_per_s: float, cancel: threading.Event
    ) -> tuple[int, int, float]:
        """Voltage steps from `start` to `end` at the slew rate (one step: as fast as the
        supply goes), until cancelled (the rig switched the channel meanwhile); returns when
        the first step was sent, when the last was answered, and the last step's size."""
        start, end = span
        self._confirmed_on.discard(ch)
        steps = 1
        if slew_v_per_s > 0:
            steps = max(1, min(MAX_STEPS, int(abs(end - start) / slew_v_per_s / STEP_S)))
        period = abs(end - start) / slew_v_per_s / steps if slew_v_per_s > 0 else 0.0
        sent, answered, first = 0, 0, 0
        for i in range(1, steps + 1):
            if i > 1:
                # timed from the first step's answer (it had acted by then), not from before
                # its send: a first step sent late would have the rest catch up, faster
                # than the slew
                time.sleep(max(0.0, (first + (i - 1) * period * 1e9 - time.monotonic_ns()) / 1e9))
                if cancel.is_set():
                    break
            at = self._timed("set_volts", ch, start + (end - start) * i / steps)
            sent, answered = sent or at[0], at[1]
            first = first or answered
        return sent, answered, abs(end - start) / steps

    def _later(
        self,
        channel: int,
        delay_s: float,
        action: Callable[[_HostTimedCut, threading.Event], None],
    ) -> _HostTimedCut:
        pending = _HostTimedCut()
        cancel = threading.Event()
        self._stop_pending(channel)

        def body() -> None:
            try:
                if not cancel.wait(delay_s):
                    action(pending, cancel)
            except BaseException as error:  # told to whoever waits for the edge
                pending.error = error
            finally:
                pending.finish()

        thread = threading.Thread(target=body, name=f"supply-ch{channel}", daemon=True)
        self._cancel[channel] = (cancel, thread)
        thread.start()
        return pending

    def _stop_pending(self, channel: int) -> None:
        """A scheduled cut or shape of the channel is called off (like the board's SET): its
        thread ends after the command in progress, before the caller switches."""
        pending = self._cancel.pop(channel, None)
        if pending is not None:
            pending[0].set()
            if pending[1] is not threading.current_thread():
                pending[1].join(5.0)
