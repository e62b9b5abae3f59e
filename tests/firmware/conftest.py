"""Fixtures for the firmware tests: a fresh firmware twin per test (host build or the AVR image
in simavr, from tests/power) with the production driver open on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rig.power.relay import RelayBoard
from tests.power.conftest import firmware_built, twin  # noqa: F401  (fixtures used here)
from tests.power.twins import Twin


@pytest.fixture
def board(twin: Twin) -> Iterator[RelayBoard]:  # noqa: F811
    """The production driver on a freshly booted twin, the board's own settings untouched."""
    driver = RelayBoard(twin.pty)
    try:
        yield driver
    finally:
        driver.close()
