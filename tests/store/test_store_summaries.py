"""Store v11's summaries of the findings (rig/store/totals.py): what `record_cycle` keeps and what
the migration backfills equal what a report read from the finding rows before v11."""

from __future__ import annotations

import logging
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rig.check import failures
from rig.store import SCHEMA_VERSION, CycleRow, Store, StoreReader, lost_after_ms, schema
from tests.older_stores import downgrade_to_v10

NS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 3 * 10**12),
    st.floats(-1e3, 1e13, allow_nan=False),
    st.text(max_size=3),
)
FINDING = st.fixed_dictionaries(
    {
        "cls": st.sampled_from(failures.names()),
        "lba_count": st.integers(1, 64),
        "ack": NS,
        "flush": NS,
    }
)
CYCLES = st.lists(st.tuples(st.integers(0, 2), st.lists(FINDING, max_size=6)), max_size=25)


def _finding(spec: dict[str, Any]) -> dict[str, Any]:
    detail = {k: v for k, v in (("ack_to_cut_ns", spec["ack"]), ("flush_to_cut_ns", spec["flush"]))}
    return {
        "cls": spec["cls"],
        "lba_first": 7,
        "lba_count": spec["lba_count"],
        "expected_gen": 2,
        "observed_gen": 1,
        "expected_op": 3,
        "observed_op": 4,
        "detail": {k: v for k, v in detail.items() if v is not None},
    }


def _record(path: Path, cycles: list[tuple[int, list[dict[str, Any]]]]) -> None:
    store = Store(str(path))
    campaign = store.new_campaign("c", "toml", 1, "simulated")
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    drives = [
        store.add_drive(campaign, i, dict(ident, serial=f"s{i}"), 1 << 30, 4096, (0, 100))
        for i in range(3)
    ]
    seqs = Counter[int]()
    for drive, findings in cycles:
        seqs[drive] += 1
        row = CycleRow(drives[drive], seqs[drive], "ok", 1000, 0.0)
        store.record_cycle(row, [_finding(f) for f in findings], [], None, None)
    store.close()


def _reads(path: Path, summarised: bool) -> dict[str, Any]:
    """Every read of StoreReader that the summaries serve, through them or (`summarised`
    False) through the finding rows, as an older store is read."""
    reader = StoreReader(str(path))
    reader.has_summaries = summarised
    drives = [r["id"] for r in reader.drives()]
    try:
        return {
            "totals": sorted(tuple(r) for r in reader.finding_totals()),
            "lost_after": reader.lost_after_counts(),
            "classes": {
                d: [
                    (r[1], r[15] and frozenset(r[15].split(",")))
                    for r in reader.cut_columns(d, True)
                ]
                for d in drives
            },
            "examples": {d: [tuple(r) for r in reader.failure_examples(d, 4)] for d in drives},
            "of_class": {
                (d, c): [tuple(r) for r in reader.findings_of_class(d, c)]
                for d in drives
                for c in (failures.COUNTER_ANOMALY, failures.ALLOWED_LOSS)
            },
        }
    finally:
        reader.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cycles=CYCLES)
def test_the_summaries_equal_the_reads_over_the_findings(tmp_path: Path, cycles: Any) -> None:
    path = tmp_path / "s.sqlite"
    path.unlink(missing_ok=True)
    _record(path, cycles)
    assert _reads(path, True) == _reads(path, False)
    db = sqlite3.connect(path)
    # each cycle's classes in the table's order, NULL without a failure
    for text, want in db.execute(
        "SELECT c.failure_classes, (SELECT group_concat(DISTINCT f.class) FROM finding f"
        " WHERE f.cycle_id = c.id AND f.failure = 1) FROM cycle c"
    ):
        assert text == (None if want is None else ",".join(failures.ordered(want.split(","))))
    # a lost-after count per rounded value of every lost durable write's numbers
    lost: Counter[tuple[int, str, float]] = Counter()
    for drive, spec in (
        (d, f) for d, findings in cycles for f in findings if f["cls"] == failures.LOST_DURABLE
    ):
        for since in ("ack", "flush"):
            ms = lost_after_ms(spec[since])
            if ms is not None:
                lost[drive + 1, since, ms] += 1
    assert {(d, s, ms): n for d, s, ms, n in db.execute("SELECT * FROM lost_after")} == lost


def test_lost_after_ms_rounds_to_three_significant_digits() -> None:
    assert lost_after_ms(123_456_789) == 123.0
    assert lost_after_ms(1_234_567) == 1.23
    assert lost_after_ms(987_654) == 0.988
    assert lost_after_ms(0) == 0.0
    assert lost_after_ms(-1) is None
    assert lost_after_ms(True) is None
    assert lost_after_ms("5") is None
    assert lost_after_ms(2.5e12) == 2.5e6


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cycles=CYCLES)
def test_the_migration_from_v10_backfills_what_record_cycle_kept(
    tmp_path: Path, cycles: Any
) -> None:
    path = tmp_path / "s.sqlite"
    path.unlink(missing_ok=True)
    _record(path, cycles)
    db = sqlite3.connect(path)
    kept = _summaries(db)
    db.close()
    downgrade_to_v10(path)
    assert _reads(path, False)["totals"] == sorted(kept["totals"])  # a v10 store, read as one
    Store(str(path)).close()  # migrates: v11 and its backfill
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert _summaries(db) == kept


def _summaries(db: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "totals": list(db.execute("SELECT * FROM finding_total ORDER BY 1, 2, 3")),
        "lost_after": list(db.execute("SELECT * FROM lost_after ORDER BY 1, 2, 3")),
        "classes": list(db.execute("SELECT id, failure_classes FROM cycle ORDER BY id")),
    }


def test_rebuild_summaries_makes_them_again_from_the_findings(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    specs = [{"cls": failures.LOST_DURABLE, "lba_count": 2, "ack": 1_500_000, "flush": 700}]
    _record(path, [(0, specs), (1, []), (0, [*specs, dict(specs[0], cls=failures.SHORN)])])
    db = sqlite3.connect(path)
    kept = _summaries(db)
    db.execute("UPDATE finding_total SET n = 99")
    db.execute("UPDATE cycle SET failure_classes = 'x'")
    db.commit()
    store = Store(str(path))
    store.rebuild_summaries()
    store.close()
    assert _summaries(db) == kept
    assert kept["classes"] == [
        (1, "lost_durable_write"),
        (2, None),
        (3, "lost_durable_write,shorn_write"),
    ]
    assert kept["lost_after"] == [(1, "ack", 1.5, 2), (1, "flush", 0.0007, 2)]


def test_findings_enter_a_station_store_only_through_record_cycle() -> None:
    """The summaries are kept by record_cycle: no other code of the rig may write finding rows
    into the station's SQLite store (rig/interface/fleet/central/ writes the fleet's PostgreSQL)."""
    root = Path(__file__).resolve().parents[2]
    writes = re.compile(
        r"(INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+finding\b"
    )
    found = {
        str(path.relative_to(root))
        for folder in ("rig", "reports")
        for path in (root / folder).rglob("*.py")
        if "fleet/central" not in str(path) and writes.search(path.read_text(encoding="utf-8"))
    }
    assert found == {"rig/store/recording.py"}
    recording = (root / "rig/store/recording.py").read_text(encoding="utf-8")
    assert len(writes.findall(recording)) == 1
    start = recording.index("    def record_cycle(")
    end = recording.index("\n    def ", start + 1)
    assert writes.search(recording[start:end])


def test_a_backfill_that_fails_leaves_the_store_at_v10(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "s.sqlite"
    spec = {"cls": failures.LOST_DURABLE, "lba_count": 1, "ack": 5, "flush": 6}
    _record(path, [(0, [spec])])
    downgrade_to_v10(path)

    def fails(db: sqlite3.Connection, title: str | None) -> None:
        raise RuntimeError("backfill stopped")

    monkeypatch.setitem(schema.BACKFILLS, 11, fails)
    with pytest.raises(RuntimeError):
        Store(str(path))
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 10
    assert "failure_classes" not in {r[1] for r in db.execute("PRAGMA table_info(cycle)")}
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {"finding_total", "lost_after"} & tables
    db.close()
    monkeypatch.undo()
    Store(str(path)).close()  # and the next open migrates it
    assert _summaries(sqlite3.connect(path))["lost_after"] == [
        (1, "ack", 5e-06, 1),
        (1, "flush", 6e-06, 1),
    ]


def test_an_upgrade_that_backfills_says_so_and_a_new_store_does_not(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.sqlite"
    with caplog.at_level(logging.WARNING, logger="rig"):
        Store(str(path)).close()  # created: nothing to say (a CLI's one-line error stays one)
        assert caplog.messages == []
        downgrade_to_v10(path)
        Store(str(path)).close()
    assert caplog.messages == [  # one line per step with a pass over the rows
        "store: upgrading to schema v11 (a pass over every finding)",
        "store: upgrading to schema v12 (a pass over every cycle)",
        "store: upgrading to schema v15 (each cut's exposure from its ledger)",
    ]
