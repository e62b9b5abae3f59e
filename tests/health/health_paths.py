"""Paths of the health tests' data (imported by conftest and the tests; unique module name)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REAL_SMARTCTL = REPO.parent / "shared" / "real-data" / "smartctl"
FAKEBIN = REPO / "fixtures" / "fakebin"
RECORDED = REPO / "fixtures" / "recorded"


def real_file(name: str) -> Path:
    path = REAL_SMARTCTL / name
    if not path.exists():
        pytest.skip(f"real smartctl capture {name} not found under {REAL_SMARTCTL}")
    return path
