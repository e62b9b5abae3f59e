"""SCPI command sets of programmable bench supplies, as data: one table per family.

The driver (rig/power/scpi.py) formats an operation's template with `ch` (the output, from 1),
`v` (volts) and `a` (amps) and never branches on the family. A family that says nothing for an
operation (`select` empty) skips it; a command with `;` is sent as its parts, one by one. Adding
a family (Rohde & Schwarz HMC804x, Siglent SPD) is one more entry here, and its table in the
simulated supply (fixtures/scpi_supply.py).

Model limits: `fall_v_per_ms` is how fast the output can come down (unloaded down-programming,
the slowest edge of a sag or the fastest ramp the supply makes); `max_v` per output is read from
the instrument (`volts_max`), never assumed. The fall rates below are those of the simulated
models: for a real supply, take them from its datasheet's down-programming time
(docs/known-issues.md, "Supply fall rates are the simulated models' figures").
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
    # the instrument's own timed sequence (list / timer mode, operations seq_setup, seq_start,
    # seq_stop): its step; 0 = none. A sag at full speed whose duration is a whole number of
    # steps is timed by the instrument; every other shape by the host
    sequence_step_s: float = 0.0


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
        # the timer (a sequence on the selected output): group 1 at depth, group 2 at nominal
        "seq_setup": ":TIM:PARA 1,{v:.3f},{a:.3f},{t:d};:TIM:PARA 2,{nominal:.3f},{a:.3f},1;"
        ":TIM:GROU 2;:TIM:CYCLE N,1;:TIM:ENDS LAST",
        "seq_start": ":TIM ON",
        "seq_stop": ":TIM OFF",
    },
    on_replies=("ON",),
    no_error="0,",
    fall_v_per_ms={"DP832": 1.0, "DP832A": 1.0, "DP821": 1.0, "DP811": 1.0},
    sequence_step_s=1.0,  # the timer's steps are whole seconds: millisecond sags are host-timed
)

FAMILIES: Mapping[str, Family] = {f.name: f for f in (KEYSIGHT_E36, RIGOL_DP8)}
