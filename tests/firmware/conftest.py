"""Fixtures for the firmware tests: build once, start a fresh twin per test, always stop it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.firmware.board_client import (
    AVR_ELF,
    BRIDGE_BINARY,
    FIRMWARE,
    HOST_BINARY,
    Client,
    Target,
    start,
)

TARGETS = ["host", "simavr"]


@pytest.fixture(scope="session")
def firmware_build() -> None:
    """Builds firmware/build/* with `make -C firmware all` if the toolchain is there."""
    if shutil.which("make") and shutil.which("avr-gcc"):
        result = subprocess.run(
            ["make", "-s", "-C", str(FIRMWARE), "all"], capture_output=True, text=True
        )
        if result.returncode != 0:
            pytest.fail(f"make -C firmware all failed:\n{result.stdout}{result.stderr}")


def _require(name: str) -> None:
    needed = [HOST_BINARY] if name == "host" else [AVR_ELF, BRIDGE_BINARY]
    missing = [str(path) for path in needed if not path.exists()]
    if missing:
        pytest.skip(f"firmware build output missing: {', '.join(missing)} (make -C firmware all)")


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, firmware_build: None) -> Iterator[Target]:
    _require(request.param)
    running = start(request.param)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def client(target: Target) -> Iterator[Client]:
    """A client whose board has booted; the BOOT line was read."""
    board = Client(target.pty)
    try:
        lines = board.drain(quiet=0.3)
        assert any(" BOOT " in line for line in lines), lines
        yield board
    finally:
        board.close()
