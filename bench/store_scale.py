"""The store at scale: bytes per cut, the record phase's time per cut as the file grows, and the
time to load the report's dataset from it.

Templates come from a real campaign: `rig demo --in-process` (the production campaign on
in-process simulated drives) writes a store; the bench then records `--cuts` cycles into a fresh
store through the production `Store.record_cycle`, each cycle a copy of a template cycle (its
ledger blob, findings, events and LBA-state snapshot as the demo recorded them, spread over the
demo's drives), in the campaign's own pattern: one transaction per cycle. It prints the record
time per cut over successive slices (flat = no slow-down as the file grows), the file's size per
cut, and the wall time of `reports.load.dataset.load` and of the whole report (`reports.export`).

Expected (docs/architecture.md, "Speed targets"): a store fast enough for millions of cuts: record
time per cut flat and far below a cycle's length, a few KiB per cut.

A million cuts through `record_cycle` takes hours at 0.4-5 ms a cut: `--record N` records only
the first N of `--cuts` that way and copies the rest by SQL (cycle and finding rows, doubling:
not events, ledgers or LBA state, which a report of v8+ rows does not read), then rebuilds the
store's v11 summaries with `Store.rebuild_summaries`, the code of the v11 migration's backfill:
what the report reads is what the product would have written (its time is printed).

`--status` times `rig status` (table and --json) in a child instead, `--report` the whole report
in a child (`--phases`: and its peak RSS in each phase of the report, sampled), each from
`--code DIR`'s checkout (default this one: give an older commit's, `git archive`d, for a before
figure). `--code` given more than once, with `--rounds N`, alternates the
checkouts N times in one run (the machine is shared: a same-run comparison). `--v12-cost DEMO`
records `--cuts` cuts with and without store v12's additions (alternating, one run). `--migrate`
opens a kept store with this checkout's `Store` (a writer: it upgrades an older store, printing
the backfill's progress) and prints the time. Each run prints the CPU (`lscpu`) and the load.

Run: .venv/bin/python bench/store_scale.py [--cuts 100000] [--record N]
        [--report [--phases] | --status | --migrate] [--keep DIR | --store PATH] [--code DIR]...
        [--rounds N]
     .venv/bin/python bench/store_scale.py --v12-cost DEMO.sqlite [--cuts 3000]
(--keep DIR records into DIR and keeps the store; --store PATH reports on a kept store.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rig.store import SCHEMA_VERSION, CycleRow, Store, cycle_sums  # noqa: E402


def demo_store(work: Path) -> Path:
    out = work / "demo"
    subprocess.run(
        [sys.executable, "-m", "rig.interface.cli", "demo", "--in-process", "--quiet",
         "--cycles", "40", "--out", str(out)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return out / "demo.sqlite"


def templates(path: Path) -> list[dict[str, Any]]:
    """Every cycle of the demo store with what `record_cycle` takes."""
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    names = [f.name for f in fields(CycleRow)]
    found = []
    for c in db.execute("SELECT * FROM cycle ORDER BY id"):
        ledger = db.execute("SELECT writes FROM ledger WHERE cycle_id = ?", (c["id"],)).fetchone()
        state = db.execute("SELECT state FROM lba_state WHERE drive_id = ?", (c["drive_id"],))
        findings = [
            {
                "cls": f["class"],
                "failure": f["failure"],
                "lba_first": f["lba_first"],
                "lba_count": f["lba_count"],
                "expected_gen": f["expected_gen"],
                "observed_gen": f["observed_gen"],
                "expected_op": f["expected_op"],
                "observed_op": f["observed_op"],
                "detail": json.loads(f["detail"]),
            }
            for f in db.execute("SELECT * FROM finding WHERE cycle_id = ?", (c["id"],))
        ]
        events = [
            (e["host_ns"], e["kind"], json.loads(e["detail"]))
            for e in db.execute("SELECT * FROM event WHERE cycle_id = ?", (c["id"],))
        ]
        found.append(
            {
                "row": {n: c[n] for n in names},
                "findings": findings,
                "events": events,
                "ledger": ledger[0] if ledger else None,
                "state": state.fetchone()[0],
            }
        )
    return found


def fill(path: Path, cuts: int, template: list[dict[str, Any]], source: Path) -> list[float]:
    """Record `cuts` cycles; returns the mean record time (s) of each tenth."""
    store = Store(str(path))
    demo = sqlite3.connect(source)
    config, seed = demo.execute("SELECT config, seed FROM campaign").fetchone()
    campaign = store.new_campaign("store-scale", config, seed, "simulated")
    drives = {}
    for d in demo.execute(
        "SELECT id, channel, model, serial, wwn, firmware, size_bytes, block_size,"
        " region_first_lba, region_blocks, profile FROM drive"
    ):
        identity = dict(zip(("model", "serial", "wwn", "firmware"), d[2:6], strict=True))
        drives[d[0]] = store.add_drive(campaign, d[1], identity, d[6], d[7], (d[8], d[9]), d[10])
    slices: list[float] = []
    per_slice = max(1, cuts // 10)
    started = time.perf_counter()
    seqs: dict[int, int] = {}
    for i in range(cuts):
        t = template[i % len(template)]
        drive = drives[t["row"]["drive_id"]]
        seqs[drive] = seqs.get(drive, 0) + 1
        row = CycleRow(**dict(t["row"], drive_id=drive, seq=seqs[drive]))
        store.record_cycle(row, t["findings"], t["events"], t["ledger"], t["state"])
        if (i + 1) % per_slice == 0:
            now = time.perf_counter()
            slices.append((now - started) / per_slice)
            started = now
    store.close()
    return slices


def v12_cost(work: Path, source: Path, cuts: int) -> None:
    """What store v12 adds to `record_cycle` (its cycle_total upsert and cycle_return index
    entry): the demo's templates recorded into two fresh stores, one as v12 makes it and one
    without the table, the index and the upsert, in alternating blocks of 100 cuts in this one
    process (a same-run comparison on a shared machine); CPU time per cut of each."""
    template = templates(source)
    stores: dict[str, tuple[Store, dict[int, int]]] = {}
    demo = sqlite3.connect(source)
    for name in ("v12", "without v12"):
        store = Store(str(work / f"{name.replace(' ', '_')}.sqlite"))
        campaign = store.new_campaign("v12-cost", "", 1, "simulated")
        drives = {}
        for d in demo.execute("SELECT id, channel, model, serial FROM drive"):
            identity = {"model": d[2], "serial": d[3], "wwn": "", "firmware": ""}
            drives[d[0]] = store.add_drive(campaign, d[1], identity, 1 << 30, 4096, (0, 9))
        if name != "v12":
            with store.transaction() as db:
                db.execute("DROP INDEX cycle_return")
                db.execute("DROP TABLE cycle_total")
        stores[name] = (store, drives)
    spent = dict.fromkeys(stores, 0.0)
    seqs: dict[tuple[str, int], int] = {}
    keep = cycle_sums.add_cycle
    for block in range(0, cuts, 100):
        for name, (store, drives) in stores.items():
            cycle_sums.add_cycle = keep if name == "v12" else (lambda db, cycle_id: None)
            started = time.process_time()
            for i in range(block, min(cuts, block + 100)):
                t = template[i % len(template)]
                drive = drives[t["row"]["drive_id"]]
                seq = seqs[name, drive] = seqs.get((name, drive), 0) + 1
                row = CycleRow(**dict(t["row"], drive_id=drive, seq=seq))
                store.record_cycle(row, t["findings"], t["events"], t["ledger"], t["state"])
            spent[name] += time.process_time() - started
    cycle_sums.add_cycle = keep
    for name, (store, _) in stores.items():
        store.close()
        print(f"record_cycle, {name}: {spent[name] / cuts * 1000:.3f} ms CPU per cut")
    print(f"v12 adds {(spent['v12'] / spent['without v12'] - 1) * 100:.1f} % ({cuts} cuts each)")


def copy_by_sql(path: Path, cuts: int) -> None:
    """Grow the store to `cuts` cycles by copying its cycles (from the first) and their findings
    in SQL, each copy's seq after its drive's last; then rebuild the v11 summaries."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = DELETE")  # one big copy: no WAL of it to checkpoint
    db.execute("PRAGMA synchronous = OFF")
    columns = [r[1] for r in db.execute("PRAGMA table_info(cycle)") if r[1] not in ("id", "seq")]
    finding = [r[1] for r in db.execute("PRAGMA table_info(finding)") if r[1] != "id"]
    started = time.perf_counter()
    while (have := db.execute("SELECT MAX(id), COUNT(*) FROM cycle").fetchone())[1] < cuts:
        top, count = have
        first = db.execute("SELECT MIN(id) FROM cycle").fetchone()[0]
        take = min(count, cuts - count)
        db.execute("BEGIN")
        db.execute("CREATE TEMP TABLE last_seq AS SELECT drive_id, MAX(seq) AS s FROM cycle"
                   " GROUP BY drive_id")  # fmt: skip
        db.execute(
            f"INSERT INTO cycle (id, seq, {', '.join(columns)}) SELECT c.id - ? + ? + 1,"
            f" c.seq + l.s, {', '.join('c.' + n for n in columns)} FROM cycle c"
            " JOIN last_seq l ON l.drive_id = c.drive_id WHERE c.id < ? ORDER BY c.id",
            (first, top, first + take),
        )
        db.execute(
            f"INSERT INTO finding ({', '.join(finding)}) SELECT"
            f" {', '.join('cycle_id - ? + ? + 1' if n == 'cycle_id' else n for n in finding)}"
            " FROM finding WHERE cycle_id >= ? AND cycle_id < ? ORDER BY id",
            (first, top, first, first + take),
        )
        db.execute("DROP TABLE last_seq")
        db.execute("COMMIT")
        print(f"  copied by SQL: {count} -> {count + take} cuts,"
              f" {time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
    db.execute("PRAGMA journal_mode = WAL")
    db.close()
    store = Store(str(path))
    started = time.perf_counter()
    store.rebuild_summaries("Store.rebuild_summaries")  # (its progress on stderr)
    print(f"Store.rebuild_summaries (the v11 and v12 backfills):"
          f" {time.perf_counter() - started:.1f} s")  # fmt: skip
    store.close()


# `--phases`: the child samples its own RSS (/proc/self/statm, every 5 ms) and prints the peak
# of each phase of the report (the stage of reports.export that runs; "other": the imports and
# what no stage below covers), from whichever checkout it runs
PHASES = """
import os, sys, threading, time
from reports import export
from reports.analysis import reliability as analysis
from reports.load import dataset
from reports.render import csv_tables, deferred
page, phase, peaks = os.sysconf("SC_PAGE_SIZE"), ["other"], {}
def sample():
    while True:
        rss = int(open("/proc/self/statm").read().split()[1]) * page
        peaks[phase[0]] = max(peaks.get(phase[0], 0), rss)
        time.sleep(0.005)
def staged(module, name, label):
    inner = getattr(module, name)
    def run(*args, **kwargs):
        before, phase[0] = phase[0], label(args) if callable(label) else label
        try:
            return inner(*args, **kwargs)
        finally:
            phase[0] = before
    setattr(module, name, run)
staged(dataset, "load", "dataset.load")
staged(analysis, "analyse", "analysis")
staged(deferred, "write", lambda a: "writing " + os.path.basename(a[0]).split("-RIG")[0])
staged(csv_tables, "write_csvs", "the CSV tables")
threading.Thread(target=sample, daemon=True).start()
time.sleep(0.05)
export.write_report([sys.argv[1]], sys.argv[2])
time.sleep(0.05)
print("  peak RSS by phase: " + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in peaks.items())
      + " MiB", flush=True)
"""


def report_in_child(path: Path, out: Path, checkout: Path = REPO, phases: bool = False) -> None:
    """The whole report (`reports.export.write_report`) in a child process run from `checkout`:
    its wall time, CPU time and peak RSS (its own rusage, from wait4: the bench's templates do
    not count); `phases`: also the child's peak RSS in each phase, sampled."""
    code = "import sys; from reports import export; export.write_report([sys.argv[1]], sys.argv[2])"
    code = PHASES if phases else code
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code, str(path), str(out)], cwd=checkout)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"report failed: exit {child.returncode}")
    size = sum(p.stat().st_size for p in out.iterdir()) / 2**20
    print(f"reports.export.write_report (code of {checkout}): {wall:.1f} s wall,"
          f" CPU {usage.ru_utime:.1f} s user + {usage.ru_stime:.1f} s sys,"
          f" peak RSS {usage.ru_maxrss / 1024:.0f} MiB,"
          f" output {size:.0f} MiB (load {os.getloadavg()[0]:.1f})")  # fmt: skip


def status_in_child(path: Path, code: Path) -> None:
    """`rig status` and `rig status --json` of the store, each in a child run from the checkout
    `code` (this one, or an older commit's for a before/after figure): wall time and peak RSS
    (the child's own rusage, from wait4)."""
    for extra in ([], ["--json"]):
        command = [sys.executable, "-m", "rig.interface.cli", "status", str(path), *extra]
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=code, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: a drive failed
            raise SystemExit(f"rig status failed: exit {os.waitstatus_to_exitcode(status)}")
        rss, load = usage.ru_maxrss / 1024, os.getloadavg()[0]
        print(f"rig status {' '.join(extra)}(code of {code}): {wall:.2f} s wall,"
              f" CPU {usage.ru_utime:.2f} s user + {usage.ru_stime:.2f} s sys,"
              f" peak RSS {rss:.0f} MiB (load {load:.1f})")  # fmt: skip


def migrate(path: Path) -> None:
    """Open the store as a writer does (an older one is upgraded; its progress on stderr)."""
    started = time.perf_counter()
    Store(str(path)).close()
    print(f"Store(path) (migration to v{SCHEMA_VERSION}): {time.perf_counter() - started:.1f} s")


def machine() -> str:
    """The CPU model (lscpu) and the load (uptime) of this run."""
    cpu = "?"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        cpu = next((ln.split(":", 1)[1].strip() for ln in lscpu.splitlines()
                    if ln.startswith("Model name")), "?")  # fmt: skip
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return f"machine: CPU {cpu!r}, nproc {os.cpu_count()}, uptime: {uptime}"


def record(work: Path, cuts: int, through_store: int) -> Path:
    source = demo_store(work)
    template = templates(source)
    path = work / "scale.sqlite"
    slices = fill(path, through_store, template, source)
    print(f"cuts recorded: {through_store} (templates: {len(template)} demo cycles)")
    print("record_cycle per cut, by tenth of the run (ms): "
          + " ".join(f"{s * 1000:.2f}" for s in slices))  # fmt: skip
    if cuts > through_store:
        copy_by_sql(path, cuts)
    size = sum(p.stat().st_size for p in work.glob("scale.sqlite*"))
    print(f"file: {size / 2**20:.1f} MiB, {size / cuts / 1024:.2f} KiB per cut")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuts", type=int, default=100_000)
    parser.add_argument(
        "--record", type=int, metavar="N", help="record N cuts by record_cycle, copy the rest"
    )
    parser.add_argument("--report", action="store_true", help="also time the whole HTML report")
    parser.add_argument(
        "--phases", action="store_true", help="with --report: peak RSS of each phase (sampled)"
    )
    parser.add_argument("--keep", metavar="DIR", help="record into DIR and keep the store there")
    parser.add_argument("--store", metavar="PATH", help="skip recording: use this store")
    parser.add_argument(
        "--status", action="store_true", help="time `rig status` instead of loading the report"
    )
    parser.add_argument("--migrate", action="store_true", help="open (upgrade) the store, timed")
    parser.add_argument(
        "--v12-cost", metavar="DEMO", help="record_cycle with and without v12, from this demo store"
    )
    parser.add_argument(
        "--code", metavar="DIR", action="append", help="run status / report from this checkout"
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternate the --code checkouts")
    args = parser.parse_args()
    checkouts = [Path(c) for c in args.code or [str(REPO)]]
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory(dir=args.keep or REPO / "bench") as tmp:
        work = Path(tmp)
        if args.v12_cost:
            v12_cost(work, Path(args.v12_cost), args.cuts)
            return
        if args.store:
            path = Path(args.store)
        else:
            through_store = min(args.record or args.cuts, args.cuts)
            path = record(Path(args.keep) if args.keep else work, args.cuts, through_store)
        if args.migrate:
            migrate(path)
        elif args.status or args.report:  # the report's time includes loading its dataset
            for _ in range(args.rounds):
                for checkout in checkouts:
                    if args.status:
                        status_in_child(path, checkout)
                    else:
                        report_in_child(path, work / "report", checkout, args.phases)
        else:
            from reports.load import dataset

            started = time.perf_counter()
            runs = dataset.load([str(path)]).runs
            loaded = time.perf_counter() - started
            print(
                f"reports.load.dataset.load: {loaded:.1f} s ({sum(len(r.cuts) for r in runs)} cuts)"
            )
        print(machine())


if __name__ == "__main__":
    main()
