"""Shared test fixtures: a running udevd (started here only if none runs, stopped after)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

UDEVD = "/lib/systemd/systemd-udevd"


def _udevd_pids() -> set[int]:
    found = subprocess.run(
        ["pgrep", "-x", "systemd-udevd"], capture_output=True, text=True, check=False
    )
    return {int(pid) for pid in found.stdout.split()}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long targets (`@pytest.mark.slow`) run only when asked for with `-m slow`."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="long target: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def udevd() -> Iterator[None]:
    """Real udev events need udevd; start one for the session if the machine has none."""
    if os.geteuid() != 0 or not os.path.exists(UDEVD) or not shutil.which("udevadm"):
        pytest.skip("needs root and systemd-udevd (Debian package udev)")
    before = _udevd_pids()
    started: set[int] = set()
    if not before:
        subprocess.run([UDEVD, "--daemon"], check=True, capture_output=True)
        deadline = time.monotonic() + 5
        while not (started := _udevd_pids() - before) and time.monotonic() < deadline:
            time.sleep(0.05)
    subprocess.run(["udevadm", "settle", "--timeout=5"], check=False)
    try:
        yield
    finally:
        for pid in started:
            os.kill(pid, signal.SIGTERM)
