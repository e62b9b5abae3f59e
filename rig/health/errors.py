"""Typed failures of health tools.

Whether a failure is the rig's fault or the drive's is decided here only where it is certain:
a missing tool or a command line the tool rejects is a rig fault (`RigError`, never counted
against the drive). A timeout, an open failure or garbage output right after a power cut may be
the drive's doing; the campaign decides with what else it knows (bus presence, I/O probes).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from rig.errors import RigError

P = ParamSpec("P")
R = TypeVar("R")


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

    # True when a parser's last line of defence (`total_parser`) caught an untyped exception:
    # still a typed answer for the campaign, but a gap in the parser that a test must find.
    unexpected = False


# What a parser of untrusted text can raise when some input reaches a path it did not check.
PARSER_SLIPS = (
    ValueError,
    TypeError,
    ArithmeticError,
    LookupError,
    AttributeError,
    RecursionError,
    UnicodeError,
)


def total_parser(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make a parser total: its own typed errors pass, any slip becomes ToolOutputError.

    The parsers check every field they read, so this should never fire; if it does, the cycle
    still gets a typed health error (never an internal error), and the fuzz test, which fails
    on `unexpected`, points at the gap.
    """

    def wrap(parse: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(parse)
        def total(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return parse(*args, **kwargs)
            except HealthToolError:
                raise
            except PARSER_SLIPS as exc:
                error = ToolOutputError(
                    f"{what}: output in a shape the parser does not handle"
                    f" ({type(exc).__name__}: {str(exc)[:80]})"
                )
                error.unexpected = True
                raise error from exc

        return total

    return wrap
