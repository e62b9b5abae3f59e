"""Replication into the central PostgreSQL: throughput (cycles per second) and lag.

A real campaign (`rig demo --in-process`, the production campaign on in-process simulated drives)
writes template cycles: their rows, findings (the lying-flush drive's dozens per cut), events.
Each simulated station gets a store of `--cuts` cycles cloned from them through the production
`Store.record_cycle`. Then, against a PostgreSQL of its own (Debian's server, the server's default
durability: fsync on, synchronous commit):

- throughput: 1, then N stations (separate processes, each under its own station role, as agents
  are) ship their whole stores at once through the production replicator (`replicate_store`);
  cycles per second in total, and the CPU seconds the server and the replicators spent;
- lag: one station records cycles at `--rate` per second while its replicator loop (the agent's,
  one round per second) ships them; lag = arrival in PostgreSQL minus the cycle's end.

From these, docs/performance.md states how many stations and drives one server serves.

Run: .venv/bin/python bench/fleet_replication.py [--cuts 3000] [--stations 1,4,8] [--rate 20]
(as root: the server runs as the postgres user)
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fixtures import pgcluster  # noqa: E402
from rig.interface.fleet import dispatch  # noqa: E402
from rig.interface.fleet.central import CentralStore  # noqa: E402
from rig.interface.fleet.replicator import (  # noqa: E402
    ReplicatorLoop,
    StoreSource,
    replicate_store,
)
from rig.store import CycleRow, Store  # noqa: E402

CYCLE_FIELDS = [f for f in CycleRow.__dataclass_fields__ if f not in ("drive_id", "seq")]


def templates(work: Path) -> list[tuple[dict[str, object], list[dict[str, object]], list[tuple]]]:
    out = work / "demo"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rig.interface.cli",
            "demo",
            "--in-process",
            "--cycles",
            "20",
            "--quiet",
            "--out",
            str(out),
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    store = Store(str(out / "demo.sqlite"), read_only=True)
    try:
        campaign = store.campaigns()[0]
        cycles = store.cycles_after(campaign["id"], 0, 10_000)
        ids = [c["id"] for c in cycles]
        findings: dict[int, list[dict[str, object]]] = {}
        for f in store.findings_of_cycles(ids):
            findings.setdefault(f["cycle_id"], []).append(
                {
                    "cls": f["class"],
                    "failure": f["failure"],
                    "lba_first": f["lba_first"],
                    "lba_count": f["lba_count"],
                    "expected_gen": f["expected_gen"],
                    "observed_gen": f["observed_gen"],
                    "expected_op": f["expected_op"],
                    "observed_op": f["observed_op"],
                    "detail": f["detail"],
                }
            )
        events: dict[int, list[tuple]] = {}
        for e in store.cycle_events_of(ids):
            events.setdefault(e["cycle_id"], []).append((e["host_ns"], e["kind"], {}))
        return [
            ({k: c[k] for k in CYCLE_FIELDS}, findings.get(c["id"], []), events.get(c["id"], []))
            for c in cycles
        ]
    finally:
        store.close()


def build_store(path: Path, rows: list, cuts: int) -> None:
    store = Store(str(path))
    try:
        campaign = store.new_campaign("bench", '[campaign]\nname = "bench"\ncycles = 1\n', 1, "sim")
        drives = [
            store.add_drive(
                campaign,
                ch,
                {"model": "M", "serial": f"S{ch}", "wwn": "", "firmware": ""},
                1 << 30,
                4096,
                (0, 4096),
            )
            for ch in range(8)
        ]
        for n in range(cuts):
            record(store, drives[n % 8], n // 8 + 1, rows[n % len(rows)])
    finally:
        store.close()


def record(store: Store, drive: int, seq: int, template: tuple) -> None:
    row, findings, events = template
    store.record_cycle(
        CycleRow(drive_id=drive, seq=seq, **row),
        findings,
        events,
        None,
        None,  # type: ignore[arg-type]
    )


def ship(dsn: str, station: str, path: str, result: multiprocessing.Queue) -> None:
    store = Store(path)
    start = time.perf_counter()
    cpu = time.process_time()
    with CentralStore(dsn) as central:
        shipped = replicate_store(store, central, station)
    result.put((shipped, time.perf_counter() - start, time.process_time() - cpu))
    store.close()


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds of the server: the postmaster with its reaped children (backends that have
    exited), and the backends alive now."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(stat[1])
        if pid == postmaster:
            total += sum(int(x) for x in stat[11:15])  # utime stime cutime cstime
        elif ppid == postmaster:
            total += int(stat[11]) + int(stat[12])
    return total / tick


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=3000, help="cycles per station store")
    parser.add_argument("--stations", default="1,4,8")
    parser.add_argument("--rate", type=float, default=20.0, help="cycles/s for the lag run")
    parser.add_argument("--lag-seconds", type=float, default=30.0)
    return parser.parse_args()


def prepare_central(pg: pgcluster.Cluster, stations: int) -> None:
    """The schema and the stations st0..st<stations> in a fresh server."""
    dispatch.apply_queue_schema(pg.dsn())
    with CentralStore(pg.dsn()) as admin:
        admin.migrate()
        for s in range(stations + 1):
            admin.add_station(f"st{s}", "x")


def warm_up(pg: pgcluster.Cluster, work: Path, rows: list) -> None:
    """Not measured: the server's first WAL segments, catalog caches."""
    warm = work / "warm.sqlite"
    build_store(warm, rows, 400)
    with CentralStore(pg.dsn()) as admin:
        admin.add_station("warm", "x")
    store = Store(str(warm))
    with CentralStore(pg.dsn("rig_station_warm")) as central:
        replicate_store(store, central, "warm")
    store.close()


def throughput(pg: pgcluster.Cluster, stores: list[Path], count: int, cuts: int) -> None:
    """`count` stations ship their whole stores at once; one line of the table."""
    # each round ships to fresh station names: nothing is there yet
    with CentralStore(pg.dsn()) as admin:
        for s in range(count):
            admin.add_station(f"r{count}s{s}", "x")
    result: multiprocessing.Queue = multiprocessing.Queue()
    cpu0 = server_cpu_s(pg.proc.pid)
    start = time.perf_counter()
    procs = [
        multiprocessing.Process(
            target=ship,
            args=(
                pg.dsn(f"rig_station_r{count}s{s}"),
                f"r{count}s{s}",
                str(stores[s]),
                result,
            ),
        )
        for s in range(count)
    ]
    for p in procs:
        p.start()
    outcomes = [result.get() for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - start
    shipped = sum(o[0] for o in outcomes)
    assert shipped == count * cuts, (shipped, count * cuts)
    print(
        f"{count:>8} {shipped:>8} {wall:>8.2f} {shipped / wall:>9.0f} "
        f"{server_cpu_s(pg.proc.pid) - cpu0:>12.2f} "
        f"{sum(o[2] for o in outcomes):>16.2f}"
    )


def lag(pg: pgcluster.Cluster, work: Path, rows: list, rate: float, seconds: float) -> None:
    """A station recording at `rate` while the agent's loop ships."""
    lag_store = work / "live.sqlite"
    build_store(lag_store, rows, 0)
    loop = ReplicatorLoop(
        pg.dsn("rig_station_st0"),
        "st0",
        lambda: [StoreSource(str(lag_store))],
        interval_s=1.0,
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    store = Store(str(lag_store))
    n, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        record(store, 1 + n % 8, n // 8 + 1, rows[n % len(rows)])
        n += 1
        time.sleep(max(0.0, started + n / rate - time.monotonic()))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the last round ships the last cycles
        with CentralStore(pg.dsn()) as admin:
            if len(admin.replication_lags("st0")) == n:
                break
        time.sleep(0.5)
    loop.stop.set()
    thread.join(10)
    store.close()
    with CentralStore(pg.dsn()) as admin:
        lags = sorted(admin.replication_lags("st0"))
    assert len(lags) == n, f"{len(lags)} of {n} cycles arrived"
    q = statistics.quantiles(lags, n=100)
    print(
        f"\nlag at {rate:g} cycles/s for {seconds:.0f} s ({n} cycles,"
        f" replicator round 1 s): p50 {q[49]:.2f} s, p95 {q[94]:.2f} s,"
        f" max {lags[-1]:.2f} s"
    )


def main() -> None:
    args = parse_args()
    counts = [int(x) for x in args.stations.split(",")]
    print(f"load before: {os.getloadavg()[0]:.1f} (1-min), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="rig-bench-fleet-") as tmp:
        work = Path(tmp)
        rows = templates(work)
        findings = sum(len(f) for _, f, _ in rows) / len(rows)
        print(
            f"templates: {len(rows)} cycles of a real campaign, {findings:.1f} findings per cycle"
        )
        stores = []
        for s in range(max(counts)):
            path = work / f"station{s}.sqlite"
            build_store(path, rows, args.cuts)
            stores.append(path)
        with pgcluster.cluster(fsync=True) as pg:
            prepare_central(pg, max(counts))
            warm_up(pg, work, rows)
            print()
            print(
                f"{'stations':>8} {'cycles':>8} {'wall s':>8} {'cycles/s':>9} "
                f"{'server CPU s':>12} {'replicator CPU s':>16}"
            )
            for count in counts:
                throughput(pg, stores, count, args.cuts)
            lag(pg, work, rows, args.rate, args.lag_seconds)
    print(f"load after: {os.getloadavg()[0]:.1f} (1-min)")


if __name__ == "__main__":
    main()
