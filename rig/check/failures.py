"""The finding classes as data: one row per class (docs/checker.md, "The class table").

Every layer that names a class reads it here: the checker (`rig.check.verify`) takes the constants
and resolves a block that several rules claim by `precedence`; the store derives a finding's
`failure` column from `failure`; `classes_setting` reads `[criteria].classes` against them;
reports list classes in table order; the fault scorer (tests/scoring.py) scores the failure classes
of block and cut scope. Adding a class is one row here, its rule in the checker and their tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rig.config.tables import Table
from rig.errors import UserError

Scope = Literal["block", "cut", "drive"]  # what one finding of the class is about

LOST_DURABLE = "lost_durable_write"
UNSERIALIZABLE = "unserializable_write"
SHORN = "shorn_write"
CORRUPTION = "bit_corruption"
FLYING = "flying_write"
COLLATERAL = "collateral_damage"
READ_ERROR = "read_error"
COUNTER_ANOMALY = "counter_anomaly"
DEAD = "dead_device"
HANG = "hang"
SLOW_READY = "slow_ready"
RESURRECTED = "resurrected_discard"
ALLOWED_LOSS = "allowed_loss"
UNCHECKED = "unchecked"
SURVIVED_ERASE = "survived_erase"


@dataclass(frozen=True)
class FindingClass:
    name: str
    failure: bool  # a failure of the drive; False: an allowed or informational outcome
    # lower wins: when several checker rules claim one block, the class of lowest precedence is
    # the block's class (docs/checker.md). Unique over the table, so the choice is always
    # defined; spaced by 10 so a new class slots in between without renumbering other rows.
    precedence: int
    scope: Scope
    summary: str


# Rows in the order reports list the classes (worst first); `precedence` is the checker's order.
TABLE = (
    FindingClass(
        LOST_DURABLE, True, 10, "block", "a write acknowledged and flushed (or FUA) did not survive"
    ),
    FindingClass(
        RESURRECTED,
        True,
        15,
        "block",
        "a discard acknowledged and flushed on a drive that promises zeroes read its old data",
    ),
    FindingClass(
        UNSERIALIZABLE, True, 70, "cut", "a durable write lost while a later-issued write survived"
    ),
    FindingClass(SHORN, True, 50, "block", "a block (or atomic unit) holds parts of two writes"),
    FindingClass(CORRUPTION, True, 20, "block", "a sector this cycle wrote fails its checksum"),
    FindingClass(FLYING, True, 40, "block", "data where it was never written"),
    FindingClass(
        COLLATERAL, True, 30, "block", "a block this cycle did not write lost or damaged its data"
    ),
    FindingClass(
        READ_ERROR, True, 60, "block", "unreadable, or zeros where data was committed (unmapped)"
    ),
    FindingClass(
        COUNTER_ANOMALY, True, 100, "drive", "a health counter moved wrongly (rig/health/delta.py)"
    ),
    FindingClass(
        SLOW_READY, True, 102, "drive", "ready after power-on later than the drive's own timeout"
    ),
    FindingClass(DEAD, True, 110, "drive", "the drive did not come back, or cannot be used"),
    FindingClass(
        HANG, True, 105, "drive", "on the bus but answering nothing until power-cycled (a sag)"
    ),
    FindingClass(
        SURVIVED_ERASE, True, 33, "block", "data from before a completed sanitize or format reads"
    ),
    FindingClass(
        ALLOWED_LOSS, False, 80, "block", "a non-durable write lost whole per unit: allowed"
    ),
    FindingClass(
        UNCHECKED, False, 90, "block", "meant to be read, left unread by a read budget: counted"
    ),
)

_BY_NAME = {row.name: row for row in TABLE}


def row(name: str) -> FindingClass:
    """The table row of a class; KeyError for a name the table does not hold."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown finding class {name!r} (rig/check/failures.py)") from None


def known(name: str) -> bool:
    return name in _BY_NAME


def is_failure(name: str) -> bool:
    return row(name).failure


def names(scope: Scope | None = None) -> tuple[str, ...]:
    """Every class (of `scope`, if given), in table order."""
    return tuple(r.name for r in TABLE if scope is None or r.scope == scope)


def failure_names(*scopes: Scope) -> tuple[str, ...]:
    """The failure classes (of these scopes, if given), in table order."""
    return tuple(r.name for r in TABLE if r.failure and (not scopes or r.scope in scopes))


def ordered(present: Iterable[str]) -> list[str]:
    """Class names in table order; names the table does not hold (a store from another rig
    version) follow, sorted."""
    present = set(present)
    return [n for n in names() if n in present] + sorted(present - set(_BY_NAME))


def by_precedence(classes: Iterable[str]) -> list[str]:
    """Classes strongest first: the checker applies them in this order."""
    return sorted(classes, key=lambda name: row(name).precedence)


# The classes that destroy data the host was promised, or the drive itself: one occurrence fails.
# rig.config.criteria.Criteria.zero_tolerance holds the same default (tests/check/test_failures.py).
ZERO_TOLERANCE = (LOST_DURABLE, FLYING, CORRUPTION, DEAD)


def zero_tolerance_setting(criteria_t: Table) -> tuple[str, ...]:
    """[criteria].zero_tolerance: failure classes whose first occurrence decides FAIL."""
    chosen = criteria_t.get("zero_tolerance", list, list(ZERO_TOLERANCE))
    for cls in chosen:
        if not isinstance(cls, str) or cls not in failure_names():
            raise UserError(
                f"campaign: [criteria].zero_tolerance: '{cls}' is not a failure class"
                f" ({', '.join(failure_names())})"
            )
    return tuple(chosen)


def classes_setting(criteria_t: Table) -> tuple[str, ...]:
    """[criteria].classes: failure classes that count (empty = every failure class)."""
    classes = criteria_t.get("classes", list, [])
    for cls in classes:
        if cls not in failure_names():
            raise UserError(
                f"campaign: [criteria].classes: '{cls}' is not a failure class"
                f" ({', '.join(failure_names())})"
            )
    return tuple(classes)
