"""The central database at a lab's scale: `rig report --central`, the dashboard, replication lag.

1. A PostgreSQL of its own (fixtures/pgcluster.py, Debian's server), the fleet's schema, 50
   station roles.
2. A sample through the production path: per station a store of `--sample` cycles cloned from a
   real campaign's cycles (`rig demo --in-process`) by `Store.record_cycle` (each template cycle
   keeps its first `--findings` findings), 8 drives of `--models` models, shipped by the
   replicator (`replicate_store`) under the station's role.
3. Then by SQL: each station's cycles and findings copied (new seq, ended a day further back per
   copy round, so the cuts spread over `--days` days) up to `--cuts` cycles in all, and the
   summaries rebuilt by the real code (`CentralStore.rebuild_summaries`, the v4 and v5 backfill).
4. On it: `rig report --central` in a child (wall time, peak RSS by wait4, killed after
   `--report-timeout`); the dashboard (`rig serve --central`) overview and a model page, p50 and
   p95 over `--requests` requests each from a small client (urllib, one at a time); the EXPLAIN of
   a model's year (with `--baseline DIR`, the dashboard of another tree served beside this one,
   requests taken in turn); and replication lag with every station recording at `--rate` cycles
   per second (its full cut rate) in a process of its own while its replicator loop ships.

Run: .venv/bin/python bench/central_scale.py [--cuts 10000000] [--stations 50] (as root)
The bench database is dropped with its server at the end.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import fleet_replication as fr  # noqa: E402

from fixtures import pgcluster  # noqa: E402
from rig.interface.fleet import dispatch  # noqa: E402
from rig.interface.fleet.central import CentralStore  # noqa: E402
from rig.interface.fleet.replicator import (  # noqa: E402
    ReplicatorLoop,
    StoreSource,
    replicate_store,
)
from rig.store import Store  # noqa: E402

DRIVES = 8


def station_store(path: Path, rows: list, cuts: int, station: int, models: int) -> list[int]:
    """A station's store of `cuts` cycles over 8 drives; returns the drive ids."""
    store = Store(str(path))
    try:
        campaign = store.new_campaign(
            f"year-{station}", '[campaign]\nname = "year"\ncycles = 1\n', station, "sim"
        )
        drives = [
            store.add_drive(
                campaign,
                ch,
                {
                    "model": f"MODEL-{(station * DRIVES + ch) % models}",
                    "serial": f"S{station}-{ch}",
                    "wwn": "",
                    "firmware": "1.0",
                },
                1 << 30,
                4096,
                (0, 4096),
            )
            for ch in range(DRIVES)
        ]
        for n in range(cuts):
            fr.record(store, drives[n % DRIVES], n // DRIVES + 1, rows[n % len(rows)])
        return drives
    finally:
        store.close()


def fill_by_sql(dsn: str, copies: int, days: float) -> None:
    """Every station's cycles and findings copied `copies` times (seq and store row ids moved
    below the sample's, ended `days / copies` days further back per round)."""
    with CentralStore(dsn) as admin, admin.transaction() as db:
        top = db.execute("SELECT max(seq) AS s, max(local_id) AS l FROM fleet.cycle").fetchone()
        assert top is not None
        seq, local = int(top["s"]) + 1, int(top["l"]) + 1
        step = days * 86400 / copies
        cols = [
            r["column_name"]
            for r in db.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'fleet'"
                " AND table_name = 'cycle' ORDER BY ordinal_position"
            ).fetchall()
        ]
        moved = {
            # before the sample's (negative): the replicator's cursor stays the sample's
            "seq": f"seq - k * {seq}",
            "local_id": f"local_id - k * {local}",
            "ended_at": f"ended_at - k * {step}",
            "started_at": f"started_at - k * {step}",
        }
        values = ", ".join(moved.get(c, c) for c in cols)
        db.execute(
            f"INSERT INTO fleet.cycle ({', '.join(cols)}) SELECT {values}"
            f" FROM fleet.cycle, generate_series(1, {copies}) k"
        )
        db.execute(
            "INSERT INTO fleet.finding SELECT station, campaign_uid, channel,"
            f" seq - k * {seq}, ordinal, class, failure, lba_first, lba_count, expected_gen,"
            " observed_gen, expected_op, observed_op, detail"
            f" FROM fleet.finding, generate_series(1, {copies}) k"
        )
    with CentralStore(dsn) as admin:
        admin._db.autocommit = True
        admin._db.execute("VACUUM ANALYZE")


def timed_child(argv: list[str], timeout: float) -> tuple[float, float, int]:
    """(wall s, peak RSS MiB, exit status) of a child, killed after `timeout`."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, proc.returncode


def latencies(url: str, requests: int, budget_s: float) -> list[float]:
    """Seconds per GET of `url`, one at a time, until `requests` or `budget_s` is spent (a
    request still unanswered at the end of the budget is counted as the budget)."""
    out: list[float] = []
    started = time.perf_counter()
    while len(out) < requests and time.perf_counter() - started < budget_s:
        t = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=budget_s) as answer:
                answer.read()
        except OSError:
            out.append(float("inf"))
            break
        out.append(time.perf_counter() - t)
    return out


def quantiles(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.3f} s (1 request)" if values else "none"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {q[49] * 1000:.0f} ms, p95 {q[94] * 1000:.0f} ms ({len(values)} requests)"


def live_station(dsn: str, name: str, path: str, rows: list, rate: float, seconds: float) -> None:
    """A station recording `rate` cycles per second while the agent's replicator loop ships."""
    store = Store(path)
    drives = [d["id"] for d in store.drives_of(store.campaigns()[0]["id"])]
    seq0 = max(c["seq"] for c in store.cycles_after(store.campaigns()[0]["id"], 0, 10**9))
    loop = ReplicatorLoop(dsn, name, lambda: [StoreSource(path)], interval_s=1.0)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    n, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        fr.record(store, drives[n % DRIVES], seq0 + n // DRIVES + 1, rows[n % len(rows)])
        n += 1
        time.sleep(max(0.0, started + n / rate - time.monotonic()))
    time.sleep(5)  # the last rounds
    loop.stop.set()
    thread.join(30)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=10_000_000)
    parser.add_argument("--stations", type=int, default=50)
    parser.add_argument("--sample", type=int, default=400, help="cycles per station, replicated")
    parser.add_argument("--findings", type=int, default=2, help="findings kept per template")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--days", type=float, default=365)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--page-budget", type=float, default=120, help="s per page's requests")
    parser.add_argument(
        "--split", action="store_true", help="only the report, its read and the rest timed apart"
    )
    parser.add_argument("--first-budget", type=float, default=300, help="s for a first request")
    parser.add_argument("--report-timeout", type=float, default=600)
    parser.add_argument("--rate", type=float, default=8.0, help="cycles/s per live station")
    parser.add_argument("--lag-seconds", type=float, default=30)
    parser.add_argument(
        "--only-dashboard", action="store_true", help="no lag, no report: the dashboard alone"
    )
    parser.add_argument(
        "--baseline",
        help="a tree of another version (git archive main | tar -x -C DIR): its dashboard"
        " served beside this one's, their requests taken in turn",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="the database's folder (e.g. /var/tmp/central10m-db), kept after the run; a folder"
        " that holds one from an earlier run is used as it is (no fill, no lag: the report and"
        " the dashboard timed again). Remove it with rm -r when done",
    )
    parser.add_argument("--only-report", action="store_true", help="no lag, no dashboard")
    parser.add_argument(
        "--cut-rows", action="store_true", help="the report with --cut-rows (cuts.csv listed)"
    )
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()}, {os.cpu_count()} cores")
    if args.keep is not None and (args.keep / "data" / "PG_VERSION").exists():
        work = Path(tempfile.mkdtemp(prefix="rig-bench-central-", dir="/var/tmp"))
        try:
            with pgcluster.cluster(listen="127.0.0.1", fsync=True, keep=args.keep) as pg:
                print(f"reusing the database in {args.keep}", flush=True)
                measure(pg, args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"load after: {os.getloadavg()}")
        return
    work = Path(tempfile.mkdtemp(prefix="rig-bench-central-", dir="/var/tmp"))
    try:
        rows = fr.templates(work)
        rows = [(r, f[: args.findings], e) for r, f, e in rows]
        per_cut = sum(len(f) for _, f, _ in rows) / len(rows)
        print(f"templates: {len(rows)} cycles, {per_cut:.2f} findings each", flush=True)
        stores = []
        for s in range(args.stations):
            stores.append(work / f"st{s}.sqlite")
            station_store(stores[-1], rows, args.sample, s, args.models)
        with pgcluster.cluster(listen="127.0.0.1", fsync=True, keep=args.keep) as pg:
            run(pg, args, rows, stores, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load after: {os.getloadavg()}")


def run(pg: pgcluster.Cluster, args: argparse.Namespace, rows: list, stores: list, work: Path):
    dispatch.apply_queue_schema(pg.dsn())
    with CentralStore(pg.dsn()) as admin:
        admin.migrate()
        for s in range(args.stations):
            admin.add_station(f"st{s}", "x")
        admin.add_user("viewer", "x", "reader")
    t = time.perf_counter()
    for s, path in enumerate(stores):
        store = Store(str(path), read_only=True)
        with CentralStore(pg.dsn(f"rig_station_st{s}")) as central:
            replicate_store(store, central, f"st{s}")
        store.close()
    sample = args.stations * args.sample
    print(f"sample: {sample} cycles replicated in {time.perf_counter() - t:.1f} s", flush=True)
    copies = max(0, round(args.cuts / sample) - 1)
    t = time.perf_counter()
    fill_by_sql(pg.dsn(), copies, args.days)
    print(f"SQL fill: {copies} copies in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    with CentralStore(pg.dsn()) as admin:
        admin.rebuild_summaries()
        counts = admin._one(
            "SELECT (SELECT count(*) FROM fleet.cycle) AS cycles,"
            " (SELECT count(*) FROM fleet.finding) AS findings,"
            " (SELECT sum(rows) FROM fleet.day_cycles) AS summed,"
            " (SELECT count(*) FROM fleet.day_class) AS class_rows,"
            " (SELECT count(*) FROM fleet.drive_cycles) AS drive_rows,"
            " (SELECT count(*) FROM fleet.drive_class) AS drive_class_rows,"
            " pg_size_pretty(pg_database_size('rig')) AS size"
        )
    print(f"summaries rebuilt in {time.perf_counter() - t:.1f} s: {counts}", flush=True)
    if not (args.split or args.only_dashboard or args.only_report):
        lag(pg, args, rows, stores)
    measure(pg, args, work)


def measure(pg: pgcluster.Cluster, args: argparse.Namespace, work: Path) -> None:
    """On the filled database: the EXPLAIN of a model's year, then the report (whole, or its
    read and the rest apart: `--split`) and the dashboard, as the options say."""
    viewer = pg.dsn("viewer", "x", "127.0.0.1")
    with CentralStore(viewer) as reader:
        today = datetime.date.today()
        plan = reader.explain_model_days("MODEL-1", today - datetime.timedelta(365), today)
    print("EXPLAIN of a model's year:\n  " + plan.replace("\n", "\n  "), flush=True)
    if args.split:
        split_report(viewer, args.report_timeout)
        return
    if args.only_dashboard:
        dashboard(viewer, args)
        return
    out = work / "report"
    wall, rss, code = timed_child(
        [
            sys.executable,
            "-m",
            "rig.interface.cli",
            "report",
            "--central",
            viewer,
            "--out",
            str(out),
        ]
        + (["--cut-rows"] if args.cut_rows else []),
        args.report_timeout,
    )
    print(f"rig report --central: {wall:.1f} s, peak RSS {rss:.0f} MiB, exit {code}", flush=True)
    print(f"load: {os.getloadavg()}", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    if not args.only_report:
        dashboard(viewer, args)


SPLIT = """
import resource, sys, tempfile, time
t = time.perf_counter()
from reports import export
from reports.load import central
from rig.interface.fleet.central import CentralStore
with CentralStore(sys.argv[1]) as store:
    aggregates, spent = store.cut_aggregates, []
    def timed(*args):
        start = time.perf_counter()
        try:
            return aggregates(*args)
        finally:
            spent.append(time.perf_counter() - start)
    store.cut_aggregates = timed
    data = central.read(store)
read = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
with tempfile.TemporaryDirectory() as out:
    export.write_dataset_report(data, out)
print(f"read {read:.1f} s (of it the aggregates' query {sum(spent):.1f} s;"
      f" peak RSS then {rss:.0f} MiB), analysis and files {time.perf_counter() - t - read:.1f} s,"
      f" cycles {sum(len(r.cuts) for r in data.runs)}")
"""


def split_report(dsn: str, timeout: float) -> None:
    """The report's read of the central database and the rest (analysis, files) timed apart."""
    done = subprocess.run(
        [sys.executable, "-c", SPLIT, dsn],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(f"report split: {done.stdout.strip() or done.stderr.strip()[-500:]}", flush=True)


def start_server(dsn: str, code: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`rig serve --central` run from the tree `code` (this one, or a baseline's export), once
    it answers."""
    port = pgcluster.free_port()
    env = dict(os.environ, PYTHONPATH=str(code))  # (ahead of the venv's own rig)
    serve = subprocess.Popen(
        [sys.executable, "-m", "rig.interface.cli", "serve", "--central", dsn, "--port", str(port)],
        cwd=code,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/api/overview", timeout=600).read()
            break
        except OSError:
            time.sleep(0.5)
    return serve, base


def alternating(urls: list[str], requests: int, budget_s: float) -> list[list[float]]:
    """Seconds per GET of each url, taken in turn (one request of each per round, so both see
    the same load), each until `requests` or its own `budget_s` of requests is spent."""
    out: list[list[float]] = [[] for _ in urls]
    spent = [0.0 for _ in urls]
    while True:
        asked = False
        for i, url in enumerate(urls):
            if len(out[i]) >= requests or spent[i] >= budget_s:
                continue
            found = latencies(url, 1, budget_s)
            out[i] += found
            spent[i] += found[0]
            asked = True
        if not asked:
            return out


def dashboard(dsn: str, args: argparse.Namespace) -> None:
    trees = [("this tree", REPO)] + ([("baseline", Path(args.baseline))] if args.baseline else [])
    servers = [start_server(dsn, code) for _, code in trees]
    try:
        for name, path in (
            ("overview", "/"),
            ("overview fragment", "/fragment/overview"),
            ("model page", f"/model/{quote('MODEL-1')}"),
        ):
            for (tree, _), (_, base) in zip(trees, servers, strict=True):
                first = latencies(base + path, 1, args.first_budget)
                print(f"dashboard {name} ({tree}): first request {first[0]:.2f} s", flush=True)
            found = alternating([b + path for _, b in servers], args.requests, args.page_budget)
            for (tree, _), times in zip(trees, found, strict=True):
                print(f"dashboard {name} ({tree}): {quantiles(times)}", flush=True)
    finally:
        for serve, _ in servers:
            serve.terminate()
            serve.wait(30)


def lag(pg: pgcluster.Cluster, args: argparse.Namespace, rows: list, stores: list) -> None:
    with CentralStore(pg.dsn()) as admin:
        before = {f"st{s}": len(admin.replication_lags(f"st{s}")) for s in range(args.stations)}
    procs = [
        multiprocessing.Process(
            target=live_station,
            args=(
                pg.dsn(f"rig_station_st{s}"),
                f"st{s}",
                str(path),
                rows,
                args.rate,
                args.lag_seconds,
            ),
        )
        for s, path in enumerate(stores)
    ]
    started = time.time()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    lags: list[float] = []
    with CentralStore(pg.dsn()) as admin:
        for station in before:
            rows_ = admin._read(
                "SELECT extract(epoch FROM replicated_at) - ended_at AS lag FROM fleet.cycle"
                " WHERE station = %s AND ended_at >= %s",
                (station, started),
            )
            lags += [float(r["lag"]) for r in rows_]
    sent = round(args.rate * args.lag_seconds) * args.stations
    print(
        f"lag, {args.stations} stations at {args.rate:g} cycles/s each for"
        f" {args.lag_seconds:g} s: {len(lags)} of ~{sent} cycles arrived; "
        + (quantiles(lags).replace("requests", "cycles") if lags else "none"),
        flush=True,
    )


if __name__ == "__main__":
    main()
