"""Writer throughput against Debian's fio on the same loop device (docs/architecture.md,
"Speed targets").

Cases: 128 KiB sequential writes and 4 KiB random writes, queue depth 32, O_DIRECT, no flushes.
- fio: `--ioengine=libaio --iodepth=32 --direct=1 --numjobs=1`, one sequential stream (seq) or
  random over the whole device (rand), no verification headers (plain buffers);
- rig native: `rig.io.workload.Writer` with 32 slots (one request in flight per slot, each in its
  own stripe: 32 sequential streams, or random within the stripes), every block generated with its
  per-sector headers and logged in the ledger, the C AIO engine; the mean number of its requests
  in flight over the measured window and the share of it with none in flight (from the ledger's
  timestamps) show whether the queue stays full;
- rig threads: the same workload through 32 Python threads (the path for targets without a file
  descriptor), to show why the engine is in C.
Runs are interleaved (fio, native, threads, fio, ...) and the ratios are min / median / max of
the per-round ratios, so a slow moment of this shared machine hits both sides of a ratio alike.
Beside the throughput, the CPU seconds each spends per GB written (fio: the child's rusage; the
rig: the process's CPU time, all threads): a figure the machine's load does not change much, and
the one that decides who falls behind when cores are scarce.

The target: a loop device (`losetup --direct-io=on`, 4 KiB sectors) over a preallocated file on
the host disk (default, under /work) or on tmpfs (`--tmpfs`: no device time, so the CPU cost of
the writer shows fully). Only the loop device and file this script creates are touched.

Each round also prints, on stderr, both sides' figures and their involuntary context switches
(rusage `ru_nivcsw`: the times the scheduler took a CPU away; the rig runs two busy threads,
its engine and its planner, fio one).

Beside the medians, the per-round ratio of the rig's CPU per GB to fio's (min / median / max):
the figure docs/architecture.md, "Speed targets" bounds (<= 1.2x). `--code DIR` runs another
checkout's rig (its `rig/` and built native library) under this script, for before/after runs
alternated in the same minutes.

Run: .venv/bin/python bench/writer_vs_fio.py [--seconds 4] [--rounds 3] [--tmpfs]
     [--no-threads] [--case 4k-rand-qd32] [--code DIR]   (root)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# the rig under test: this checkout, or another one's (`--code DIR`, read before the imports)
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv else REPO
sys.path.insert(0, str(CODE))

from rig.io.blockio import DirectTarget  # noqa: E402
from rig.io.ledger import CycleLog, LbaState  # noqa: E402
from rig.io.workload import Workload, Writer, WriterContext  # noqa: E402

SIZE_MIB = 1024
CASES = {  # name: (fio rw, block size, rig workload)
    "128k-seq-qd32": (
        "write",
        131072,
        Workload(workers=32, write_blocks=(32,), sequential=True, layout="stream", flush_every=0),
    ),
    "4k-rand-qd32": (
        "randwrite",
        4096,
        Workload(workers=32, write_blocks=(1,), layout="stream", flush_every=0),
    ),
}


def fio_mb_s(devnode: str, rw: str, block: int, seconds: float) -> tuple[float, float]:
    """(MB/s, CPU seconds per GB written) of one fio run."""
    args = [
        "fio",
        "--name=bench",
        f"--filename={devnode}",
        f"--rw={rw}",
        f"--bs={block}",
        "--ioengine=libaio",
        "--iodepth=32",
        "--direct=1",
        "--numjobs=1",
        "--time_based",
        f"--runtime={seconds}",
        "--randrepeat=0",
        "--norandommap",
        "--output-format=json",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    job = json.loads(out)["jobs"][0]["write"]
    return float(job["bw_bytes"]) / 1e6, cpu / (float(job["io_bytes"]) / 1e9)


def rig_mb_s(
    devnode: str, load: Workload, engine: str, seconds: float
) -> tuple[float, float, float, float]:
    """(MB/s, CPU seconds per GB written, mean requests in flight, share of time with none in
    flight) of the rig's writer (all its threads); the last two from the ledger's own
    timestamps over the measured window."""
    target = DirectTarget(devnode)
    try:
        state = LbaState(0, target.nblocks)
        log = CycleLog()
        stop = threading.Event()
        load = Workload(**{**load.__dict__, "engine": engine})
        writer = Writer(load, WriterContext(1, target, state, log, stop), seed=7)
        cpu = time.process_time()
        writer.start()
        time.sleep(0.3)  # let the batch size settle, as fio's ramp
        start_ns = time.monotonic_ns()
        time.sleep(seconds)
        end_ns = time.monotonic_ns()
        stop.set()
        writer.join(30)
        cpu = time.process_time() - cpu
        done = log.column("complete_ns")
        inside = (done >= start_ns) & (done < end_ns) & (log.column("status") == 0)
        nbytes = int(log.column("nblocks")[inside].sum()) * target.block_size
        everything = int(log.column("nblocks")[log.column("status") == 0].sum()) * target.block_size
        issued = np.clip(log.column("issue_ns"), start_ns, end_ns)
        completed = np.clip(np.where(done < 0, end_ns, done), start_ns, end_ns)
        depth = float((completed - issued).sum()) / (end_ns - start_ns)
        mb_s = nbytes / ((end_ns - start_ns) / 1e9) / 1e6
        return mb_s, cpu / (everything / 1e9), depth, idle_share(issued, completed)
    finally:
        target.close()


def idle_share(issued: np.ndarray, completed: np.ndarray) -> float:
    """Share of the window [min, max] of these times with no request in flight."""
    times = np.concatenate([issued, completed])
    steps = np.concatenate([np.ones(len(issued)), -np.ones(len(completed))])
    order = np.lexsort((-steps, times))  # at equal times a completion does not open a gap
    times, depth = times[order], np.cumsum(steps[order])
    span = float(times[-1] - times[0]) if len(times) else 0.0
    gaps = np.diff(times)[depth[:-1] == 0]
    return float(gaps.sum()) / span if span else 0.0


def attach(image: Path) -> str:
    for _ in range(20):  # other users of this machine allocate loop devices too
        found = subprocess.run(
            ["losetup", "--find", "--show", "--direct-io=on", "--sector-size=4096", str(image)],
            capture_output=True,
            text=True,
        )
        if found.returncode == 0:
            return found.stdout.strip()
        time.sleep(0.2)
    raise SystemExit(f"losetup failed: {found.stderr.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tmpfs", action="store_true", help="back the loop device with tmpfs")
    parser.add_argument("--no-threads", action="store_true", help="skip the Python threads path")
    parser.add_argument("--case", choices=sorted(CASES), action="append", help="only these cases")
    parser.add_argument("--code", help="the checkout whose rig/ runs (default: this one)")
    opts = parser.parse_args()
    where = "/dev/shm" if opts.tmpfs else str(REPO.parent if REPO.parent.is_dir() else "/tmp")
    with tempfile.TemporaryDirectory(prefix="rig-bench-fio-", dir=where) as tmp:
        image = Path(tmp) / "target.img"
        subprocess.run(["fallocate", "-l", f"{SIZE_MIB}M", str(image)], check=True)
        devnode = attach(image)
        try:
            print(f"# target: {devnode} over {image} ({SIZE_MIB} MiB, direct-io=on)")
            print(f"# machine: {machine()}")
            print(f"# rig: {CODE}")
            print(f"# {opts.rounds} rounds x {opts.seconds:g} s per run, interleaved")
            print(
                "| case | fio MB/s | rig native MB/s | native/fio min/med/max | rig threads MB/s"
                " | threads/fio min/med/max | CPU s/GB fio | CPU s/GB native | CPU s/GB threads"
                " | CPU native/fio min/med/max | in flight, native (of 32) | idle, native |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
            for name, (rw, block, load) in CASES.items():
                if opts.case and name not in opts.case:
                    continue
                runs: dict[str, list[tuple[float, ...]]] = {
                    "fio": [],
                    "native": [],
                    "threads": [],
                }
                for n in range(1, opts.rounds + 1):
                    loadavg = os.getloadavg()[0]
                    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nivcsw
                    runs["fio"].append(fio_mb_s(devnode, rw, block, opts.seconds))
                    f_switches = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nivcsw - before
                    before = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
                    runs["native"].append(rig_mb_s(devnode, load, "native", opts.seconds))
                    r_switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - before
                    if not opts.no_threads:
                        runs["threads"].append(rig_mb_s(devnode, load, "threads", opts.seconds))
                    (f_mbs, f_cpu), (r_mbs, r_cpu, *_) = runs["fio"][-1], runs["native"][-1]
                    print(f"# {name} round {n} (load {loadavg:.1f}): fio {f_mbs:.0f} MB/s"
                          f" {f_cpu:.3f} s/GB, native {r_mbs:.0f} MB/s {r_cpu:.3f} s/GB:"
                          f" throughput {r_mbs / f_mbs:.2f}, CPU {r_cpu / f_cpu:.2f};"
                          f" involuntary context switches fio {f_switches}, rig {r_switches}",
                          file=sys.stderr, flush=True)  # fmt: skip
                print(f"| {name} | {row(runs)} |", flush=True)
        finally:
            subprocess.run(["losetup", "-d", devnode], check=False)


def row(runs: dict[str, list[tuple[float, ...]]]) -> str:
    """Medians of MB/s; min/median/max of the per-round ratios to fio; medians of CPU seconds
    per GB and of the native writer's mean requests in flight and idle share."""
    fio = runs["fio"]
    cells = [f"{statistics.median(r[0] for r in fio):.0f}"]
    for engine in ("native", "threads"):
        mine = runs[engine]
        if not mine:
            cells += ["-", "-"]
            continue
        ratios = sorted(m[0] / f[0] for m, f in zip(mine, fio, strict=True))
        spread = f"{ratios[0]:.2f} / {statistics.median(ratios):.2f} / {ratios[-1]:.2f}"
        cells += [f"{statistics.median(r[0] for r in mine):.0f}", spread]
    for engine in ("fio", "native", "threads"):
        mine = runs[engine]
        cells.append(f"{statistics.median(r[1] for r in mine):.3f}" if mine else "-")
    cpu = sorted(m[1] / f[1] for m, f in zip(runs["native"], fio, strict=True))
    cells.append(f"{cpu[0]:.2f} / {statistics.median(cpu):.2f} / {cpu[-1]:.2f}")
    cells.append(f"{statistics.median(r[2] for r in runs['native']):.1f}")
    cells.append(f"{100 * statistics.median(r[3] for r in runs['native']):.1f} %")
    return " | ".join(cells)


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    load = os.getloadavg()[0]
    return f"nproc {os.cpu_count()}, {cpu}, kernel {os.uname().release}, load avg {load:.1f}"


if __name__ == "__main__":
    main()
