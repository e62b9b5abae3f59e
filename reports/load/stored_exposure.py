"""Each cut's exposure as a report reads it (rig/check/exposure.py): the stored column, or for a
store older than it, read without migrating, the migration's own recomputation from the cut's
ledger (rig/store/exposure_fill.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reports.load.cuts import CUT_STATUSES
from rig.check import exposure
from rig.store import StoreReader, exposure_fill


class StoredExposure:
    """Each cut's exposure as the store keeps it, or for a store older than `cycle.exposed`
    (read without migrating it) made from the cut's ledger by the migration's own rule
    (rig/store/exposure_fill.py), so a report reads the same exposure either way."""

    def __init__(self, db: StoreReader, has_ledger: bool, block_size: int, healthy: set[int]):
        self.db, self.block_size = db, block_size
        self.has_ledger = has_ledger and "exposed" not in db.columns("cycle")  # (older store)
        self.healthy, self.first = healthy, min(healthy, default=None)

    def of_chunk(self, columns: list[tuple[Any, ...]]) -> Sequence[str | None]:
        stored = list(columns[16])
        if not self.has_ledger:
            return stored
        rows = zip(columns[0], columns[1], columns[2], columns[10], columns[12], strict=True)
        for i, (cycle_id, seq, status, checked, unchecked) in enumerate(rows):
            if stored[i] is None and status in CUT_STATUSES:
                compared = seq in self.healthy and self.first is not None and self.first < seq
                found = exposure_fill.of_row(
                    status, columns[13][i], columns[17][i], checked, unchecked,
                    self.block_size, self.db.ledger_blob(cycle_id), compared,
                )  # fmt: skip
                stored[i] = exposure.to_text(found)
        return stored
