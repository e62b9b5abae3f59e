"""A CPU hog for the tests that must hold under load: busy processes the test starts and
kills by PID (never by name: other work shares the machine)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

PER_CORE = 4  # busy processes per core: a loaded lab host (issue's measure)


@contextlib.contextmanager
def cpu_hog(per_core: int = PER_CORE) -> Iterator[list[int]]:
    """`per_core` busy processes per core while the block runs; their PIDs."""
    count = per_core * (os.cpu_count() or 1)
    procs = [
        subprocess.Popen([sys.executable, "-S", "-c", "while True: pass"]) for _ in range(count)
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
