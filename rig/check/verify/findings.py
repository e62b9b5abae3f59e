"""The checker's findings: one classified block range (or whole-drive finding) per row, and the
result of one check (docs/architecture.md, "The checker's contract"). Built by
rig/check/verify/reads.py and rig/check/verify/rules.py; callers use them as
`rig.check.verify.Finding` / `rig.check.verify.CheckResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rig.check import failures

NO_OP = -1


@dataclass(frozen=True)
class Finding:
    cls: str
    lba_first: int
    lba_count: int
    expected_gen: int
    observed_gen: int
    expected_op: int = NO_OP  # op_seq of the write that should be there (this cycle's writes)
    observed_op: int = NO_OP  # op_seq found in the block's headers
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # KeyError for a class the table (rig/check/failures.py) does not hold
        failures.row(self.cls)

    @property
    def failure(self) -> bool:
        return failures.is_failure(self.cls)


def drive_finding(cls: str, detail: dict[str, Any]) -> Finding:
    """A finding about the whole drive, not a block range (dead, a health counter that moved
    wrongly, metadata lost at the bus): the one place such findings are built outside the
    checker's block rules. No LBAs, no generations."""
    return Finding(
        cls=cls, lba_first=0, lba_count=0, expected_gen=-1, observed_gen=-1, detail=detail
    )


@dataclass(frozen=True)
class CheckResult:
    findings: list[Finding]
    blocks_checked: int  # read back and judged
    nondurable_writes: int
    nondurable_survived: int
    blocks_unchecked: int = 0  # meant to be read, left unread by a read budget (not a failure)
    unchecked: list[Finding] = field(default_factory=list)  # where (class UNCHECKED), apart
