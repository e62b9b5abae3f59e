"""A watch over the whole test run: no process of the machine may spin at real-time priority.

The rig's cut threads and the firmware's host build run SCHED_FIFO where the host allows it
(rig/power/realtime.py, firmware/host/board_host.c); one of them busy at that priority starves
every ordinary process on a 2-core host (a fake tool that answers in 10 s, a simulator behind
its pty), and the test that fails is then another one. The controlling pytest process samples
every task's policy and CPU time in /proc once a second; a real-time task (not a kernel
thread) that used more than half a core over one sample is recorded with the tests running
at the time, and the run fails at its end naming it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SAMPLE_S = 1.0
BUSY_SHARE = 0.5  # of one core over a sample
REALTIME_POLICIES = {1, 2}  # SCHED_FIFO, SCHED_RR (sched(7))
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
SELF_TEST_MARK = "rt-watch-self-test"  # in the command line of the watch's own test spinner


@dataclass(frozen=True)
class Spin:
    at: float  # time.time() of the sample
    pid: int
    tid: int
    name: str  # the task's comm
    command: str  # its process's command line
    share: float  # of one core
    running: tuple[str, ...]  # the tests in progress


def task_stats(root: Path = Path("/proc")) -> dict[tuple[int, int], tuple[int, float, str]]:
    """(pid, tid) -> (policy, CPU seconds, comm) of every user-space task."""
    found: dict[tuple[int, int], tuple[int, float, str]] = {}
    for proc in root.iterdir():
        if not proc.name.isdigit():
            continue
        try:
            tasks = list((proc / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                text = (task / "stat").read_text()
            except OSError:
                continue
            comm = text[text.index("(") + 1 : text.rindex(")")]
            fields = text[text.rindex(")") + 2 :].split()
            # fields[0] is stat's 3rd field (state): utime 14, stime 15, flags 9, policy 41
            if int(fields[6]) & 0x00200000:  # PF_KTHREAD: the kernel's own
                continue
            cpu = (int(fields[11]) + int(fields[12])) * TICK_S
            found[(int(proc.name), int(task.name))] = (int(fields[38]), cpu, comm)
    return found


def command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip().replace("\n", "; ")[:200]


class RealtimeWatch:
    """Samples in a daemon thread from `start()` to `stop()`; `spins` holds what it found."""

    def __init__(self, ignore: str | None = None) -> None:
        self._ignore = ignore  # a command line with this in it is left out
        self.spins: list[Spin] = []
        self.running: dict[str, str] = {}  # worker -> test in progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rt-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        before, then = task_stats(), time.monotonic()
        while not self._stop.wait(SAMPLE_S):
            now_stats, now = task_stats(), time.monotonic()
            span = now - then
            for key, (policy, cpu, comm) in now_stats.items():
                old = before.get(key)
                if policy not in REALTIME_POLICIES or old is None:
                    continue
                share = (cpu - old[1]) / span
                command = command_of(key[0])
                if share > BUSY_SHARE and not (self._ignore and self._ignore in command):
                    running = tuple(sorted(self.running.values()))
                    self.spins.append(
                        Spin(time.time(), key[0], key[1], comm, command, share, running)
                    )
            before, then = now_stats, now

    def report(self) -> list[str]:
        return [
            f"{time.strftime('%H:%M:%S', time.gmtime(s.at))} pid {s.pid} task {s.tid} "
            f"({s.name}) at real-time priority used {s.share:.0%} of a core: {s.command}; "
            f"tests running: {', '.join(s.running) or '?'}"
            for s in self.spins
        ]
