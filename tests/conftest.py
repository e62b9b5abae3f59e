"""Shared test fixtures: a running udevd (started here only if none answers, stopped after)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from fixtures.simssd import runtime
from fixtures.simssd.twin import ensure_udevd, stop_udevd
from tests.rt_watch import SELF_TEST_MARK, RealtimeWatch

UDEVD = "/lib/systemd/systemd-udevd"

# The machines are shared and noisy: Hypothesis's timing checks (an example's deadline, input
# generation "too slow") fail on a loaded host though nothing is wrong; a test's own
# @settings still sets its examples. Every property keeps its examples, only the clock is off.
settings.register_profile(
    "shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shared-machine")


HEAVY_LIST = Path(__file__).with_name("heavy.txt")
GUEST_TIER = "tests/guest/"


def heavy_tests(text: str) -> set[str]:
    """The file::function entries of tests/heavy.txt (comments and blank lines left out)."""
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of tests/heavy.txt are marked `heavy` (`make check` deselects them); the guest
    tier's are marked `alone` (its QEMU runs at nice -10 and would starve the other worker's
    tests: docs/decisions.md, "Tests run on two workers"); long targets (`@pytest.mark.slow`)
    run only when asked for with `-m slow`."""
    heavy = heavy_tests(HEAVY_LIST.read_text())
    for item in items:
        if item.nodeid.split("[", 1)[0] in heavy:
            item.add_marker(pytest.mark.heavy)
        if item.nodeid.startswith(GUEST_TIER):
            item.add_marker(pytest.mark.alone)
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="long target: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


UDEVD_STARTED = pytest.StashKey[int | None]()


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """A test file to a worker at a time (as `--dist loadfile`), but the guest tier's files all
    to one worker: each file boots its own QEMU guest, and two at once on a 2-core machine
    starve the guests' drivers of their timeouts. Another `--dist` keeps xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByFileGuestsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:  # xdist's grouping hook (loadfile.py)
            return GUEST_TIER if nodeid.startswith(GUEST_TIER) else super()._split_scope(nodeid)

    return ByFileGuestsTogether(config, log)


RT_WATCH = pytest.StashKey[RealtimeWatch]()
_WATCHES: list[RealtimeWatch] = []  # the controlling process's one


def pytest_configure(config: pytest.Config) -> None:
    """With workers, the controlling process starts udevd (if none answers) before any of
    them, and stops it after all: two workers would race to start one, and the first to end
    would stop it under the other. The controlling process watches for a task spinning at
    real-time priority the whole run (tests/rt_watch.py)."""
    if hasattr(config, "workerinput"):
        return
    watch = RealtimeWatch(ignore=SELF_TEST_MARK)
    config.stash[RT_WATCH] = watch
    _WATCHES.append(watch)
    watch.start()
    if not config.getoption("numprocesses", None):
        return
    if os.geteuid() == 0 and os.path.exists(UDEVD) and shutil.which("udevadm"):
        config.stash[UDEVD_STARTED] = ensure_udevd()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The tests in progress, for the watch (xdist forwards every worker's reports)."""
    if not _WATCHES:
        return
    running = _WATCHES[0].running
    worker = getattr(getattr(report, "node", None), "gateway", None)
    key = getattr(worker, "id", "main")
    if report.when == "setup":
        running[key] = report.nodeid
    elif report.when == "teardown" and running.get(key) == report.nodeid:
        del running[key]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    watch = session.config.stash.get(RT_WATCH, None)
    if watch is None:
        return
    watch.stop()
    if watch.spins and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    watch = config.stash.get(RT_WATCH, None)
    if watch is not None and watch.spins:
        terminalreporter.section("a task spun at real-time priority (tests/rt_watch.py)")
        for line in watch.report():
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(UDEVD_STARTED, None)
    if started and not runtime.others_running(None):
        stop_udevd(started)


@pytest.fixture(scope="session")
def udevd() -> Iterator[None]:
    """Real udev events need udevd; start one for the session if none answers (the twin's own
    start and stop: a udevd on its way out is waited for, ours is stopped and waited for)."""
    if os.geteuid() != 0 or not os.path.exists(UDEVD) or not shutil.which("udevadm"):
        pytest.skip("needs root and systemd-udevd (Debian package udev)")
    started = ensure_udevd()
    subprocess.run(["udevadm", "settle", "--timeout=5"], check=False)
    try:
        yield
    finally:
        # a simulator of another session on this machine may still rely on it: leave it then
        if started and not runtime.others_running(None):
            stop_udevd(started)
