"""The replicator against a real PostgreSQL: every finished cycle of a store reaches the central
database once (by natural keys), in order, and a report read from it is the report of the store."""

from __future__ import annotations

import csv
import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any
from unittest import mock

import psycopg
import pytest

from fixtures.pgcluster import Cluster
from reports import export
from reports.analysis import reliability as analysis
from reports.load import binned, dataset
from reports.load import central as report_central
from rig.errors import UserError
from rig.interface.fleet import dispatch
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.replicator import next_batch, replicate_store
from rig.store import Store
from tests.cli_runner import rig
from tests.fleet.central_helpers import central_dataset


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real campaign's store: the in-process demo (three drive models, findings, events)."""
    out = tmp_path_factory.mktemp("demo")
    done = rig("demo", "--in-process", "--cycles", "12", "--quiet", "--out", str(out), cwd=out)
    assert done.returncode == 0, done.stderr
    return out / "demo.sqlite"


def _report(data: dataset.Dataset) -> dict[str, object]:
    """The analysis as JSON, less where the data came from."""
    report = analysis.analyse(data)
    body = dataclasses.asdict(report)
    for key in ("sources", "campaigns", "unread_tables"):
        body.pop(key)
    for model in body["models"]:
        model.pop("campaigns")
        for drive in model["drives"]:
            drive.pop("stations")
        for example in model["examples"]:  # the store's row ids are its own
            example.pop("id", None)
            example.pop("cycle_id", None)
    return json.loads(json.dumps(body, default=str))


def assert_the_same_but_binned(central: dict[str, Any], station: dict[str, Any]) -> None:
    """The central report's analysis is the station's but for what it keeps binned
    (docs/reports.md; docs/decisions.md, "The central report states figures from the server's
    aggregates"): no per-cut list (return_ms, delays), and the return-time p50, p90,
    p99 and each drive's median within the bins' stated error (min, max and mean exact)."""
    assert len(central["models"]) == len(station["models"])
    for c, s in zip(central["models"], station["models"], strict=True):
        assert s["return_ms"] and c["return_ms"] == "[]"  # (a BinnedReturns lists none)
        assert c["delays"]["ack_to_cut_ms"] == "[]" != s["delays"]["ack_to_cut_ms"]
        for key in ("return_ms", "delays"):
            c.pop(key), s.pop(key)
        cq, sq = c.pop("return_quantiles"), s.pop("return_quantiles")
        assert cq.keys() == sq.keys()
        for k in ("min", "max"):
            assert cq[k] == sq[k]
        assert cq["mean"] == pytest.approx(sq["mean"], rel=1e-12)
        for k in ("p50", "p90", "p99"):
            assert cq[k] == pytest.approx(sq[k], rel=binned.RELATIVE_ERROR)
        for cd, sd in zip(c["drives"], s["drives"], strict=True):
            cm, sm = cd.pop("median_return_ms"), sd.pop("median_return_ms")
            assert (cm is None) == (sm is None)
            if sm is not None:
                assert cm == pytest.approx(sm, rel=binned.RELATIVE_ERROR)
    assert central == station  # every count, interval, bin and verdict


def test_replication_is_exact_idempotent_and_reports_the_same(
    pg: Cluster, demo_store: Path, tmp_path: Path
) -> None:
    demo_store = altered_copy(demo_store, tmp_path)
    replicate_exactly_once(pg, demo_store)
    from_store = _report(dataset.load([str(demo_store)]))
    from_central = _report(central_dataset(pg.dsn("viewer", "pw-viewer", "127.0.0.1")))
    assert_the_same_but_binned(from_central, from_store)
    body, listed = report_files_bin_the_cuts(pg, demo_store, tmp_path)
    streamed = cut_rows_stream_from_the_server(pg, tmp_path)
    delays_as_the_store_has_them(demo_store, streamed)
    # the cut timing section from the server's rows: the station's, but for the source's name
    timing = [{k: v for k, v in t.items() if k != "source"} for t in body["timing"]]
    assert timing == [{k: v for k, v in t.items() if k != "source"} for t in listed["timing"]]
    assert timing and timing[0]["cuts"] == 36
    page = (tmp_path / "central" / "report.html").read_text()
    assert "keeps the delays as cuts and failing cuts per delay bin" in page
    assert "(bins of +-2.2%)" in page  # the return-time curve's legend
    # the same campaign from both sources is refused, not counted twice
    with pytest.raises(UserError, match="give each once"):
        dataset.merge([central_dataset(pg.dsn()), dataset.load([str(demo_store)])])


def altered_copy(demo_store: Path, tmp_path: Path) -> Path:
    """A copy with blocks a read budget left unread (the demo's drives read everything), so the
    comparison also covers the column; a drive that died at its 9th cycle after a rig error at
    its 4th, and one with an interrupted cycle: the place of death and the statuses the
    aggregates count."""
    copy = tmp_path / "unchecked.sqlite"
    with sqlite3.connect(demo_store) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE cycle SET blocks_unchecked = seq % 3")
        db.execute("UPDATE cycle SET status = 'error' WHERE drive_id = 2 AND seq = 4")
        db.execute("UPDATE cycle SET status = 'dead' WHERE drive_id = 2 AND seq >= 9")
        db.execute("UPDATE cycle SET status = 'interrupted' WHERE drive_id = 3 AND seq = 5")
    return copy


def replicate_exactly_once(pg: Cluster, demo_store: Path) -> None:
    """Every cycle reaches the server once, in order, with all its rows of every table."""
    store = Store(str(demo_store))
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as central:
            assert replicate_store(store, central, "alpha", ledgers=True) == 36
            assert replicate_store(store, central, "alpha", ledgers=True) == 0  # nothing twice
            local = [tuple(r) for r in store.cycle_keys()]
            assert [tuple(r.values()) for r in central.cycle_keys("alpha")] == local
    finally:
        store.close()
    with CentralStore(pg.dsn()) as admin:
        counts = {
            t: admin._all(f"SELECT count(*) AS n FROM fleet.{t} WHERE station = 'alpha'")[0]["n"]
            for t in ("cycle", "finding", "event", "ledger", "health")
        }
    db = sqlite3.connect(demo_store)
    try:
        for table in ("cycle", "finding", "event", "ledger", "health"):
            assert counts[table] == db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()


def report_files_bin_the_cuts(
    pg: Cluster, demo_store: Path, tmp_path: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report's files: bins instead of per-cut lists, no cut rows (docs/reports.md).
    Returns the central and the station's report.json."""
    export.write_dataset_report(central_dataset(pg.dsn()), str(tmp_path / "central"))
    export.write_dataset_report(dataset.load([str(demo_store)]), str(tmp_path / "station"))
    body = json.loads((tmp_path / "central" / "report.json").read_text())
    listed = json.loads((tmp_path / "station" / "report.json").read_text())
    for model, own in zip(body["models"], listed["models"], strict=True):
        assert model["return_ms"] == [] and model["delays"] == []
        assert len(own["delays"]) == own["cuts"] > 0
        bins = model["return_histogram"]["bins"]
        assert sum(c for _, c in bins) == len(own["return_ms"]) > 0
    assert len((tmp_path / "central" / "cuts.csv").read_text().splitlines()) == 1  # its header
    assert len((tmp_path / "station" / "cuts.csv").read_text().splitlines()) == 37
    return body, listed


def cut_rows_stream_from_the_server(pg: Cluster, tmp_path: Path) -> list[str]:
    """--cut-rows: the same rows as the station's cuts.csv, streamed from the server in chunks;
    returns them."""
    with CentralStore(pg.dsn()) as store, mock.patch.object(report_central, "CHUNK", 5):
        data = report_central.read(store, cut_rows=True)
        export.write_dataset_report(data, str(tmp_path / "rows"))
        # a page's drives only (their rows through the key): the same aggregates as in the whole
        whole = {r.key: r.cuts for r in data.runs}
        one = report_central.read(store, drive=lambda row: row["serial"] == data.runs[1].serial)
        assert [r.key for r in one.runs] == [data.runs[1].key]
        found = one.runs[0].cuts
        assert vars(found.part) == vars(whole[data.runs[1].key].part)  # type: ignore[attr-defined]
        assert found.returns == whole[data.runs[1].key].returns  # type: ignore[attr-defined]
        assert found.part.dead_at == 8  # (the drive made to die above)
    streamed = (tmp_path / "rows" / "cuts.csv").read_text().splitlines()
    own = (tmp_path / "station" / "cuts.csv").read_text().splitlines()
    assert [r.split(",", 1)[1] for r in streamed] == [r.split(",", 1)[1] for r in own]
    return streamed


def delays_as_the_store_has_them(demo_store: Path, streamed: list[str]) -> None:
    """Both delays: the planned one and where the cut fell (with its bound)."""
    with sqlite3.connect(demo_store) as db:
        realized = {
            (serial, seq): (ns / 1e6, bound / 1e6)
            for serial, seq, ns, bound in db.execute(
                "SELECT d.serial, c.seq, c.realized_delay_ns, c.delay_error_ns FROM cycle c"
                " JOIN drive d ON d.id = c.drive_id WHERE c.realized_delay_ns IS NOT NULL"
            )
        }
    rows = list(csv.DictReader(streamed))
    in_rows = {
        (r["serial"], int(r["seq"])): (float(r["realized_delay_ms"]), float(r["delay_error_ms"]))
        for r in rows
        if r["realized_delay_ms"]
    }
    assert in_rows == realized and len(in_rows) == len(rows) == 36  # (every demo cycle was cut)


def test_a_lost_commit_and_a_restart_resume_from_the_central_cursor(
    pg: Cluster, tmp_path: Path
) -> None:
    done = rig(
        "demo", "--in-process", "--cycles", "6", "--quiet", "--out", str(tmp_path), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    store = Store(str(tmp_path / "demo.sqlite"))
    try:
        with CentralStore(pg.dsn("rig_station_beta")) as central:
            first = next_batch(store, central, "beta", None, limit=5)
            central.ship("beta", first)
            # the same batch again (its commit's answer was lost on the link): no change
            central.ship("beta", first)
            assert len(central.cycle_keys("beta")) == 5
        # a new process (after a restart or kill -9) asks the central database where it was
        with CentralStore(pg.dsn("rig_station_beta")) as central:
            assert replicate_store(store, central, "beta") == 18 - 5
            assert [tuple(r.values()) for r in central.cycle_keys("beta")] == [
                tuple(r) for r in store.cycle_keys()
            ]
    finally:
        store.close()


def _ship(pg: Cluster, store_path: Path, station: str) -> None:
    store = Store(str(store_path))
    try:
        with CentralStore(pg.dsn(f"rig_station_{station}")) as central:
            replicate_store(store, central, station)
    finally:
        store.close()


def test_a_station_cannot_write_or_see_another_stations_rows(pg: Cluster, demo_store: Path) -> None:
    _ship(pg, demo_store, "alpha")  # (a no-op if an earlier test shipped it)
    with psycopg.connect(pg.dsn("rig_station_beta", "pw-beta", "127.0.0.1")) as beta:
        # beta sees only its own rows
        stations = beta.execute("SELECT DISTINCT station FROM fleet.cycle").fetchall()
        assert stations in ([], [("beta",)])
        assert beta.execute("SELECT name FROM fleet.station").fetchall() == [("beta",)]
        # updating alpha's rows changes nothing (they are invisible to beta)
        changed = beta.execute(
            "UPDATE fleet.cycle SET status = 'ok', failures = 0 WHERE station = 'alpha'"
        ).rowcount
        assert changed == 0
        beta.rollback()
        # inserting a row in alpha's name is refused by the policy
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            beta.execute(
                "INSERT INTO fleet.campaign (station, uid, local_id, name, config, seed, board,"
                " started_at, status) VALUES ('alpha', 42, 1, 'forged', '', 1, 'x', 0, 'done')"
            )
        beta.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            beta.execute("DELETE FROM fleet.cycle")
        beta.rollback()
        # and alpha's queue is not beta's to see or take from
        app = dispatch.make_app(pg.dsn())
        with app.open():
            job = app.configure_task(dispatch.STOP_TASK, queue="station:alpha").defer(
                submission_id=999_999
            )
        taken = beta.execute(
            "UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (job,)
        ).rowcount
        assert taken == 0
        assert beta.execute("SELECT count(*) FROM procrastinate_jobs").fetchone() == (0,)
        beta.rollback()
    with psycopg.connect(pg.dsn()) as admin:  # alpha's rows are all still there, unchanged
        assert admin.execute(
            "SELECT status FROM procrastinate_jobs WHERE id = %s", (job,)
        ).fetchone() == ("todo",)
        left = admin.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'ok' AND failures = 0)"
            " FROM fleet.cycle WHERE station = 'alpha'"
        ).fetchone()
        assert left is not None and left[0] == 36
    with psycopg.connect(pg.dsn("viewer", "pw-viewer", "127.0.0.1")) as viewer:
        assert viewer.execute("SELECT count(*) FROM fleet.cycle").fetchone()[0] >= 36
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            viewer.execute("UPDATE fleet.cycle SET status = 'ok'")


def test_cut_rows_without_the_central_database_is_refused(demo_store: Path, tmp_path: Path) -> None:
    done = rig("report", "--cut-rows", str(demo_store), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--cut-rows" in done.stderr
    assert not (tmp_path / "r").exists()  # before any write
