"""Fixtures for the relay board driver tests: build the firmware twins once, start a fresh twin
per test and always stop it (by PID, in `finally`)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.power.twins import AVR_ELF, BRIDGE_BINARY, FIRMWARE, HOST_BINARY, Twin

TWINS = ["host", "simavr"]


@pytest.fixture(scope="session")
def firmware_built() -> str:
    """`make -C firmware all`; returns its output. A failed build is tolerated only when the
    binaries are there already (the firmware may be mid-edit in a parallel checkout user)."""
    if not (FIRMWARE / "Makefile").exists():
        pytest.skip("firmware/Makefile is not there yet: no firmware twin to test against")
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    result = subprocess.run(
        ["make", "-s", "-C", str(FIRMWARE), "all"], capture_output=True, text=True, timeout=600
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def _require(kind: str, build_output: str) -> None:
    needed = [HOST_BINARY] if kind == "host" else [AVR_ELF, BRIDGE_BINARY]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        if kind == "simavr":
            pytest.skip(f"simavr twin not built ({', '.join(missing)}): {build_output[-500:]}")
        pytest.fail(f"make -C firmware all did not build {missing}:\n{build_output}")


@pytest.fixture(params=TWINS)
def twin(request: pytest.FixtureRequest, firmware_built: str) -> Iterator[Twin]:
    _require(request.param, firmware_built)
    running = Twin(request.param)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def host_twin(firmware_built: str) -> Iterator[Twin]:
    _require("host", firmware_built)
    running = Twin("host")
    try:
        yield running
    finally:
        running.stop()
