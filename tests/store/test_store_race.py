"""Store creation and migration raced by separate processes (as the fleet agent's
replicator and `rig run` opening a fresh store at once). Every opener succeeds and the store it
finds is whole; a read-only opener sees no store or a complete one, never a half-made one."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from rig.errors import UserError
from rig.store import SCHEMA_VERSION, Store
from tests.older_stores import downgrade_to_v10

TRIES = [200, pytest.param(1500, marks=pytest.mark.slow)]


def _open_each(paths: list[str], barrier: Barrier, read_only: bool, out: Any) -> None:
    """In a child process: open every path the moment the other process does too."""
    failures = []
    for path in paths:
        barrier.wait(timeout=60)
        try:
            Store(path, read_only=read_only).close()
        except UserError as error:
            if not (read_only and "no such store" in str(error)):  # (not created yet: fine)
                failures.append(f"{path}: {error}")
        except Exception as error:
            failures.append(f"{path}: {type(error).__name__}: {error}")
    out.put(failures)


def race(paths: list[str], read_only: tuple[bool, bool] = (False, False)) -> list[str]:
    """Two processes open each of `paths` together; the failures of both."""
    ctx = multiprocessing.get_context("spawn")  # (no fork of pytest's threads)
    barrier, out = ctx.Barrier(2), ctx.Queue()
    workers = [
        ctx.Process(target=_open_each, args=(paths, barrier, ro, out), daemon=True)
        for ro in read_only
    ]
    for worker in workers:
        worker.start()
    try:
        failures = [line for _ in workers for line in out.get(timeout=600)]
    finally:
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()  # this PID only
    return failures


def assert_whole(path: str) -> None:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        # a store is created in WAL mode and its last writer leaves it at close (one file at
        # rest) unless a reader still held it then
        assert db.execute("PRAGMA journal_mode").fetchone()[0] in ("wal", "delete")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"campaign", "drive", "cycle", "finding", "finding_total", "lost_after"} <= tables
    finally:
        db.close()


@pytest.mark.parametrize("tries", TRIES)
def test_two_processes_creating_one_store_both_succeed(tmp_path: Path, tries: int) -> None:
    paths = [str(tmp_path / f"s{i}.sqlite") for i in range(tries)]
    failures = race(paths)
    assert failures == [], f"{len(failures)} of {2 * tries} openers failed: {failures[:3]}"
    for path in paths:
        assert_whole(path)
    assert not list(tmp_path.glob(".*.creating*")), "a temporary store was left behind"


@pytest.mark.parametrize("tries", TRIES)
def test_a_reader_beside_a_creator_finds_no_store_or_a_whole_one(
    tmp_path: Path, tries: int
) -> None:
    paths = [str(tmp_path / f"s{i}.sqlite") for i in range(tries)]
    assert race(paths, read_only=(False, True)) == []
    for path in paths:
        assert_whole(path)


def _older_store(path: Path) -> None:
    """A v10 store (before the finding summaries), with a campaign in it."""
    store = Store(str(path))
    store.new_campaign("c", "toml", 1, "simulated")
    store.close()
    downgrade_to_v10(path)


@pytest.mark.parametrize("tries", [60, pytest.param(600, marks=pytest.mark.slow)])
def test_two_processes_upgrading_one_store_both_succeed(tmp_path: Path, tries: int) -> None:
    template = tmp_path / "v10.sqlite"
    _older_store(template)
    paths = []
    for i in range(tries):
        paths.append(str(tmp_path / f"s{i}.sqlite"))
        shutil.copyfile(template, paths[-1])
    failures = race(paths)
    assert failures == [], f"{len(failures)} of {2 * tries} openers failed: {failures[:3]}"
    for path in paths:
        assert_whole(path)
        db = sqlite3.connect(path)
        assert db.execute("SELECT COUNT(*) FROM campaign").fetchone()[0] == 1
        db.close()
    assert os.path.exists(template)
