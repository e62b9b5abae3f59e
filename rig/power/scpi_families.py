"""SCPI command sets of programmable bench supplies, as data: one table per family.

The driver (rig/power/scpi.py) formats an operation's template with `ch` (the output, from 1),
`v` (volts) and `a` (amps) and never branches on the family. A family that says nothing for an
operation (`select` empty) skips it. Adding a family (Rohde & Schwarz HMC804x, Siglent SPD) is
one more entry here, and its table in the simulated supply (fixtures/scpi_supply.py).

Model limits: `fall_v_per_ms` is how fast the output can come down (unloaded down-programming,
the slowest edge of a sag or the fastest ramp the supply makes); `max_v` per output is read
from the instrument (`volts_max`), never assumed. The fall rates below are those of the
simulated models: for a real supply, take them from its datasheet's down-programming time
(decision 341).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    maker: str  # what *IDN?'s first field starts with
    commands: Mapping[str, str]  # operation -> SCPI template
    on_replies: tuple[str, ...]  # what `output_query` answers for an output that is on
    no_error: str  # how `error_query` begins when the queue is empty
    fall_v_per_ms: Mapping[str, float]  # model -> fastest fall of the output (V/ms)
    # the instrument's own timed sequence (list / timer mode): its shortest step; 0 = none, every
    # sag is then timed by the host
    sequence_min_step_s: float = 0.0


KEYSIGHT_E36 = Family(
    name="keysight-e36",
    maker="Keysight",
    commands={
        "select": "",
        "set_volts": "VOLT {v:.4f},(@{ch})",
        "set_current": "CURR {a:.4f},(@{ch})",
        "output_on": "OUTP ON,(@{ch})",
        "output_off": "OUTP OFF,(@{ch})",
        "output_query": "OUTP? (@{ch})",
        "volts_query": "VOLT? (@{ch})",
        "volts_max": "VOLT? MAX,(@{ch})",
        "error_query": "SYST:ERR?",
        "clear": "*CLS",
        "done": "*OPC?",
    },
    on_replies=("1", "ON"),
    no_error="+0,",
    fall_v_per_ms={"E36311A": 2.0, "E36312A": 2.0, "E36313A": 2.0},
)

RIGOL_DP8 = Family(
    name="rigol-dp8",
    maker="RIGOL",
    commands={
        "select": ":INST:NSEL {ch}",
        "set_volts": ":SOUR{ch}:VOLT {v:.3f}",
        "set_current": ":SOUR{ch}:CURR {a:.3f}",
        "output_on": ":OUTP CH{ch},ON",
        "output_off": ":OUTP CH{ch},OFF",
        "output_query": ":OUTP? CH{ch}",
        "volts_query": ":SOUR{ch}:VOLT?",
        "volts_max": ":SOUR{ch}:VOLT? MAX",
        "error_query": ":SYST:ERR?",
        "clear": "*CLS",
        "done": "*OPC?",
    },
    on_replies=("ON",),
    no_error="0,",
    fall_v_per_ms={"DP832": 1.0, "DP832A": 1.0, "DP821": 1.0, "DP811": 1.0},
    sequence_min_step_s=1.0,  # the timer mode's steps are whole seconds: sags are host-timed
)

FAMILIES: Mapping[str, Family] = {f.name: f for f in (KEYSIGHT_E36, RIGOL_DP8)}
