import sqlite3
from pathlib import Path

import pytest

from rig.errors import UserError
from rig.store import SCHEMA_VERSION, CycleRow, IntervalRow, Store


def test_fresh_store_is_migrated_to_the_current_schema_in_wal_mode(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.sqlite"))
    assert store.query("PRAGMA journal_mode")[0][0] == "wal"  # while the rig writes it
    store.close()
    db = sqlite3.connect(tmp_path / "s.sqlite")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"campaign", "drive", "cycle", "finding", "event", "ledger", "lba_state"} <= tables


def test_a_closed_store_is_one_file_a_read_only_reader_leaves_alone(tmp_path: Path) -> None:
    """The writer's close leaves WAL: no -wal or -shm stays, and a read-only reader (the
    report) creates none (demo.sqlite-shm was once left after `rig demo`)."""
    path = tmp_path / "s.sqlite"
    store = Store(str(path))
    store.new_campaign("c", "toml", 1, "simulated")
    store.close()
    reader = Store(str(path), read_only=True)
    assert reader.campaigns()
    reader.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]


def test_reopening_keeps_what_was_recorded(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sqlite")
    store = Store(path)
    cid = store.new_campaign("c", "toml", 1, "simulated")
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    did = store.add_drive(cid, 0, ident, 1 << 30, 4096, (0, 100))
    finding = {
        "cls": "lost_durable_write",
        "failure": True,
        "lba_first": 5,
        "lba_count": 2,
        "expected_gen": 3,
        "observed_gen": 1,
        "expected_op": 9,
        "observed_op": 4,
        "detail": {"x": 1},
    }
    store.record_cycle(
        CycleRow(did, 1, "ok", 1000, 0.0), [finding], [(5, "power_off", {})], b"ledger", b"state"
    )
    store.close()
    again = Store(path)
    rows = again.query("SELECT class, lba_first, expected_gen, observed_gen FROM finding")
    assert [tuple(r) for r in rows] == [("lost_durable_write", 5, 3, 1)]
    assert again.query("SELECT COUNT(*) FROM event")[0][0] == 1
    again.close()


def test_a_failed_record_leaves_nothing_half_written(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.sqlite"))
    cid = store.new_campaign("c", "toml", 1, "simulated")
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    did = store.add_drive(cid, 0, ident, 1 << 30, 4096, (0, 100))
    bad = {"cls": "x"}  # missing keys: refused before anything is written
    with pytest.raises(KeyError):
        store.record_cycle(CycleRow(did, 1, "ok", 0, 0.0), [bad], [], None, None)
    assert store.query("SELECT COUNT(*) FROM cycle")[0][0] == 0
    # a value SQLite cannot take: the finding's insert fails after the cycle row's, inside the
    # transaction, which leaves neither (nor the summaries of store v11)
    unbound = {
        "cls": "lost_durable_write",
        "lba_first": [1],
        "lba_count": 1,
        "expected_gen": 1,
        "observed_gen": 0,
        "expected_op": 1,
        "observed_op": 0,
        "detail": {"ack_to_cut_ns": 5},
    }
    with pytest.raises(sqlite3.ProgrammingError):
        store.record_cycle(CycleRow(did, 1, "ok", 0, 0.0), [unbound], [], None, None)
    for table in ("cycle", "finding", "finding_total", "lost_after"):
        assert store.query(f"SELECT COUNT(*) FROM {table}")[0][0] == 0
    store.close()


def test_a_store_from_a_newer_rig_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(UserError, match="newer"):
        Store(str(path))


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError, match="not a rig store"):
        Store(str(path))


def test_queued_events_are_written_with_the_next_transaction_or_at_close(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sqlite")
    store = Store(path)
    store.queue_event(None, 10, "edge_off", {"channel": 1})
    assert store.query("SELECT COUNT(*) FROM event")[0][0] == 0
    store.new_campaign("c", "toml", 1, "simulated")
    assert store.query("SELECT host_ns, kind FROM event")[0][:] == (10, "edge_off")
    store.queue_event(None, 20, "edge_on", {"channel": 1})
    store.close()
    again = Store(path)
    assert [r[0] for r in again.query("SELECT host_ns FROM event ORDER BY host_ns")] == [10, 20]
    again.close()


def _interval(drive_id: int, seq: int, mb_per_s: float, kind: str = "write") -> IntervalRow:
    return IntervalRow(
        drive_id, seq, 0.0, 1.0, 10, 0, 40960, 40960 * seq, None, mb_per_s, 10.0,
        None, None, None, None, 0, 0.5, 0, 0, 0, kind, {"n": seq}, seq if kind == "write" else None,
    )  # fmt: skip


def test_named_reads_and_writes_beside_the_cycle_record(tmp_path: Path) -> None:
    """What campaign, resume and endurance store outside `record_cycle`, through named methods:
    each write lands whole, each read gives back what was written."""
    store = Store(str(tmp_path / "s.sqlite"))
    cid = store.new_campaign("c", "toml", 1, "simulated")
    store.set_criteria(cid, {"confidence": 0.9})
    assert store.latest_campaign()["criteria"] == '{"confidence": 0.9}'  # type: ignore[index]
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    did = store.add_drive(cid, 3, ident, 1 << 30, 4096, (0, 100))
    assert store.drive_on_channel(cid, 3)["id"] == did  # type: ignore[index]
    assert store.drive_on_channel(cid, 4) is None
    assert store.lba_state_of(did) is None
    store.begin_cycle(did, 1, 5.0, 7000)
    store.record_cycle(CycleRow(did, 1, "ok", 7000, 5.0, writes=9, failures=1), [], [], None, b"s1")
    store.begin_cycle(did, 2, 6.0, 8000)  # begun, never recorded: the one a crash interrupted
    assert store.last_begun_after(did, 1)[:] == (2, 6.0, 8000)  # type: ignore[index]
    assert store.last_begun_after(did, 2) is None
    totals = store.cycle_totals(did)
    assert (totals["last"], totals["most"], totals["counted"], totals["failing"]) == (1, 9, 1, 1)
    assert store.lba_state_of(did) == b"s1"
    assert not store.has_health(did, 0)
    store.add_health(did, 0, 1, "smartctl", {}, "raw")
    assert store.has_health(did, 0) and not store.has_health(did, 1)
    store.record_interval(_interval(did, 1, 100.0), 1, b"s2")
    store.record_interval(_interval(did, 2, 0.0, "retention"), 1, b"s3")
    store.record_interval(_interval(did, 3, 120.0), 1, b"s4")
    assert store.endurance_so_far(did) == (3, 3 * 40960, [100.0, 120.0])
    assert store.lba_state_of(did) == b"s4"  # the state goes with its interval
    with pytest.raises(sqlite3.IntegrityError):  # (drive, seq) again: neither row nor state
        store.record_interval(_interval(did, 3, 1.0), 1, b"s5")
    assert store.lba_state_of(did) == b"s4"
    store.record_resume_scan(did, 42, {"scan": {}}, 1, b"s6")
    events = store.query("SELECT host_ns, kind FROM event WHERE drive_id = ?", (did,))
    assert [tuple(e) for e in events] == [(42, "resume_scan")]
    assert store.lba_state_of(did) == b"s6"
    store.end_campaign(cid, "stopped")
    store.mark_resumed(cid)
    head = store.latest_campaign()
    assert head is not None and (head["status"], head["ended_at"], head["resumes"]) == (
        "running",
        None,
        1,
    )
    store.close()


def test_closing_beside_an_attached_reader_keeps_wal_and_loses_nothing(tmp_path: Path) -> None:
    """The writer cannot leave WAL while a reader (the dashboard) holds the store: it closes
    anyway, and the reader and the next writer read everything it wrote."""
    path = str(tmp_path / "s.sqlite")
    store = Store(path)
    store.new_campaign("c", "toml", 1, "simulated")
    reader = Store(path, read_only=True)
    reader.query("BEGIN")  # a read transaction in progress, as a page being served
    assert reader.campaigns()
    store.close()
    assert (tmp_path / "s.sqlite-wal").exists()  # still in WAL: the reader held it
    assert len(reader.campaigns()) == 1
    reader.query("COMMIT")
    reader.close()
    again = Store(path)
    assert [c["name"] for c in again.campaigns()] == ["c"]
    again.close()
