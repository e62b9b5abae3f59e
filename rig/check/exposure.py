"""Which failure classes a cut could have shown: its *exposure* (docs/checker.md, "Exposure").

A verdict is a claim about a rate over trials, and a cut is a trial of a class only where the
class could have appeared at it: a cut with no durable write read back cannot lose one. Each
rule below reads the ledger (what was written, acknowledged and made durable) and what the
check read; a class without a rule here (a class added later) counts every cut, as before
exposure was kept. Pure, no I/O: the cut cycle, the store's backfill and the tests call it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rig.check import failures
from rig.io.ledger import CycleLog, Durability

SECTOR = 512  # a tear shows at a sector boundary (docs/record-format.md: a header per sector)
ALWAYS = frozenset({failures.DEAD, failures.HANG})  # every cut can leave a drive dead or hung


@dataclass(frozen=True)
class Reading:
    """What the check of one cut read: blocks read back and judged, those of them this cycle
    did not write (old data, or never-written blocks of the sample), and the LBA ranges it
    meant to read and left unread (a spent read budget)."""

    blocks_checked: int
    old_blocks_read: int
    unread: tuple[tuple[int, int], ...] = field(default_factory=tuple)  # (first LBA, count)


def _read_back(
    first: npt.NDArray[np.int64], count: npt.NDArray[np.int64], unread: Iterable[tuple[int, int]]
) -> npt.NDArray[np.bool_]:
    """Per write: whether some of its blocks were read back (not wholly inside unread ranges)."""
    whole_unread = np.zeros(len(first), dtype=bool)
    for lo, n in unread:
        whole_unread |= (first >= lo) & (first + count <= lo + n)
    return ~whole_unread


def exposed(
    log: CycleLog,
    durability: Durability,
    reading: Reading,
    block_size: int,
    health_compared: bool,
    zeroes: bool = False,
) -> frozenset[str]:
    """The failure classes this cut was a trial of (docs/checker.md, "Exposure")."""
    out = set(ALWAYS)
    if reading.blocks_checked > 0:
        out.add(failures.READ_ERROR)
        out.add(failures.CORRUPTION)
    if health_compared:
        out.add(failures.COUNTER_ANOMALY)
    first, count = log.column("first_lba"), log.column("nblocks")
    read = _read_back(first, count, reading.unread)
    if not reading.blocks_checked:
        read[:] = False
    durable = durability.durable & read
    if zeroes and (durable & (log.column("discard") == 1)).any():
        out.add(failures.RESURRECTED)  # a durable discard read back, on a drive promising zeroes
    if durable.any():
        out.add(failures.LOST_DURABLE)
        # an ordering the survivors could contradict: a write issued after a durable write's
        # completion, read back too (if it survives while the durable one is lost)
        done = log.column("complete_ns")[durable]
        issued_after = log.column("issue_ns")[read]
        if len(done) and len(issued_after) and int(issued_after.max()) > int(done.min()):
            out.add(failures.UNSERIALIZABLE)
    # a write not durable at the cut (in flight, failed by the cut, or acknowledged and not yet
    # flushed), wider than a sector: it may survive in part, and a part inside a unit is a tear
    if (read & ~durability.durable & (count * block_size > SECTOR)).any():
        out.add(failures.SHORN)
    if reading.old_blocks_read > 0:
        out.add(failures.COLLATERAL)
        if log.write_count:
            out.add(failures.FLYING)  # a write of this cycle could have landed there
    return frozenset(out)


def of_dead_cut() -> frozenset[str]:
    """A cut whose drive did not come back: nothing read, only the drive-scope classes."""
    return ALWAYS


RULED = frozenset(
    {
        failures.LOST_DURABLE,
        failures.UNSERIALIZABLE,
        failures.SHORN,
        failures.CORRUPTION,
        failures.FLYING,
        failures.COLLATERAL,
        failures.READ_ERROR,
        failures.COUNTER_ANOMALY,
        failures.DEAD,
        failures.HANG,
        failures.SLOW_READY,
        failures.SURVIVED_ERASE,
        failures.RESURRECTED,
    }
)


def of_erase_check(region_read: bool) -> frozenset[str]:
    """A cut during a format or sanitize: the drive-scope classes, and an erase whose promise
    was checked by reading the whole region (rig/campaign/cutcycle/maintenance.py `judge`)."""
    return ALWAYS | {failures.SURVIVED_ERASE} if region_read else ALWAYS


# Classes no rig before the exposure records could find: a cut of unknown exposure (an older
# store's) was no trial of them.
JUDGED_SINCE_EXPOSURE = frozenset(
    {failures.SLOW_READY, failures.SURVIVED_ERASE, failures.RESURRECTED}
)


def is_exposed(exposure: frozenset[str] | None, cls: str) -> bool | None:
    """Whether a cut of `exposure` (None: not known, a store older than exposure) was a trial
    of `cls`; None where that is not known."""
    if cls not in RULED:
        return True
    if exposure is None:
        return False if cls in JUDGED_SINCE_EXPOSURE else None
    return cls in exposure


def to_text(exposure: frozenset[str] | None) -> str | None:
    """As the store keeps it (docs/schema.md, `cycle.exposed`): the class names in table order,
    comma-separated; '' exposed to nothing; NULL not known."""
    return None if exposure is None else ",".join(failures.ordered(exposure))


def from_text(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    return frozenset(t for t in text.split(",") if t)
