"""Manual power backend for rehearsals: an operator switches the rail when told to.

The cut instant is only known to within the time the operator takes, so every edge carries a
large error bound (`reaction_s`): the checker then treats anything that completed in that window
as not complete, and a rehearsal can never report a false lost durable write.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rig.power.base import Edge


class _ManualCut:
    def __init__(self, edge: Edge) -> None:
        self._edge = edge

    def wait(self, timeout_s: float) -> Edge:
        return self._edge


class ManualSwitch:
    def __init__(self, channels: int, reaction_s: float = 10.0, out: TextIO = sys.stderr) -> None:
        self._channels = channels
        self._state = dict.fromkeys(range(channels), True)
        self._error_ns = int(reaction_s * 1e9)
        self._out = out

    @property
    def channels(self) -> int:
        return self._channels

    def _ask(self, channel: int, on: bool) -> Edge:
        self._out.write(f"rig: switch channel {channel} {'ON' if on else 'OFF'} now\n")
        self._out.flush()
        self._state[channel] = on
        return Edge(channel, on, time.monotonic_ns(), self._error_ns)

    def on(self, channel: int) -> Edge:
        return self._ask(channel, True)

    def off(self, channel: int) -> Edge:
        return self._ask(channel, False)

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> _ManualCut:
        return _ManualCut(self._ask(channel, False))

    def state(self, channel: int) -> bool:
        return self._state[channel]

    def safe(self) -> None:
        for channel, on in self._state.items():
            if not on:
                self._ask(channel, True)

    def close(self) -> None:
        self.safe()
