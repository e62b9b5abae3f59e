"""The stations' summaries in the central database (schema v4; v5's per-drive totals): shipped
with their cycles, added once per cycle however often a batch is shipped or fails mid-way, equal
to the station's own, made again from the rows of an older database, and a model's figures read
through its index."""

from __future__ import annotations

import datetime
import sqlite3
from collections import Counter
from pathlib import Path
from typing import cast

import psycopg
import pytest

from fixtures.pgcluster import Cluster
from rig.interface.fleet.central import CentralStore, Cursors
from rig.interface.fleet.migrations import DRIVE_TABLES, SCHEMA_VERSION, SUMMARY_TABLES
from rig.interface.fleet.replicator import next_batch, replicate_store
from rig.store import Store
from tests.cli_runner import rig


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real campaign's store: the in-process demo (lost durable writes, torn writes)."""
    out = tmp_path_factory.mktemp("demo")
    done = rig("demo", "--in-process", "--cycles", "12", "--quiet", "--out", str(out), cwd=out)
    assert done.returncode == 0, done.stderr
    return out / "demo.sqlite"


def station_summaries(
    path: Path,
) -> tuple[dict[tuple[object, ...], int], Counter[tuple[object, ...]]]:
    """The station's own summaries per channel: (channel, class, failure, 'n'|'blocks') -> count,
    and (channel, since, ms) -> lost writes."""
    db = sqlite3.connect(path)
    try:
        totals: dict[tuple[object, ...], int] = {}
        for channel, cls, failure, n, blocks in db.execute(
            "SELECT d.channel, t.class, t.failure, t.n, t.blocks FROM finding_total t"
            " JOIN drive d ON d.id = t.drive_id"
        ):
            totals[channel, cls, failure, "n"] = n
            totals[channel, cls, failure, "blocks"] = blocks
        lost = Counter(
            {
                (channel, since, ms): n
                for channel, since, ms, n in db.execute(
                    "SELECT d.channel, l.since, l.ms, l.n FROM lost_after l"
                    " JOIN drive d ON d.id = l.drive_id"
                )
            }
        )
        cuts: Counter[tuple[object, ...]] = Counter()
        for channel, classes in db.execute(
            "SELECT d.channel, c.failure_classes FROM cycle c JOIN drive d ON d.id = c.drive_id"
            " WHERE c.failure_classes IS NOT NULL"
        ):
            for cls in classes.split(","):
                cuts[channel, cls] += 1
        for (channel, cls), n in cuts.items():
            totals[channel, cls, 1, "cuts"] = n
        return totals, lost
    finally:
        db.close()


def central_summaries(
    central: CentralStore, station: str, uid: int, channels: list[int]
) -> tuple[dict[tuple[object, ...], int], Counter[tuple[object, ...]]]:
    totals: dict[tuple[object, ...], int] = {}
    lost: Counter[tuple[object, ...]] = Counter()
    for channel in channels:
        for r in central.drive_class_totals(station, uid, channel):
            totals[channel, r["class"], r["failure"], "n"] = int(r["n"])
            totals[channel, r["class"], r["failure"], "blocks"] = int(r["blocks"])
            if r["cuts"]:
                totals[channel, r["class"], r["failure"], "cuts"] = int(r["cuts"])
        for r in central.drive_lost_after(station, uid, channel):
            lost[channel, r["since"], r["ms"]] = int(r["n"])
    return totals, lost


def _uid_and_channels(path: Path) -> tuple[int, list[int]]:
    db = sqlite3.connect(path)
    try:
        uid = db.execute("SELECT media_id FROM campaign").fetchone()[0]
        channels = [c for (c,) in db.execute("SELECT channel FROM drive ORDER BY channel")]
        return int(uid), channels
    finally:
        db.close()


def _cycle_counts(pg: Cluster, station: str) -> tuple[int, int]:
    with psycopg.connect(pg.dsn()) as db:
        cycles = db.execute("SELECT count(*) FROM fleet.cycle WHERE station = %s", (station,))
        summed = db.execute(
            "SELECT coalesce(sum(rows), 0) FROM fleet.day_cycles WHERE station = %s", (station,)
        )
        return int(cycles.fetchone()[0]), int(summed.fetchone()[0])  # type: ignore[index]


def test_summaries_travel_once_and_equal_the_stations(pg: Cluster, demo_store: Path) -> None:
    uid, channels = _uid_and_channels(demo_store)
    store = Store(str(demo_store), read_only=True)
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as central:
            first = next_batch(store, central, "alpha", None, limit=9)
            assert first.totals
            central.ship("alpha", first)
            central.ship("alpha", first)  # its commit's answer lost: shipped again
            # a batch read from an older cursor overlaps the shipped one (a second replicator)
            stale = next_batch(store, cast(CentralStore, _StaleCursor()), "alpha", None, limit=12)
            # the demo's lying drive loses durable writes: in one of its first four cycles (its
            # first alone had none once in CI)
            assert first.lost or stale.lost
            central.ship("alpha", stale)
            assert _cycle_counts(pg, "alpha") == (12, 12)
            assert replicate_store(store, central, "alpha") == 36 - 12
            assert replicate_store(store, central, "alpha") == 0
            found = central_summaries(central, "alpha", uid, channels)
    finally:
        store.close()
    assert _cycle_counts(pg, "alpha") == (36, 36)
    expected = station_summaries(demo_store)
    assert found[0] == expected[0]
    assert found[1] == expected[1]
    assert sum(expected[1].values()) > 0


class _StaleCursor:
    """A central database whose cursor answer is from before the last ship (as a second
    replicator that read it earlier sees it)."""

    def cursors(self, station: str, uid: int) -> Cursors:
        return Cursors(0, 0, 0)

    def loose_event_cursor(self, station: str, uids: list[int]) -> int:
        return 0


def test_a_ship_that_fails_mid_way_adds_nothing(pg: Cluster, demo_store: Path) -> None:
    uid, channels = _uid_and_channels(demo_store)
    store = Store(str(demo_store), read_only=True)
    try:
        with CentralStore(pg.dsn("rig_station_beta")) as central:
            batch = next_batch(store, central, "beta", None, limit=8)
            good = list(batch.lost)
            # the last statement of the ship fails (a row the server refuses) after the cycles,
            # findings and counts went in: the whole transaction goes
            batch.lost.append((uid, channels[0], 1, "ack", "not a number", 1))
            with pytest.raises(psycopg.Error):
                central.ship("beta", batch)
            assert _cycle_counts(pg, "beta") == (0, 0)
            batch.lost = good
            central.ship("beta", batch)
            assert _cycle_counts(pg, "beta") == (8, 8)
            replicate_store(store, central, "beta")
            found = central_summaries(central, "beta", uid, channels)
    finally:
        store.close()
    assert found == station_summaries(demo_store)


def _back_to_v3(pg: Cluster) -> None:
    """The database as a rig before the summaries left it: no summary tables, cycles without
    their classes or exposure, schema v3."""
    with psycopg.connect(pg.dsn()) as db:
        for table in (*SUMMARY_TABLES, *DRIVE_TABLES):
            db.execute(f"DROP TABLE fleet.{table}")
        db.execute("ALTER TABLE fleet.cycle DROP COLUMN failure_classes")
        db.execute("ALTER TABLE fleet.cycle DROP COLUMN exposed")  # (v6)
        for column in ("realized_delay_ns", "timed_from", "delay_error_ns", "delay_in_range"):
            db.execute(f"ALTER TABLE fleet.cycle DROP COLUMN {column}")  # (v8)
        db.execute("DELETE FROM fleet.schema_version WHERE version > 3")


def _drive_totals(db: psycopg.Connection[tuple[object, ...]]) -> dict[str, list[object]]:
    return {
        t: db.execute(f"SELECT * FROM fleet.{t} ORDER BY 1, 2, 3, 4, 5").fetchall()
        for t in DRIVE_TABLES
    }


def test_an_older_database_is_upgraded_with_its_summaries(pg: Cluster, demo_store: Path) -> None:
    uid, channels = _uid_and_channels(demo_store)
    store = Store(str(demo_store), read_only=True)
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as central:
            replicate_store(store, central, "alpha")
            shipped = central_summaries(central, "alpha", uid, channels)
    finally:
        store.close()
    with psycopg.connect(pg.dsn()) as db:
        days = db.execute("SELECT * FROM fleet.day_cycles ORDER BY 1, 2, 3, 4, 5").fetchall()
        drives = _drive_totals(db)
    assert all(drives.values())
    _back_to_v3(pg)
    with CentralStore(pg.dsn()) as admin:
        assert admin.schema_version() == 3
        assert admin.migrate() == SCHEMA_VERSION
    with CentralStore(pg.dsn("viewer", "pw-viewer", "127.0.0.1")) as reader:
        assert central_summaries(reader, "alpha", uid, channels) == shipped
    with psycopg.connect(pg.dsn()) as db:
        assert (
            db.execute("SELECT * FROM fleet.day_cycles ORDER BY 1, 2, 3, 4, 5").fetchall() == days
        )
        # the per-drive totals (v5) backfilled equal those added as the cycles were shipped
        assert _drive_totals(db) == drives
        # the classes of each cycle came back as the station wrote them
        classes = db.execute(
            "SELECT channel, seq, failure_classes FROM fleet.cycle WHERE station = 'alpha'"
            " ORDER BY channel, seq"
        ).fetchall()
    local = sqlite3.connect(demo_store)
    try:
        assert (
            classes
            == local.execute(
                "SELECT d.channel, c.seq, c.failure_classes FROM cycle c JOIN drive d"
                " ON d.id = c.drive_id ORDER BY d.channel, c.seq"
            ).fetchall()
        )
    finally:
        local.close()


def test_a_models_year_reads_only_that_models_rows(pg: Cluster) -> None:
    """EXPLAIN of the model-over-a-year read on a lab's year of summaries (50 stations of 8
    drives of 5 models, 365 days: the scale bench's shape): an index range on the model, no scan
    of the other models' rows."""
    with psycopg.connect(pg.dsn()) as db:
        db.execute(
            "INSERT INTO fleet.day_cycles SELECT 'model ' || (s * 8 + c) % 5,"
            " DATE '2026-01-01' + d, 'alpha', s, c, 1, 1, 1, 0, 0, 0, 0, 0"
            " FROM generate_series(0, 49) s, generate_series(0, 364) d, generate_series(0, 7) c"
        )
        db.commit()
    with CentralStore(pg.dsn()) as admin:
        admin.analyze_summaries()
    with CentralStore(pg.dsn("viewer", "pw-viewer", "127.0.0.1")) as reader:
        first, last = datetime.date(2026, 1, 1), datetime.date(2026, 12, 31)
        days = reader.model_days("model 3", first, last)
        assert len(days) == 365 and all(d["cuts"] == 80 for d in days)
        plan = reader.explain_model_days("model 3", first, last)
    assert "Index" in plan and "Seq Scan" not in plan, plan
    assert "model = " in plan, plan
