"""The run's real-time watch (tests/rt_watch.py) sees a task spinning at real-time priority,
and not one that sleeps at it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.rt_watch import SELF_TEST_MARK, RealtimeWatch

SPIN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"
SLEEP = "import time\nfor _ in range(300): time.sleep(0.01)\n"


def run_at_fifo(code: str) -> subprocess.Popen[bytes]:
    # priority 1, below the rig's own, for a short while: the host keeps its other core
    # (the run's own watch leaves out a command line with the mark)
    code = f"# {SELF_TEST_MARK}\n{code}"
    return subprocess.Popen(["chrt", "-f", "1", sys.executable, "-c", code])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for SCHED_FIFO")
def test_a_task_spinning_at_real_time_priority_is_recorded_and_a_sleeping_one_is_not() -> None:
    watch = RealtimeWatch()
    watch.running["gw9"] = "tests/some::test"
    watch.start()
    try:
        sleeper = run_at_fifo(SLEEP)
        sleeper.wait(10)
        assert watch.spins == []
        spinner = run_at_fifo(SPIN.format(s=2.5))
        spinner.wait(10)
        time.sleep(1.2)
    finally:
        watch.stop()
    assert any(s.pid == spinner.pid for s in watch.spins), watch.report()
    assert all(s.pid == spinner.pid for s in watch.spins), watch.report()
    line = watch.report()[0]
    assert "real-time priority" in line and "tests/some::test" in line and SELF_TEST_MARK in line
