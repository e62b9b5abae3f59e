"""A report's temporary folder goes at any exit the process lives through, and a later report
removes the folders of processes that are gone, never those of a live one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from reports.load import spill_owner
from reports.load.spill_owner import SpillFolder

REPO = Path(__file__).resolve().parents[2]
CHILD = (
    "import sys, time; from reports.load.spill_owner import SpillFolder; s = SpillFolder();"
    " print(s.folder.name, flush=True); time.sleep(60)"
)


def _child(tmp: Path) -> tuple[subprocess.Popen[str], str]:
    """A process holding a report's folder in `tmp`, and the folder."""
    env = dict(os.environ, TMPDIR=str(tmp))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    folder = child.stdout.readline().strip()
    assert os.path.isdir(folder) and Path(folder).parent == tmp
    return child, folder


def test_sigterm_and_sighup_remove_the_folder_and_the_process_dies_of_the_signal(
    tmp_path: Path,
) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        child, folder = _child(tmp_path)
        child.send_signal(sig)
        assert child.wait(timeout=30) == -sig  # the same exit status as without the handler
        assert not os.path.exists(folder)


def test_a_killed_process_folder_is_removed_by_the_next_report_a_live_one_is_not(
    tmp_path: Path,
) -> None:
    killed, left = _child(tmp_path)
    live, kept = _child(tmp_path)
    stranger = tmp_path / "rig-report-chromium-profile"  # not named by this module
    stranger.mkdir()
    try:
        killed.kill()
        killed.wait(timeout=30)
        assert os.path.isdir(left)  # SIGKILL: nothing could remove it
        assert spill_owner.remove_stale(str(tmp_path)) == [left]
        assert not os.path.exists(left)
        assert os.path.isdir(kept) and stranger.is_dir()
    finally:
        live.kill()
        live.wait(timeout=30)


def test_a_reused_pid_is_not_taken_for_the_owner(tmp_path: Path) -> None:
    """The name holds the owner's start time: this process's PID with another start time is
    a process that is gone."""
    own = spill_owner.prefix()
    other = f"{spill_owner.PREFIX}{os.getpid()}-{spill_owner.start_time(os.getpid()) + 1}-x"
    (tmp_path / (own + "mine")).mkdir()
    (tmp_path / other).mkdir()
    assert spill_owner.remove_stale(str(tmp_path)) == [str(tmp_path / other)]
    assert (tmp_path / (own + "mine")).is_dir()


def test_a_report_folder_is_named_by_its_owner() -> None:
    spill = SpillFolder()
    name = Path(spill.folder.name).name
    assert name.startswith(spill_owner.prefix()) and not spill_owner.owner_alive(
        name.replace(str(os.getpid()), str(_gone_pid()), 1)
    )
    assert Path(spill.folder.name).parent == Path(tempfile.gettempdir())


def _gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
