"""Ships a station's finished cycles from its SQLite store to the central database.

The central database itself says how far each campaign got (the largest store row id of its
cycles, health and endurance rows: `CentralStore.cursors`), so the replicator keeps no state of its
own: after a network loss, a restart or a `kill -9` it asks again and goes on from there. Each step
ships the next cycles in the order the store recorded them, each with its findings, events, rail
sense (and ledger, if asked) in the same transaction, and inserts are keyed by natural keys
(station, campaign media id, channel, seq), so a step repeated after a lost commit changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import zlib
from dataclasses import dataclass
from typing import Any

from rig.check.failures import LOST_DURABLE
from rig.errors import UserError
from rig.interface.fleet.central import (
    CYCLE_COLUMNS,
    FINDING_COLUMNS,
    RAIL_COLUMNS,
    CentralStore,
    ReplicationBatch,
)
from rig.store import Store
from rig.store.totals import CycleTotals

log = logging.getLogger("rig.interface.fleet.replicator")
BATCH_CYCLES = 500


@dataclass
class StoreSource:
    """One station store to replicate, and the submission it ran for (None: run by hand)."""

    path: str
    submission_id: int | None = None


def _campaign_row(row: Any, submission_id: int | None) -> dict[str, Any]:
    return {
        "uid": int(row["media_id"]),
        "submission_id": submission_id,
        "local_id": row["id"],
        "name": row["name"],
        "config": row["config"],
        "seed": row["seed"],
        "board": row["station"],
        "started_at": row["started_at"],
        "ended_at": row["ended_at"],
        "status": row["status"],
        "criteria": row["criteria"],
        "resumes": row["resumes"],
    }


def _drive_row(uid: int, row: Any) -> dict[str, Any]:
    keys = ("channel", "model", "serial", "wwn", "firmware", "size_bytes", "block_size")
    more = ("region_first_lba", "region_blocks", "profile", "status")
    return {"campaign_uid": uid, **{k: row[k] for k in (*keys, *more)}}


def next_batch(
    store: Store,
    central: CentralStore,
    station: str,
    submission_id: int | None,
    *,
    ledgers: bool = False,
    limit: int = BATCH_CYCLES,
) -> ReplicationBatch:
    """The next rows of `store` that the central database does not hold yet."""
    batch = ReplicationBatch([], [], [], [], [], [], [], [], [])
    uids: dict[int, int] = {}
    for row in store.campaigns():
        uid = int(row["media_id"])
        uids[row["id"]] = uid
        batch.campaigns.append(_campaign_row(row, submission_id))
        batch.drives += [_drive_row(uid, d) for d in store.drives_of(row["id"])]
        cursors = central.cursors(station, uid)
        cycles = store.cycles_after(row["id"], cursors.cycle, limit)
        seq_of: dict[int, tuple[int, int]] = {}
        for c in cycles:
            seq_of[c["id"]] = (c["channel"], c["seq"])
            batch.cycles.append(
                (uid, c["channel"], c["seq"], c["id"], *(c[k] for k in CYCLE_COLUMNS))
            )
        ids = list(seq_of)
        ordinal: dict[int, int] = {}
        shares: dict[int, CycleTotals] = {}
        for f in store.findings_of_cycles(ids):
            n = ordinal[f["cycle_id"]] = ordinal.get(f["cycle_id"], -1) + 1
            channel, seq = seq_of[f["cycle_id"]]
            batch.findings.append((uid, channel, seq, n, *(f[k] for k in FINDING_COLUMNS)))
            share = shares.get(f["cycle_id"]) or shares.setdefault(f["cycle_id"], CycleTotals())
            add_share(share, f)
        for cycle_id, share in shares.items():
            add_summaries(batch, (uid, *seq_of[cycle_id]), share)
        for e in store.cycle_events_of(ids):
            channel, seq = seq_of[e["cycle_id"]]
            batch.events.append((uid, e["id"], channel, seq, e["host_ns"], e["kind"], e["detail"]))
        for r in store.rail_sense_of(ids):
            channel, seq = seq_of[r["cycle_id"]]
            batch.rail.append((uid, channel, seq, *(r[k] for k in RAIL_COLUMNS)))
        if ledgers:
            for led in store.ledgers_of(ids):
                channel, seq = seq_of[led["cycle_id"]]
                batch.ledgers.append((uid, channel, seq, led["writes"]))
        for h in store.health_after(row["id"], cursors.health, limit):
            batch.health.append(
                (
                    uid,
                    h["channel"],
                    h["after_seq"],
                    h["id"],
                    h["host_ns"],
                    h["source"],
                    h["fields"],
                    h["raw"],
                )
            )
        for i in store.endurance_after(row["id"], cursors.endurance, limit):
            record = {k: i[k] for k in i.keys() if k not in ("channel", "drive_id")}  # noqa: SIM118
            batch.endurance.append(
                (uid, i["channel"], i["seq"], i["id"], json.dumps(record, sort_keys=True))
            )
    if uids:
        # events of no cycle: a station-wide one (no drive) belongs to the store's last campaign
        after = central.loose_event_cursor(station, list(uids.values()))
        last_uid = uids[max(uids)]
        for e in store.loose_events_after(after, limit * 4):
            uid = uids.get(e["campaign_id"], last_uid) if e["campaign_id"] else last_uid
            batch.events.append(
                (uid, e["id"], e["channel"], None, e["host_ns"], e["kind"], e["detail"])
            )
    return batch


def add_share(share: CycleTotals, finding: Any) -> None:
    """A finding row's share of its cycle's summaries, by the code that adds it to the
    station's own (`record_cycle`): only a lost durable write's detail is parsed."""
    ack = flush = None
    if finding["failure"] and finding["class"] == LOST_DURABLE:
        try:
            detail = json.loads(finding["detail"])
        except (TypeError, ValueError):
            detail = None
        if isinstance(detail, dict):
            ack, flush = detail.get("ack_to_cut_ns"), detail.get("flush_to_cut_ns")
    share.add(finding["class"], finding["failure"], finding["lba_count"], ack, flush)


def add_summaries(batch: ReplicationBatch, key: tuple[int, int, int], share: CycleTotals) -> None:
    """A cycle's summary rows (`key`: campaign uid, channel, seq) into the batch."""
    for (cls, failure), n in share.totals.items():
        batch.totals.append((*key, cls, failure, n, share.blocks[cls, failure]))
    for (since, ms), n in share.lost.items():
        batch.lost.append((*key, since, ms, n))


def replicate_store(
    store: Store,
    central: CentralStore,
    station: str,
    submission_id: int | None = None,
    *,
    ledgers: bool = False,
) -> int:
    """Ship everything `store` holds that the central database lacks; returns the cycles
    shipped. Each batch commits on its own, so an interruption loses at most the batch."""
    shipped = 0
    while True:
        batch = next_batch(store, central, station, submission_id, ledgers=ledgers)
        central.ship(station, batch)
        shipped += len(batch.cycles)
        if len(batch.cycles) < BATCH_CYCLES:
            return shipped


def health_raw(blob: bytes) -> str:
    """A replicated health row's original tool output (kept compressed, as in the store)."""
    return zlib.decompress(blob).decode()


class OpenStores:
    """The stores a replicator reads, each opened read-only: it never creates or migrates one
    (`rig run` does), and a store that is not whole at this rig's version is skipped until it
    is. A path whose file was replaced (a campaign started afresh) is opened again."""

    def __init__(self) -> None:
        self.stores: dict[str, tuple[Store, tuple[int, int]]] = {}
        self.skipped: dict[str, str] = {}

    def open(self, path: str) -> Store | None:
        try:
            info = os.stat(path)
        except OSError:
            self.forget(path)
            return None
        identity = (info.st_dev, info.st_ino)
        held = self.stores.get(path)
        if held is not None and held[1] == identity:
            return held[0]
        self.forget(path)
        try:
            store = Store(path, read_only=True)
        except UserError as error:
            if self.skipped.get(path) != str(error):
                log.info("not replicated yet: %s", error)
                self.skipped[path] = str(error)
            return None
        self.skipped.pop(path, None)
        self.stores[path] = (store, identity)
        return store

    def forget(self, path: str) -> None:
        held = self.stores.pop(path, None)
        if held is not None:
            held[0].close()

    def close(self) -> None:
        for path in list(self.stores):
            self.forget(path)


class ReplicatorLoop:
    """Replicates a set of stores every `interval_s` until stopped; a failure (the link is down,
    the server restarts) is logged and the next round starts over from the central cursors."""

    def __init__(
        self,
        dsn: str,
        station: str,
        sources: Any,  # () -> list[StoreSource]: the stores to ship, asked each round
        *,
        interval_s: float = 1.0,
        ledgers: bool = False,
    ) -> None:
        self.dsn, self.station, self.sources = dsn, station, sources
        self.interval_s, self.ledgers = interval_s, ledgers
        self.stop = threading.Event()
        self.connected = False
        self.last_error = ""
        self.shipped = 0

    def run(self) -> None:
        central: CentralStore | None = None
        stores = OpenStores()  # kept open: opening a store is not free
        while not self.stop.is_set():
            try:
                if central is None:
                    central = CentralStore(self.dsn)
                for source in self.sources():
                    store = stores.open(source.path)
                    if store is None:
                        continue  # not a whole store yet: the next round looks again
                    self.shipped += replicate_store(
                        store,
                        central,
                        self.station,
                        source.submission_id,
                        ledgers=self.ledgers,
                    )
                self.connected, self.last_error = True, ""
            except Exception as error:  # the link, the server: retry from the cursors
                first = (str(error).strip().splitlines() or [""])[0]
                if self.connected or type(error).__name__ != self.last_error:
                    log.warning("replication paused: %s: %s", type(error).__name__, first)
                self.connected, self.last_error = False, type(error).__name__
                if central is not None:
                    with contextlib.suppress(Exception):
                        central.close()
                    central = None
            self.stop.wait(self.interval_s)
        if central is not None:
            central.close()
        stores.close()
