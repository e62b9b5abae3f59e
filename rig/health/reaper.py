"""Run one tool so that everything it spawns can be found and killed (docs/decisions.md, "Health
tools run under a subreaper, pipes read against the deadline").

A tool killed by process group can leave a child that called setsid() (a new session and
group: killpg cannot reach it) holding our stdout pipe, so reading to EOF waits for it. This
module is therefore both:
- a tiny standalone program (run by path as `python -I -S reaper.py STATUS_FD EXE ARGS...`,
  no rig imports) that marks itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), runs the
  tool as its child and waits for it. Every descendant that is orphaned, however it detached
  (setsid, double fork), is re-parented to this process rather than to init, so the whole tree
  stays below one known pid. When the tool exits, leftovers are killed; the tool's exit status
  (or its death signal) becomes the reaper's own;
- the functions the caller uses to kill that tree at a timeout: descendants found by parent
  pid from /proc, stopped first (a stopped process cannot fork), then killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36
EXEC_FAILED = 127
MAX_PASSES = 64  # rounds of "find, stop" until no new descendant appears


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process, from /proc/PID/stat (field 4, after the name)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue  # exited meanwhile
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents[int(entry)] = int(fields[1])
    return parents


def descendants(root: int) -> set[int]:
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kill_tree(root: int) -> int:
    """Stop, then kill, every descendant of `root` (not `root` itself). Returns how many."""
    stopped: set[int] = set()
    for _ in range(MAX_PASSES):
        new = descendants(root) - stopped
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(stopped)


def _reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def main(argv: list[str]) -> int:
    status_fd, tool = int(argv[0]), argv[1:]
    os.set_inheritable(status_fd, False)  # the tool must not hold it
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os.write(status_fd, f"prctl failed: {os.strerror(ctypes.get_errno())}".encode())
        return EXEC_FAILED
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(tool[0], tool)
        except OSError as exc:
            os.write(status_fd, f"cannot execute: {exc.strerror}".encode())
        os._exit(EXEC_FAILED)
    os.close(status_fd)
    while True:  # also reaps orphans adopted meanwhile
        try:
            done, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        if done == pid:
            break
    kill_tree(os.getpid())  # a health tool leaves nothing running behind it
    _reap_all()
    if os.WIFSIGNALED(status):  # die the same way, so the caller sees the signal
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):  # SIGKILL cannot be handled anyway
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig  # a signal that does not end a process by default
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
