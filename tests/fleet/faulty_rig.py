"""The production `rig` command with one fault injected (for the agent's tests), chosen by
RIG_TEST_FAULT: `start` makes opening the store fail as the store-creation race did (an uncaught
sqlite3 error: exit 1, a traceback); `after:N` makes every drive's thread die after its Nth cycle
(an uncaught error in the thread: the run ends with status 0, or 1 for a failed drive, and
fewer cycles than its target)."""

from __future__ import annotations

import os
import sqlite3
import sys
from typing import Any

from rig.campaign.drive import DriveRun
from rig.campaign.model import CycleRecord
from rig.interface import cli
from rig.store import Store

FAULT = "RIG_TEST_FAULT"


def _inject(fault: str) -> None:
    if fault == "start":

        def refuse(self: Store, *args: Any, **kwargs: Any) -> None:
            raise sqlite3.OperationalError("table campaign already exists")

        Store.__init__ = refuse  # type: ignore[method-assign]
    elif fault.startswith("after:"):
        last = int(fault.split(":", 1)[1])
        real = DriveRun.next_cycle

        def next_cycle(self: DriveRun) -> CycleRecord:
            if self.next_seq > last:
                raise RuntimeError(f"injected: ch{self.spec.channel}'s thread dies")
            return real(self)

        DriveRun.next_cycle = next_cycle  # type: ignore[method-assign]
    else:
        raise SystemExit(f"{FAULT}={fault}: start or after:N")


if __name__ == "__main__":
    _inject(os.environ.get(FAULT, ""))
    sys.exit(cli.main())
