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
from rig.store import creation
from rig.store.schema import SCHEMA_VERSION, migrate


class StoreConnection:
    """One SQLite file. Thread-safe: one connection guarded by a lock (writes are batched)."""

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        """`read_only`: a reader beside the rig that writes the store (status, the dashboard,
        the fleet's replicator): it never creates, migrates or writes, and refuses a store of
        another version. A writer creates a store that does not exist yet, whole and at once
        (rig/store/creation.py), and migrates an older one under SQLite's write lock."""
        self.path = path
        self.read_only = read_only
        made = False
        if not read_only and not os.path.exists(path):
            # or another opener's, linked a moment before: either is whole
            made = creation.create(path)
        self._db = _connect(path, read_only)
        self._lock = threading.Lock()
        # WAL from the first write on, not at opening (docs/decisions.md, "Readers never write;
        # a writer touches the file only when it writes"): an opener refused after
        # it opened (a resume that cannot go on) leaves the file's bytes as they were (a store
        # this opener made is in WAL already: `close` leaves it)
        self._in_wal = made
        self._queued_events: list[tuple[int | None, int, str, str]] = []
        self._queue_lock = threading.Lock()  # never held across SQLite work
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:  # a store is created whole: this file was never one of ours
                raise UserError(f"{path}: not a rig store (an empty file or another database)")
            if read_only and version != SCHEMA_VERSION:
                raise UserError(
                    f"{path}: store has schema v{version}; this rig reads v{SCHEMA_VERSION}"
                    " here without upgrading it (rig report reads older stores)"
                )
            if version > SCHEMA_VERSION:  # refused before any pragma that writes the file
                raise UserError(
                    f"{path}: store has schema v{version}, newer than this rig"
                    f" (v{SCHEMA_VERSION}); left as it was"
                )
            if not read_only:
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA foreign_keys=ON")
                if version < SCHEMA_VERSION:  # an upgrade writes now: WAL first, so a killed
                    self._wal()  # upgrade leaves the file whole
                    migrate(self._db)  # under BEGIN IMMEDIATE: one opener upgrades, others wait
        except sqlite3.DatabaseError as error:
            self._db.close()
            if "locked" in str(error):
                raise UserError(
                    f"{path}: store is busy: another process holds it ({error})"
                ) from error
            raise UserError(f"{path}: not a rig store ({error})") from error
        except BaseException:
            self._db.close()
            raise

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; events queued by `queue_event` are written in it too."""
        with self._lock:
            if not self._in_wal:
                self._wal()
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

    def _wal(self) -> None:
        _enter_wal(self._db)
        self._in_wal = True

    def close(self) -> None:
        if not self.read_only:
            with self._queue_lock:
                queued = bool(self._queued_events)
            if queued or self._in_wal:
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


def _enter_wal(db: sqlite3.Connection) -> None:
    """WAL for the writer's session (`close` leaves it). An upgrade's pages then
    go to the -wal, never into the file: a process killed mid-migration leaves the older version
    whole, which a read-only reader (`rig report`) reads as it was, where a hot rollback journal
    would first need a writer to roll it back. A reader still attached in rollback mode keeps
    the store there (busy): the writer goes on without WAL."""
    timeout = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout = 200")  # (a reader mid-query: do not wait the 5 s for it)
    with contextlib.suppress(sqlite3.OperationalError):
        db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def _connect(path: str, read_only: bool) -> sqlite3.Connection:
    """The connection, or a refusal naming why SQLite could not open the file."""
    if read_only:
        return creation.connect_read_only(path, check_same_thread=False, isolation_level=None)
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # reads the header
    except sqlite3.Error as error:
        raise creation.open_failure(path, error, write=True) from error
    return db


def save_lba_state(db: sqlite3.Connection, drive_id: int, after_cycle: int, state: bytes) -> None:
    db.execute(
        "INSERT OR REPLACE INTO lba_state (drive_id, after_cycle, state) VALUES (?,?,?)",
        (drive_id, after_cycle, state),
    )
