"""The AVR image's size check that CI runs (`make -C firmware test` runs `size`): it prints flash
and RAM use and fails above the ATmega328P's limits."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.power.twins import FIRMWARE


def _size(*overrides: str) -> subprocess.CompletedProcess[str]:
    if not shutil.which("avr-size"):
        pytest.skip("avr-size (binutils-avr) is not installed: make setup")
    return subprocess.run(
        ["make", "-s", "-C", str(FIRMWARE), "size", *overrides],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_size_prints_flash_and_ram_within_the_chip() -> None:
    result = _size()
    assert result.returncode == 0, result.stdout + result.stderr
    m = re.search(r"flash (\d+) / 32768 bytes .*RAM (\d+) / 2048 bytes", result.stdout)
    assert m, result.stdout
    flash, ram = int(m.group(1)), int(m.group(2))
    assert 1000 < flash <= 32768 and 100 < ram <= 2048


@pytest.mark.parametrize("limit", ["FLASH_LIMIT=1024", "RAM_LIMIT=64"])
def test_size_fails_above_the_limit(limit: str) -> None:
    result = _size(limit)
    assert result.returncode != 0
    assert "over the ATmega328P limits" in result.stdout
