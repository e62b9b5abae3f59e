"""The replicator never creates or migrates a station store: it opens whole stores
of this rig's version read-only, skips anything else until it is one, and notices a store
replaced under its path."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from rig.interface.fleet.replicator import OpenStores
from rig.store import SCHEMA_VERSION, Store


def _fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), os.stat(path).st_mtime_ns


def test_what_is_not_a_whole_store_is_skipped_untouched(tmp_path: Path) -> None:
    stores = OpenStores()
    missing = tmp_path / "missing.sqlite"
    assert stores.open(str(missing)) is None
    assert list(tmp_path.iterdir()) == []  # nothing created

    empty = tmp_path / "empty.sqlite"
    empty.touch()
    before = _fingerprint(empty)
    assert stores.open(str(empty)) is None
    assert _fingerprint(empty) == before

    older = tmp_path / "older.sqlite"
    Store(str(older)).close()
    db = sqlite3.connect(older)
    db.execute("PRAGMA user_version = 10")  # (as an older rig left it)
    db.close()
    assert stores.open(str(older)) is None
    db = sqlite3.connect(f"file:{older}?mode=ro", uri=True)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 10  # not migrated
    db.close()
    stores.close()


def test_a_whole_store_is_read_and_a_replaced_one_opened_again(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    first = Store(str(path))
    first.new_campaign("first", "toml", 1, "simulated")
    first.close()
    stores = OpenStores()
    opened = stores.open(str(path))
    assert opened is not None and opened.read_only
    assert [r["name"] for r in opened.campaigns()] == ["first"]
    assert stores.open(str(path)) is opened  # kept open between rounds

    for suffix in ("", "-wal", "-shm"):  # the agent starts a campaign afresh
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    again = Store(str(path))
    again.new_campaign("second", "toml", 1, "simulated")
    again.close()
    reopened = stores.open(str(path))
    assert reopened is not None and reopened is not opened
    assert [r["name"] for r in reopened.campaigns()] == ["second"]
    assert SCHEMA_VERSION > 10
    stores.close()
