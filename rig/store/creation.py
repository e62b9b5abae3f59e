"""How a store file comes to exist, and why an opener could not open one.

A new store is built whole in a temporary file beside its final path (schema at this rig's
version, WAL mode) and hard-linked into place only if nothing is there yet (`os.link` fails on an
existing name): every opener, whichever process, sees either no store or a complete one, and two
processes creating the same store at once both end up opening the one that was linked first
(docs/schema.md, "Creating and opening a store"; docs/decisions.md, "A store is created whole
and hard-linked into place").
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import tempfile
from typing import Any

from rig.errors import UserError
from rig.store.schema import SCHEMA_VERSION, migrate


def create(path: str) -> bool:
    """Create the store at `path` unless something is there already; True if this call
    created it. Refuses, naming the cause, a directory that is missing or not writable."""
    folder = os.path.dirname(os.path.abspath(path))
    check_folder(path, folder, write=True)
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(path)}.", suffix=".creating", dir=folder
        )
    except OSError as error:
        raise UserError(f"{path}: cannot create the store: {_cause(error)}") from error
    os.close(handle)
    try:
        db = sqlite3.connect(temporary, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # kept in the file's header
            db.execute("PRAGMA synchronous=OFF")  # nobody sees it yet: one fsync below
            migrate(db)
        finally:
            db.close()  # (the last connection: the temporary -wal and -shm go with it)
        with open(temporary, "rb") as built:
            os.fsync(built.fileno())  # whole on disk before any opener can see it
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False  # another opener's store came first: that one is used
        except OSError as error:
            raise UserError(f"{path}: cannot create the store: {_cause(error)}") from error
        _sync_folder(folder)  # the new name itself survives a crash, like what is written to it
        return True
    finally:
        for leftover in (temporary, f"{temporary}-wal", f"{temporary}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def held_campaign(path: str) -> tuple[str, int] | None:
    """(name, seed) of the first campaign a store at `path` holds, read through a read-only
    connection (nothing is written, not even a journal mode); None when there is no file or
    no campaign in it. A store of a newer schema is refused here, naming the file, before any
    writer opens it."""
    if not os.path.isfile(path):
        return None
    db = connect_read_only(path)
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UserError(
                f"{path}: store has schema v{version}, newer than this rig"
                f" (v{SCHEMA_VERSION}); left as it was"
            )
        try:
            row = db.execute("SELECT name, seed FROM campaign ORDER BY id LIMIT 1").fetchone()
        except sqlite3.DatabaseError:
            return None  # not a store (the writer's opening says so)
    finally:
        db.close()
    return None if row is None else (str(row[0]), int(row[1]))


def check_folder(path: str, folder: str = "", *, write: bool) -> None:
    """The folder a store (or a file beside it) goes in exists and, for a writer, takes files."""
    folder = folder or os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        what = "not a directory" if os.path.exists(folder) else "no such directory"
        raise UserError(f"{path}: {what}: {folder}")
    if write and not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{path}: permission denied: cannot create files in {folder}")


def connect_read_only(path: str, **options: Any) -> sqlite3.Connection:
    """A read-only connection that never writes the store (nor creates it: a missing file is
    `no such store`). A WAL store in a folder the reader may not write, with no -wal beside
    it, is opened immutable: SQLite could not create the -shm a WAL reader needs, and no writer
    can be at work there (a writer keeps its -wal in that folder)."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such store")
    where = os.path.abspath(path)
    try:
        db = sqlite3.connect(f"file:{where}?mode=ro", uri=True, **options)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # reads the header
        return db
    except sqlite3.Error as error:
        folder = os.path.dirname(where)
        settled = not os.path.exists(f"{where}-wal") and not os.access(folder, os.W_OK)
        if not (settled and isinstance(error, sqlite3.OperationalError)):
            raise open_failure(path, error, write=False) from error
    try:
        db = sqlite3.connect(f"file:{where}?mode=ro&immutable=1", uri=True, **options)
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return db
    except sqlite3.Error as error:
        raise open_failure(path, error, write=False) from error


def open_failure(path: str, error: sqlite3.Error, *, write: bool) -> UserError:
    """The refusal for a store SQLite could not open: the file system's cause when there is one
    (a missing directory, a permission), "not a rig store" only when the file itself is not one."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return UserError(f"{path}: no such directory: {folder}")
    if not os.path.exists(path):
        return UserError(f"{path}: no such store")
    if os.path.isdir(path):
        return UserError(f"{path}: is a directory, not a store")
    if not os.access(path, os.R_OK | (os.W_OK if write else 0)):
        return UserError(f"{path}: permission denied")
    if isinstance(error, sqlite3.OperationalError) and not os.access(folder, os.W_OK | os.X_OK):
        # a store in WAL mode needs its -shm beside it: a reader cannot create one here
        return UserError(f"{path}: permission denied: cannot create its -shm file in {folder}")
    return UserError(f"{path}: not a rig store ({error})")


def _sync_folder(folder: str) -> None:
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _cause(error: OSError) -> str:
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "permission denied"
    if error.errno == errno.ENOENT:
        return "no such directory"
    return error.strerror or str(error)
