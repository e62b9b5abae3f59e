"""Paths of the health tests' data (imported by conftest and the tests; unique module name)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _real_smartctl() -> Path:
    """$RIG_REAL_SMARTCTL (to try new captures), else the copy vendored in the repository, so a
    clean clone in CI always runs these tests (the copy's README gives its provenance)."""
    given = os.environ.get("RIG_REAL_SMARTCTL")
    return Path(given) if given else REPO / "fixtures" / "real-data" / "smartctl"


REAL_SMARTCTL = _real_smartctl()
FAKEBIN = REPO / "fixtures" / "fakebin"
RECORDED = REPO / "fixtures" / "recorded"


def real_file(name: str) -> Path:
    path = REAL_SMARTCTL / name
    if not path.exists():
        pytest.fail(f"real smartctl capture {name} not found under {REAL_SMARTCTL}")
    return path
