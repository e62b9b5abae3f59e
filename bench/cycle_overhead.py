"""What the rig adds to each power-cut cycle, on the full-system twin, and cuts per hour.

Runs the demo campaign (fixtures/demo.toml: firmware in simavr, FUSE-served loop devices, real
udev events) through the production CLI (`rig run`), once per variant, and reads the store:

- cycle: the cycle's wall span (`cycle.started_at` to `ended_at`, the record phase included);
- write window: write start to the cut edge (`cut_ns - write_start_ns`: the workload the cut
  interrupts, set by `[cut] delay_ms`);
- outage: the cut edge to the drive answering again (`ready` event): the configured off time,
  the drive's own boot and return, and the rig's event-driven detection of both;
- rig overhead = cycle - write window - outage: arming, health, verify, record, and whatever the
  rig waits for that is not the drive (target: < 1 s, docs/architecture.md, "Speed targets");
- per phase: the `phase_ms` event (median per phase).

Variants: the demo as it is (health read after every cut), and with `[health] every = 0`.

Run: .venv/bin/python bench/cycle_overhead.py [--cycles 40]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo.toml"


def campaign(cycles: int, health_every: int | None) -> str:
    text = DEMO.read_text()
    text = re.sub(r"(?m)^cycles = \d+", f"cycles = {cycles}", text)
    tag = f"{os.getpid() % 100000:05d}"  # identities of our own: another twin may be running
    text = re.sub(r'serial = "SIM(\w{3})\d{4}"', rf'serial = "B\g<1>{tag}"', text)
    wwn_tag = f"{os.getpid() % 4096:03x}"
    text = re.sub(r'wwn = "0x5000c500a00(\w{5})"', rf'wwn = "0x5000c501{wwn_tag}\g<1>"', text)
    if health_every is not None:
        text += f"\n[health]\nevery = {health_every}\n"
    return text


def run(work: Path, name: str, text: str) -> tuple[Path, float]:
    path = work / f"{name}.toml"
    path.write_text(text)
    db = work / f"{name}.sqlite"
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "rig.interface.cli", "run", str(path), "--db", str(db), "--quiet"],
        cwd=work, stdout=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    return db, time.monotonic() - started


def quantiles(values: list[float]) -> str:
    if not values:
        return "-"
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return f"{statistics.median(values):7.0f} {p95:7.0f} {values[-1]:7.0f}"


def analyse(db: Path, wall_s: float) -> None:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    ok = con.execute(
        "SELECT c.id, c.started_at, c.ended_at, c.write_start_ns, c.cut_ns,"
        " (SELECT MIN(host_ns) FROM event e WHERE e.cycle_id = c.id AND e.kind = 'ready')"
        " AS ready_ns FROM cycle c WHERE c.status = 'ok'"
    ).fetchall()
    errors = con.execute("SELECT COUNT(*) FROM cycle WHERE status != 'ok'").fetchone()[0]
    cycle, window, outage, overhead = [], [], [], []
    for c in ok:
        if c["ready_ns"] is None or c["cut_ns"] is None:
            continue
        span = (c["ended_at"] - c["started_at"]) * 1000
        w = (c["cut_ns"] - c["write_start_ns"]) / 1e6
        o = (c["ready_ns"] - c["cut_ns"]) / 1e6
        cycle.append(span)
        window.append(w)
        outage.append(o)
        overhead.append(span - w - o)
    phases: dict[str, list[float]] = {}
    for (detail,) in con.execute("SELECT detail FROM event WHERE kind = 'phase_ms'"):
        for phase, ms in json.loads(detail).items():
            phases.setdefault(phase, []).append(ms)
    cuts = con.execute("SELECT COUNT(*) FROM cycle WHERE cut_ns IS NOT NULL").fetchone()[0]
    drives = con.execute("SELECT COUNT(*) FROM drive").fetchone()[0]
    print(f"  cycles ok {len(ok)}, not ok {errors}; campaign wall {wall_s:.0f} s,"
          f" {cuts / wall_s * 3600:.0f} cuts/hour over {drives} drives")  # fmt: skip
    print(f"  {'ms':<24} {'median':>7} {'p95':>7} {'max':>7}")
    for name, values in (
        ("cycle", cycle),
        ("write window", window),
        ("outage (off+return)", outage),
        ("rig overhead", overhead),
    ):
        print(f"  {name:<24} {quantiles(values)}")
    for phase, values in phases.items():
        print(f"  phase {phase:<18} {quantiles(values)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=REPO / "bench") as tmp:
        work = Path(tmp)
        for name, health in (("health-every-cut", None), ("no-health", 0)):
            db, wall = run(work, name, campaign(args.cycles, health))
            print(f"{name}:")
            analyse(db, wall)
    print(f"machine: nproc {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
