"""Running health tools: one small runner, and the smartctl invocations.

Every tool is run from an argument list (never a shell), with a timeout, under a small reaper
process (rig/health/reaper.py) so that a hung tool and anything it spawned, even a child that
left its session, are killed together. The runner takes PATH from
its environment, which is how the tests put fake executables in front of the real ones.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rig.health.errors import ToolFailed, ToolMissing, ToolTimeout, ToolUsageError
from rig.health.reaper import kill_tree
from rig.health.smart import parse_smartctl_json, smartctl_messages
from rig.health.snapshot import HealthSnapshot, SmartctlExit, SmartIdentity

DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ToolResult:
    argv: tuple[str, ...]
    exit_code: int  # negative: killed by that signal
    stdout: str
    stderr: str


class Runner(Protocol):
    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> ToolResult: ...


# Per stream: far above any health tool's answer; a flood beyond it is drained, not kept.
MAX_OUTPUT_BYTES = 16 << 20
# After the kill: how long to wait for the reaper's exit status (SIGKILL is immediate).
REAP_AFTER_KILL_S = 0.2
REAPER = Path(__file__).with_name("reaper.py")


@dataclass(frozen=True)
class ToolRunner:
    """Runs a tool and returns what it said; raises only when it could not run or hung.

    The tool runs under a small reaper process (rig/health/reaper.py, a child subreaper), so
    every process it spawns stays below one pid however it detached; at the timeout that whole
    tree is stopped and killed, and the call returns within the timeout plus a fraction of a
    second even if something still held our pipes (they are read against the deadline and
    closed, never waited on). Why this and not a cgroup: docs/decisions.md, "Health tools run
    under a subreaper, pipes read against the deadline".
    """

    timeout_s: float = DEFAULT_TIMEOUT_S
    env: Mapping[str, str] | None = field(default=None, repr=False)  # None: inherit

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> ToolResult:
        if not argv:
            raise ValueError("empty argument list")
        args = tuple(argv)
        env = dict(os.environ if self.env is None else self.env)
        exe = shutil.which(args[0], path=env.get("PATH", os.defpath))
        if exe is None:
            raise ToolMissing(f"{args[0]}: not found on PATH", args)
        limit = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        status_r, status_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(REAPER), str(status_w), exe, *args[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                pass_fds=(status_w,),
                start_new_session=True,  # own session and group: no terminal signals reach it
            )
        except OSError as exc:
            os.close(status_r)
            raise ToolMissing(f"{args[0]}: cannot execute: {exc}", args) from exc
        finally:
            os.close(status_w)
        try:
            out, err, finished = _collect(proc, deadline)
            if not finished:
                _kill_tree(proc)
                raise ToolTimeout(f"{args[0]}: no answer within {limit:g} s", args, limit)
            failure = _read_status(status_r)
        finally:
            os.close(status_r)
        if failure:
            raise ToolMissing(f"{args[0]}: {failure}", args)
        return ToolResult(
            argv=args,
            exit_code=proc.returncode,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
        )


def _collect(proc: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bytes, bool]:
    """Both streams until EOF and the process's exit, or the deadline: (out, err, finished).

    The pipes are closed on return either way, so nothing that still holds their other ends
    (a descendant that escaped) can make us wait.
    """
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    sizes = dict.fromkeys(chunks, 0)
    open_fds = set(chunks)
    with selectors.DefaultSelector() as sel:
        for fd in open_fds:
            sel.register(fd, selectors.EVENT_READ)
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                fd = int(key.fd)
                data = os.read(fd, 1 << 16)
                if not data:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                elif sizes[fd] < MAX_OUTPUT_BYTES:
                    chunks[fd].append(data[: MAX_OUTPUT_BYTES - sizes[fd]])
                    sizes[fd] += len(data)
    finished = not open_fds
    if finished:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            finished = False
    proc.stdout.close()
    proc.stderr.close()
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd]), finished


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """The tool and everything below the reaper: stopped, killed, then the reaper itself."""
    with contextlib.suppress(OSError):
        kill_tree(proc.pid)
    with contextlib.suppress(ProcessLookupError):  # its group too, if the tree walk missed one
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=REAP_AFTER_KILL_S)


def _read_status(fd: int) -> str:
    """What the reaper wrote on its status pipe (only when it could not run the tool)."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    return data.decode("utf-8", errors="replace")


def first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def run_checked(argv: list[str], runner: Runner, timeout_s: float | None) -> ToolResult:
    """Run a tool whose every non-zero exit is a failure (nvme-cli, hdparm, sdparm, sg3_utils'
    maintenance commands); the error names the tool, its exit and its first line of output."""
    result = runner.run(argv, timeout_s)
    if result.exit_code != 0:
        detail = first_line(result.stderr) or first_line(result.stdout)
        raise ToolFailed(
            f"{' '.join(argv[:2])} failed (exit {result.exit_code}): {detail}",
            result.argv,
            result.exit_code,
            result.stderr,
        )
    return result


# --- smartctl -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmartctlReading:
    """A parsed smartctl run: the snapshot and the exit bits decoded."""

    snapshot: HealthSnapshot
    exit_status: SmartctlExit

    @property
    def partial(self) -> bool:
        """Bit 2: some command or log read failed; fields from it are None."""
        return self.exit_status.partial

    @property
    def health_flags(self) -> SmartctlExit:
        return self.exit_status.health_bits


def smartctl_argv(devnode: str, *options: str, device_type: str | None = None) -> list[str]:
    argv = ["smartctl", "--json=c", *options]
    if device_type:
        argv.append(f"--device={device_type}")
    argv.append(devnode)
    return argv


def run_smartctl(
    argv: Sequence[str], runner: Runner, timeout_s: float | None = None
) -> SmartctlReading:
    """Run smartctl, decode the exit bits, parse the JSON.

    Bit 0 (our command line was rejected) is a rig fault; bit 1 (device open failed, or no
    IDENTIFY) means no data: both raise. Bit 2 means some command failed but the rest of the
    output is valid (common with -x on drives that lack an optional log), so it is returned as
    `partial`. Bits 3-7 are the drive's own health report, never a tool failure.
    """
    result = runner.run(argv, timeout_s)
    if result.exit_code < 0:
        raise ToolFailed(
            f"smartctl killed by signal {-result.exit_code}",
            result.argv,
            result.exit_code,
            result.stderr,
        )
    status = SmartctlExit(result.exit_code & 0xFF)
    detail = _smartctl_message(result)
    if status & SmartctlExit.CMDLINE_PARSE:
        raise ToolUsageError(
            f"smartctl rejected the command line: {detail}",
            result.argv,
            result.exit_code,
            result.stderr,
        )
    if status & SmartctlExit.DEVICE_OPEN:
        raise ToolFailed(
            f"smartctl could not open the device: {detail}",
            result.argv,
            result.exit_code,
            result.stderr,
        )
    snapshot = parse_smartctl_json(result.stdout)
    return SmartctlReading(snapshot=snapshot, exit_status=status)


def _smartctl_message(result: ToolResult) -> str:
    """The most useful line of a failed run: JSON messages first, then stderr."""
    messages = smartctl_messages(result.stdout)
    if messages:
        return "; ".join(messages)
    return first_line(result.stderr) or f"exit status {result.exit_code}"


def smartctl_snapshot(
    devnode: str,
    runner: Runner,
    *,
    device_type: str | None = None,
    timeout_s: float | None = None,
) -> SmartctlReading:
    """Full health snapshot: `smartctl --json=c -x <dev>`.

    -x rather than -a: on ATA it adds the device statistics and extended error logs, the
    write-cache state (-g all) and SCT temperature; on NVMe it is the same as -a. Its cost
    (well under a second on a healthy drive) is paid before and after a cut, not per I/O.
    """
    return run_smartctl(smartctl_argv(devnode, "-x", device_type=device_type), runner, timeout_s)


def smartctl_identity(
    devnode: str,
    runner: Runner,
    *,
    device_type: str | None = None,
    timeout_s: float | None = None,
) -> SmartIdentity:
    """Identity only (`smartctl --json=c -i <dev>`): cheap, for re-identification after return."""
    argv = smartctl_argv(devnode, "-i", device_type=device_type)
    return run_smartctl(argv, runner, timeout_s).snapshot.identity
