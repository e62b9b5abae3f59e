"""Live progress of a campaign: per drive cycles, failures, errors, rate and ETA.

On a terminal a table is redrawn in place twice a second (messages scroll above it); otherwise
one plain line per cycle, so a log file or a pipe gets a readable record.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from rig.campaign.drive import DriveRun
from rig.campaign.model import CycleRecord
from rig.campaign.observer import Observer


@dataclass
class DriveProgress:
    channel: int
    label: str
    target: int
    done: int  # cycles that count towards the target
    done_at_start: int
    duration_s: float = 0.0  # the drive's duration budget, 0 = none
    elapsed_at_start: float = 0.0
    errors: int = 0
    failing_cycles: int = 0
    findings: dict[str, int] = field(default_factory=dict)
    interrupted: int = 0
    last_status: str = ""
    stopped: str = ""

    def rate_per_hour(self, since: float, now: float) -> float:
        run = self.done - self.done_at_start
        return run * 3600 / (now - since) if now > since and run else 0.0

    def eta_s(self, since: float, now: float) -> float | None:
        if self.stopped or self.done >= self.target:
            return 0.0
        rate = self.rate_per_hour(since, now)
        if not rate:
            return None
        eta = (self.target - self.done) * 3600 / rate
        if self.duration_s:
            eta = min(eta, max(0.0, self.duration_s - self.elapsed_at_start - (now - since)))
        return eta


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


class Progress(Observer):
    """The campaign's observer on a terminal or a stream: start, each cycle, messages."""

    def __init__(self, out: TextIO | None = None, live: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.live = self.out.isatty() if live is None else live
        self.started = time.monotonic()
        self.drives: dict[int, DriveProgress] = {}
        self._lock = threading.Lock()
        self._drawn = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, runs: Sequence[DriveRun]) -> None:
        with self._lock:
            for run in runs:
                rules, counts = run.campaign, run.counts
                budgets = [b for b in (rules.duration_s, rules.stop.duration_s) if b]
                self.drives[run.spec.channel] = DriveProgress(
                    run.spec.channel,
                    f"{run.spec.identity.model} {run.spec.identity.serial}"[:40],
                    run.campaign.cycles,
                    counts.cycles,
                    counts.cycles,
                    min(budgets) if budgets else 0.0,
                    counts.elapsed_s,
                    counts.errors,
                    counts.failing_cycles,
                    dict(counts.failures),
                    counts.interrupted,
                )
        self.started = time.monotonic()
        if self.live and self._thread is None:
            self._thread = threading.Thread(target=self._redraw, name="progress", daemon=True)
            self._thread.start()

    def cycle_recorded(self, run: DriveRun, c: CycleRecord) -> None:
        with self._lock:
            d = self.drives.get(run.spec.channel)
            if d is None:
                return
            counts = run.counts
            d.done, d.errors, d.failing_cycles = counts.cycles, counts.errors, counts.failing_cycles
            d.findings, d.interrupted, d.last_status = (
                dict(counts.failures),
                counts.interrupted,
                c.status,
            )
            if not self.live:
                now = time.monotonic()
                self._print(
                    f"{run.progress_line(c)}  rate {d.rate_per_hour(self.started, now):.0f}/h"
                    f"  ETA {_duration(d.eta_s(self.started, now))}"
                )

    def message(self, text: str) -> None:
        """A line that is not a cycle (stops, resume scans, signals)."""
        with self._lock:
            for d in self.drives.values():
                if text.startswith(f"ch{d.channel}: stopped: "):
                    d.stopped = text.split("stopped: ", 1)[1]
            self._print(text)

    def table(self) -> list[str]:
        now = time.monotonic()
        lines = [
            f"{'ch':>2} {'drive':<40} {'cycles':>13} {'fail':>5} {'err':>4} {'int':>4}"
            f" {'rate/h':>7} {'ETA':>7}  findings"
        ]
        for d in sorted(self.drives.values(), key=lambda d: d.channel):
            found = ", ".join(f"{cls} x{n}" for cls, n in sorted(d.findings.items()))
            state = f"STOPPED: {d.stopped}" if d.stopped else found
            lines.append(
                f"{d.channel:>2} {d.label:<40} {d.done:>6}/{d.target:<6} {d.failing_cycles:>5}"
                f" {d.errors:>4} {d.interrupted:>4} {d.rate_per_hour(self.started, now):>7.0f}"
                f" {_duration(d.eta_s(self.started, now)):>7}  {state}"
            )
        return lines

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            with self._lock:
                self._draw()

    # terminal --------------------------------------------------------------------------------
    def _print(self, text: str) -> None:
        if self.live:
            self._erase()
        self.out.write(text + "\n")
        if self.live:
            self._draw()
        self.out.flush()

    def _erase(self) -> None:
        if self._drawn:
            self.out.write(f"\x1b[{self._drawn}F\x1b[J")  # up to the table's first line, clear
            self._drawn = 0

    def _draw(self) -> None:
        lines = self.table()
        self.out.write("\n".join(lines) + "\n")
        self._drawn = len(lines)

    def _redraw(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                self._erase()
                self._draw()
                self.out.flush()
