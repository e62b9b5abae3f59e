"""Shared fixture: fake tools on PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from health_paths import FAKEBIN, RECORDED

from rig.health.tools import ToolRunner


@pytest.fixture
def fake_tools(monkeypatch: pytest.MonkeyPatch) -> ToolRunner:
    """Only the fakes and the venv's python3 (the fakes' interpreter) on PATH: the real
    smartctl/sg3_utils in /usr/sbin and /usr/bin can never be reached from a test."""
    for key in list(os.environ):
        if key.startswith("FAKE_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", f"{FAKEBIN}{os.pathsep}{Path(sys.executable).parent}")
    monkeypatch.setenv("FAKE_RECORDED_DIR", str(RECORDED))
    return ToolRunner(timeout_s=10.0)
