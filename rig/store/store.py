"""The Store: one SQLite file on the host disk (never on a drive under test), composed of one
mixin per area, all sharing the connection of `StoreConnection` (docs/decisions.md, "The store
is one class composed of mixins per area")."""

from __future__ import annotations

import os

from rig.errors import UserError
from rig.store.campaign import CampaignRows
from rig.store.metrics import MetricReads
from rig.store.recording import RecordWrites
from rig.store.replication import ReplicationReads
from rig.store.summary import SummaryReads


class Store(RecordWrites, CampaignRows, ReplicationReads, SummaryReads, MetricReads):
    """One SQLite file. Thread-safe: one connection guarded by a lock (writes are batched)."""


def open_existing(path: str) -> Store:
    """Open a store that must already exist, to write to it (`rig run --resume`): an older one
    is upgraded."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such store")
    return Store(path)


def open_read_only(path: str) -> Store:
    """Open a store that must already exist, only to read it (status, replication): never
    created, upgraded or written; a file that is not a store of this rig's version is refused
    and left as it was."""
    return Store(path, read_only=True)
