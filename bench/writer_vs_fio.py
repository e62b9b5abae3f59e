"""Writer throughput against Debian's fio on the same loop device (ARCHITECTURE §7).

Cases: 128 KiB sequential writes and 4 KiB random writes, queue depth 32, O_DIRECT, no flushes.
- fio: `--ioengine=libaio --iodepth=32 --direct=1 --numjobs=1`, one sequential stream (seq) or
  random over the whole device (rand), no verification headers (plain buffers);
- rig native: `rig.workload.Writer` with 32 slots (one request in flight per slot, each in its own
  stripe: 32 sequential streams, or random within the stripes), every block generated with its
  per-sector headers and logged in the ledger, the C AIO engine;
- rig threads: the same workload through 32 Python threads (the path for targets without a file
  descriptor), to show why the engine is in C.
Runs are interleaved (fio, native, threads, fio, ...) and each ratio is the median of per-round
ratios, so a slow moment of this shared machine hits both sides of a ratio alike. Beside the
throughput, the CPU seconds each spends per GB written (fio: the child's rusage; the rig: the
process's CPU time, all threads): a figure the machine's load does not change much, and the one
that decides who falls behind when cores are scarce.

The target: a loop device (`losetup --direct-io=on`, 4 KiB sectors) over a preallocated file on
the host disk (default, under /work) or on tmpfs (`--tmpfs`: no device time, so the CPU cost of
the writer shows fully). Only the loop device and file this script creates are touched.

Run: .venv/bin/python bench/writer_vs_fio.py [--seconds 4] [--rounds 3] [--tmpfs]   (root)
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rig.blockio import DirectTarget  # noqa: E402
from rig.ledger import CycleLog, LbaState  # noqa: E402
from rig.workload import Workload, Writer, WriterContext  # noqa: E402

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


def rig_mb_s(devnode: str, load: Workload, engine: str, seconds: float) -> tuple[float, float]:
    """(MB/s, CPU seconds per GB written) of the rig's writer (all its threads)."""
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
        return nbytes / ((end_ns - start_ns) / 1e9) / 1e6, cpu / (everything / 1e9)
    finally:
        target.close()


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
    opts = parser.parse_args()
    where = "/dev/shm" if opts.tmpfs else str(REPO.parent if REPO.parent.is_dir() else "/tmp")
    with tempfile.TemporaryDirectory(prefix="rig-bench-fio-", dir=where) as tmp:
        image = Path(tmp) / "target.img"
        subprocess.run(["fallocate", "-l", f"{SIZE_MIB}M", str(image)], check=True)
        devnode = attach(image)
        try:
            print(f"# target: {devnode} over {image} ({SIZE_MIB} MiB, direct-io=on)")
            print(f"# machine: {machine()}")
            print(f"# {opts.rounds} rounds x {opts.seconds:g} s per run, interleaved")
            print(
                "| case | fio MB/s | rig native MB/s | native/fio | rig threads MB/s | threads/fio"
                " | CPU s/GB fio | CPU s/GB native | CPU s/GB threads |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for name, (rw, block, load) in CASES.items():
                runs: dict[str, list[tuple[float, float]]] = {
                    "fio": [],
                    "native": [],
                    "threads": [],
                }
                for _ in range(opts.rounds):
                    runs["fio"].append(fio_mb_s(devnode, rw, block, opts.seconds))
                    runs["native"].append(rig_mb_s(devnode, load, "native", opts.seconds))
                    if not opts.no_threads:
                        runs["threads"].append(rig_mb_s(devnode, load, "threads", opts.seconds))
                print(f"| {name} | {row(runs)} |", flush=True)
        finally:
            subprocess.run(["losetup", "-d", devnode], check=False)


def row(runs: dict[str, list[tuple[float, float]]]) -> str:
    """Medians of MB/s, of the per-round ratios to fio, and of CPU seconds per GB."""
    fio = runs["fio"]
    cells = [f"{statistics.median(m for m, _ in fio):.0f}"]
    for engine in ("native", "threads"):
        mine = runs[engine]
        if not mine:
            cells += ["-", "-"]
            continue
        ratio = statistics.median(m / f for (m, _), (f, _) in zip(mine, fio, strict=True))
        cells += [f"{statistics.median(m for m, _ in mine):.0f}", f"{ratio:.2f}"]
    for engine in ("fio", "native", "threads"):
        mine = runs[engine]
        cells.append(f"{statistics.median(c for _, c in mine):.2f}" if mine else "-")
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
