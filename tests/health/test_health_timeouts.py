"""Timeouts hold: a tool and everything it spawned, even a child in a session of its own, is
killed at the timeout, and the call returns within the timeout plus 0.5 s.

The fake tool (fixtures/fakebin) leaves a daemon that holds our stdout and stderr open: with
`setsid` it stays the tool's child in a new session (out of reach of killpg); with `double` it
double-forks away from the tool at once, as a real daemon does.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from health_paths import real_file

from rig.health.errors import ToolMissing, ToolTimeout
from rig.health.tools import ToolRunner, smartctl_snapshot

INTEL_SATA = "sat-Intel_S4510_S4610_S4500_S4600_Series_SSDs-INTEL_SSDSC2KB480G8-sdm.json"
GRACE_S = 0.5


def _gone(pid: int, within_s: float = 2.0) -> bool:
    """The process no longer runs (absent, or a zombie waiting for its reaper)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def daemon_pidfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    path = tmp_path / "daemon.pid"
    monkeypatch.setenv("FAKE_DAEMON_PIDFILE", str(path))
    yield path
    if path.exists():  # never leave it running, even when the test failed
        pid = int(path.read_text())
        try:  # only if that pid is still our fake (pids are reused)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"smartctl" in cmdline or cmdline.startswith(b"sleep\0" + HUNG_S.encode()):
                os.kill(pid, 9)
        except (FileNotFoundError, ProcessLookupError):
            pass


HUNG_S = "30"
# A hung smartctl in sh, not the Python fake: it must have left its daemon before the timeout,
# and a Python start-up alone took over 0.5 s on a loaded 2-core machine (the daemon was never
# made and the test proved nothing). setsid: the daemon stays the tool's child in a session of
# its own; double: the subshell that started it exits at once, so it is orphaned (re-parented).
HUNG_TOOL = f"""#!/bin/sh
PATH=/usr/bin:/bin
daemon='echo $$ > "$FAKE_DAEMON_PIDFILE.tmp"; mv "$FAKE_DAEMON_PIDFILE.tmp" "$FAKE_DAEMON_PIDFILE"'
if [ "$HOW" = setsid ]; then
  setsid sh -c "$daemon; exec sleep {HUNG_S}" &
else
  (setsid sh -c "$daemon; exec sleep {HUNG_S}" &)
fi
exec sleep {HUNG_S}
"""


@pytest.mark.parametrize("how", ["setsid", "double"])
@pytest.mark.parametrize("timeout_s", [1.0, 2.0])
def test_hung_tool_with_a_daemonised_child_returns_in_time_and_both_die(
    tmp_path: Path, daemon_pidfile: Path, how: str, timeout_s: float
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "smartctl").write_text(HUNG_TOOL)
    (bindir / "smartctl").chmod(0o755)
    env = {"PATH": str(bindir), "HOW": how, "FAKE_DAEMON_PIDFILE": str(daemon_pidfile)}
    runner = ToolRunner(timeout_s=10.0, env=env)
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        smartctl_snapshot("/dev/sdm", runner, timeout_s=timeout_s)
    elapsed = time.monotonic() - start
    assert err.value.timeout_s == timeout_s
    assert elapsed < timeout_s + GRACE_S, f"returned after {elapsed:.2f} s"
    assert daemon_pidfile.exists(), "the hung tool did not leave its daemon before the timeout"
    assert _gone(int(daemon_pidfile.read_text())), "the daemonised child outlived the timeout"


@pytest.mark.parametrize("how", ["setsid", "double"])
def test_tool_that_answers_but_leaves_a_daemon_on_our_pipes(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, daemon_pidfile: Path, how: str
) -> None:
    """The answer is kept, the call does not wait for the daemon, and the daemon is killed."""
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file(INTEL_SATA)))
    monkeypatch.setenv("FAKE_SMARTCTL_DAEMON", f"{how}:30")
    start = time.monotonic()
    reading = smartctl_snapshot("/dev/sdm", fake_tools, timeout_s=5.0)
    elapsed = time.monotonic() - start
    assert reading.snapshot.identity.model == "INTEL SSDSC2KB480G8"
    assert elapsed < 5.0, f"waited {elapsed:.2f} s for a daemon holding the pipes"
    assert _gone(int(daemon_pidfile.read_text()))


def test_exit_status_and_signal_of_the_tool_come_through(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho out; echo err >&2; exit ${1:-0}\n")
    script.chmod(0o755)
    runner = ToolRunner(timeout_s=5, env={"PATH": str(tmp_path)})
    result = runner.run(["tool", "3"])
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    killer = tmp_path / "killer"
    killer.write_text("#!/bin/sh\nkill -9 $$\n")
    killer.chmod(0o755)
    assert runner.run(["killer"]).exit_code == -9


def test_a_file_that_cannot_be_executed_is_a_missing_tool(tmp_path: Path) -> None:
    bad = tmp_path / "smartctl"
    bad.write_text("#!/nonexistent/interpreter\n")
    bad.chmod(0o755)
    with pytest.raises(ToolMissing, match="cannot execute"):
        ToolRunner(timeout_s=5, env={"PATH": str(tmp_path)}).run(["smartctl", "-i"])
