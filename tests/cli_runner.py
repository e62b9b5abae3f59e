"""Runs the production `rig` command in a child process, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def rig(
    *args: str, cwd: Path, timeout_s: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`env`: variables added to this process's environment for the child."""
    return subprocess.run(
        [sys.executable, "-m", "rig.interface.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout_s,
        check=False,
        env={**os.environ, **env} if env else None,
    )
