"""Paths of the health tests' data (imported by conftest and the tests; unique module name)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _real_smartctl() -> Path:
    """$RIG_REAL_SMARTCTL, else `shared/real-data/smartctl` beside the repository or beside
    any folder above it (a git worktree may sit deeper than the main clone)."""
    given = os.environ.get("RIG_REAL_SMARTCTL")
    if given:
        return Path(given)
    for folder in REPO.parents:
        candidate = folder / "shared" / "real-data" / "smartctl"
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared" / "real-data" / "smartctl"


REAL_SMARTCTL = _real_smartctl()
FAKEBIN = REPO / "fixtures" / "fakebin"
RECORDED = REPO / "fixtures" / "recorded"


def real_file(name: str) -> Path:
    path = REAL_SMARTCTL / name
    if not path.exists():
        pytest.skip(f"real smartctl capture {name} not found under {REAL_SMARTCTL}")
    return path
