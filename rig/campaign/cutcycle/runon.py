"""How long after a cut's edge the drive may still complete writes: its run-on window.

A relay opens some ms after its coil's edge and the drive then runs on its capacitance, so a
write issued shortly after the edge may succeed ([cut] hold_up_ms). Where the switch measured
this cut's rail (the relay board's rail sense), the measurement goes further than the guess: a
drive whose rail was still up may have run until the rail fell. The window never shrinks below
hold_up_ms: the rail is sensed at the drive's connector, and a drive may run on behind it on
capacitance of its own (docs/decisions.md, "A drive may run on after the edge: hold-up and
measured rail fall")."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rig.campaign.model import Cycle
from rig.errors import RigError
from rig.power.base import RailResult, RailSensedCut


@dataclass(frozen=True)
class RunOn:
    ns: int  # after the edge (plus its error), a write issued later cannot have succeeded
    basis: str  # where the window comes from, for the error text and the cycle's events

    @property
    def ms(self) -> float:
        return self.ns / 1e6


def cut_rail(c: Cycle) -> RailResult | None:
    """This cycle's rail-sense capture, asked of the switch once (the verify and the record
    phase both use it); None when the switch does not measure it or it did not come."""
    if not c.rail_asked:
        c.rail_asked = True
        if c.edge is not None and isinstance(c.pending, RailSensedCut):
            try:
                c.rail = c.pending.rail(timeout_s=1.0)
            except RigError as error:  # a missing capture never fails the cycle
                logging.getLogger("rig").warning("cycle %d: no rail-sense result: %s", c.seq, error)
    return c.rail


def run_on(hold_up_ms: float, rail: RailResult | None) -> RunOn:
    """The run-on window of one cut: hold_up_ms, or the rail's measured time to fall where that
    is longer. `fell`: the first reading below the capture's end threshold (lo, or hi when lo
    is 0) bounds it; `timeout` and `on`: the rail was still up when the capture ended (its
    window) or the channel was powered again, so the drive may have run for the whole window.
    `busy` (another channel's capture ran) measured nothing."""
    guess = RunOn(int(hold_up_ms * 1e6), f"[cut] hold_up_ms = {hold_up_ms:g}")
    if rail is None or rail.end == "busy":
        return guess
    if rail.end == "fell":
        fell_us = rail.lo_us if rail.lo_threshold else rail.hi_us
        if fell_us is None:  # a capture that says it fell names the time; be safe if not
            return guess
        measured = RunOn(fell_us * 1000, f"the rail fell {fell_us / 1000:g} ms after the edge")
    else:
        measured = RunOn(
            rail.window_ms * 1_000_000,
            f"the rail was still up {rail.window_ms} ms after the edge ({rail.end})",
        )
    return measured if measured.ns > guess.ns else guess
