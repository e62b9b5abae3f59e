"""SQLite store: everything a report needs, on the host disk (never on a drive under test).

WAL mode, one transaction per cycle's record phase (batched), versioned migrations tracked in
`PRAGMA user_version`. The per-write ledger is stored compactly as columnar numpy blobs per cycle;
campaigns, drives, cycles, findings and events are ordinary rows. Schema: docs/schema.md.

A package of one module per area (connection, schema, rows, recording, campaign, replication,
summary; totals and cycle_sums: the summaries kept as cycles are recorded; reader: reports over
stores of any version); the public names are re-exported here, and
this file imports nothing of rig outside rig.store (no import cycles).
"""

from rig.store.reader import StoreReader
from rig.store.rows import CycleRow, IntervalRow, RailSenseRow
from rig.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate, new_media_id
from rig.store.store import Store, open_existing, open_read_only
from rig.store.totals import lost_after_ms

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "CycleRow",
    "IntervalRow",
    "RailSenseRow",
    "Store",
    "StoreReader",
    "lost_after_ms",
    "migrate",
    "new_media_id",
    "open_existing",
    "open_read_only",
]
