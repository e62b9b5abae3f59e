"""How far a long pass of the store (the v11 migration's backfill) is, on stderr: on a terminal one
line rewritten in place at most twice a second, otherwise a line at each tenth, so a log gets ten
lines however large the store."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class StoredProgress:
    """Done out of `total` units (`what`, plural), with their rate and the time still needed."""

    def __init__(
        self,
        title: str,
        total: int,
        what: str,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.title, self.total, self.what = title, total, what
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = self.stream.isatty()
        self.clock = clock
        self.started = self.shown_at = clock()
        self.tenths = 0  # tenths already shown (not on a terminal)

    def update(self, done: int) -> None:
        if self.total <= 0:
            return
        now = self.clock()
        if self.terminal:
            if now - self.shown_at >= 0.5:
                self.shown_at = now
                self.stream.write(f"\r{self.line(done, now)}\x1b[K")
                self.stream.flush()
            return
        tenths = min(10, done * 10 // self.total)
        if tenths > self.tenths:
            self.tenths = tenths
            self.stream.write(self.line(done, now) + "\n")
            self.stream.flush()

    def finish(self) -> None:
        """The last line (100 %), once the pass is done; a terminal's line ends."""
        if self.total <= 0:
            return
        if self.terminal:
            self.stream.write(f"\r{self.line(self.total, self.clock())}\x1b[K\n")
            self.stream.flush()
        else:
            self.update(self.total)

    def line(self, done: int, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        left = (self.total - done) / rate if rate > 0 else float("inf")
        eta = _clock_time(left) if left != float("inf") else "?"
        return (
            f"{self.title}: {done * 100 // self.total:3d} % ({done:,} of {self.total:,}"
            f" {self.what}, {rate:,.0f}/s, {_clock_time(elapsed)} elapsed, ETA {eta})"
        )


def _clock_time(seconds: float) -> str:
    whole = int(seconds + 0.5)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"
