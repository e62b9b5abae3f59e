"""Typed failures of health tools.

Whether a failure is the rig's fault or the drive's is decided here only where it is certain:
a missing tool or a command line the tool rejects is a rig fault (`RigError`, never counted
against the drive). A timeout, an open failure or garbage output right after a power cut may be
the drive's doing; the campaign decides with what else it knows (bus presence, I/O probes).
"""

from __future__ import annotations

from collections.abc import Sequence

from rig.errors import RigError


class HealthToolError(Exception):
    """A health tool did not give a usable answer."""

    def __init__(self, message: str, argv: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.argv = tuple(argv)


class ToolMissing(HealthToolError, RigError):
    """The executable is not installed (not on PATH): a set-up fault of the host."""


class ToolTimeout(HealthToolError):
    """The tool did not finish in time and was killed."""

    def __init__(self, message: str, argv: Sequence[str], timeout_s: float) -> None:
        super().__init__(message, argv)
        self.timeout_s = timeout_s


class ToolFailed(HealthToolError):
    """The tool ran and reported failure through its exit status."""

    def __init__(self, message: str, argv: Sequence[str], exit_code: int, stderr: str) -> None:
        super().__init__(message, argv)
        self.exit_code = exit_code
        self.stderr = stderr


class ToolUsageError(ToolFailed, RigError):
    """The tool rejected our command line: a bug or version skew in the rig, not the drive."""


class ToolOutputError(HealthToolError):
    """The tool's output is garbage, truncated, or not in the expected shape."""
