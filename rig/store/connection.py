"""The store's one SQLite connection: opening (and migrating), write transactions, queued events,
reads. Every area of the store (rig/store/*.py) is a mixin over this class, sharing its connection.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rig.errors import UserError
from rig.store.schema import SCHEMA_VERSION, migrate


class StoreConnection:
    """One SQLite file. Thread-safe: one connection guarded by a lock (writes are batched)."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        """`read_only`: a reader beside the rig that writes the store (the dashboard): it never
        migrates or writes, and refuses a store newer than this rig."""
        self.path = path
        self.read_only = read_only
        try:
            if read_only:
                uri = f"file:{os.path.abspath(path)}?mode=ro"
                self._db = sqlite3.connect(
                    uri, uri=True, check_same_thread=False, isolation_level=None
                )
            else:
                self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as error:
            raise UserError(f"{path}: not a rig store ({error})") from error
        self._lock = threading.Lock()
        self._queued_events: list[tuple[int | None, int, str, str]] = []
        self._queue_lock = threading.Lock()  # never held across SQLite work
        if read_only:
            if version != SCHEMA_VERSION:
                self._db.close()
                raise UserError(
                    f"{path}: store has schema v{version}; this rig reads v{SCHEMA_VERSION}"
                )
            return
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        migrate(self._db)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; events queued by `queue_event` are written in it too."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._write_queued_events()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def queue_event(
        self, drive_id: int | None, host_ns: int, kind: str, detail: dict[str, Any]
    ) -> None:
        """Record an event without waiting for SQLite (for callbacks on time-critical threads,
        such as the relay board's heartbeat); it is written with the next transaction."""
        with self._queue_lock:
            self._queued_events.append(
                (drive_id, host_ns, kind, json.dumps(detail, sort_keys=True))
            )

    def _write_queued_events(self) -> None:
        with self._queue_lock:
            queued, self._queued_events = self._queued_events, []
        self._db.executemany(
            "INSERT INTO event (drive_id, host_ns, kind, detail) VALUES (?,?,?,?)", queued
        )

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            self._db.row_factory = sqlite3.Row
            try:
                return list(self._db.execute(sql, args))
            finally:
                self._db.row_factory = None

    def close(self) -> None:
        if not self.read_only:
            with self.transaction():
                pass  # writes what is still queued
            self._leave_wal()
        with self._lock:
            self._db.close()

    def _leave_wal(self) -> None:
        """Back to a rollback journal when the writer is done: the WAL is checkpointed and its
        -wal and -shm files removed, and a later read-only reader (`rig report`, `rig status`)
        meets a plain file, where a WAL store makes every reader create -wal and -shm that it
        cannot remove. A reader still attached keeps the store in WAL (the change needs the
        file alone); the next writer turns WAL on again."""
        with self._lock, contextlib.suppress(sqlite3.OperationalError):  # busy: a reader
            self._db.execute("PRAGMA busy_timeout = 200")  # not the 5 s a write waits
            self._db.execute("PRAGMA journal_mode=DELETE")


def save_lba_state(db: sqlite3.Connection, drive_id: int, after_cycle: int, state: bytes) -> None:
    db.execute(
        "INSERT OR REPLACE INTO lba_state (drive_id, after_cycle, state) VALUES (?,?,?)",
        (drive_id, after_cycle, state),
    )
