"""The store at scale: bytes per cut, the record phase's time per cut as the file grows, and the
time to load the report's dataset from it.

Templates come from a real campaign: `rig demo --in-process` (the production campaign on
in-process simulated drives) writes a store; the bench then records `--cuts` cycles into a fresh
store through the production `Store.record_cycle`, each cycle a copy of a template cycle (its
ledger blob, findings, events and LBA-state snapshot as the demo recorded them, spread over the
demo's drives), in the campaign's own pattern: one transaction per cycle. It prints the record
time per cut over successive slices (flat = no slow-down as the file grows), the file's size per
cut, and the wall time of `reports.dataset.load` and of the whole report (`reports.export`).

Expected (ARCHITECTURE §7): a store fast enough for millions of cuts: record time per cut flat
and far below a cycle's length, a few KiB per cut.

Run: .venv/bin/python bench/store_scale.py [--cuts 100000] [--report] [--keep DIR | --store PATH]
(--keep DIR records into DIR and keeps the store; --store PATH reports on a kept store.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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

from rig.store import CycleRow, Store  # noqa: E402


def demo_store(work: Path) -> Path:
    out = work / "demo"
    subprocess.run(
        [sys.executable, "-m", "rig.cli", "demo", "--in-process", "--quiet", "--cycles", "40",
         "--out", str(out)],
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


def report_in_child(path: Path, out: Path) -> None:
    """The whole report (`reports.export.write_report`) in a child process: its wall time and
    its peak RSS (ru_maxrss of the child, so the bench's own templates do not count)."""
    code = "import sys; from reports import export; export.write_report([sys.argv[1]], sys.argv[2])"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(path), str(out)], check=True, cwd=REPO)
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, the largest child
    size = sum(p.stat().st_size for p in out.iterdir()) / 2**20
    note = "" if peak > before else " (no larger than an earlier child's)"
    print(f"reports.export.write_report: {wall:.1f} s wall, peak RSS {peak / 1024:.0f} MiB{note},"
          f" output {size:.0f} MiB")  # fmt: skip


def record(work: Path, cuts: int) -> Path:
    source = demo_store(work)
    template = templates(source)
    path = work / "scale.sqlite"
    slices = fill(path, cuts, template, source)
    size = sum(p.stat().st_size for p in work.glob("scale.sqlite*"))
    print(f"cuts recorded: {cuts} (templates: {len(template)} demo cycles)")
    print("record_cycle per cut, by tenth of the run (ms): "
          + " ".join(f"{s * 1000:.2f}" for s in slices))  # fmt: skip
    print(f"file: {size / 2**20:.1f} MiB, {size / cuts / 1024:.2f} KiB per cut")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuts", type=int, default=100_000)
    parser.add_argument("--report", action="store_true", help="also time the whole HTML report")
    parser.add_argument("--keep", metavar="DIR", help="record into DIR and keep the store there")
    parser.add_argument("--store", metavar="PATH", help="skip recording: use this store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.keep or REPO / "bench") as tmp:
        work = Path(tmp)
        if args.store:
            path = Path(args.store)
        else:
            path = record(Path(args.keep) if args.keep else work, args.cuts)
        if args.report:  # the report's time includes loading its dataset
            report_in_child(path, work / "report")
        else:
            from reports import dataset

            started = time.perf_counter()
            runs = dataset.load([str(path)]).runs
            loaded = time.perf_counter() - started
            print(f"reports.dataset.load: {loaded:.1f} s ({sum(len(r.cuts) for r in runs)} cuts)")
        print(f"machine: nproc {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
