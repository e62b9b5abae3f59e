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
ratios, so a slow moment of this shared machine hits both sides of a ratio alike.

The target: a loop device (`losetup --direct-io=on`, 4 KiB sectors) over a preallocated file on
the host disk (default, under /work) or on tmpfs (`--tmpfs`: no device time, so the CPU cost of
the writer shows fully). Only the loop device and file this script creates are touched.

Run: .venv/bin/python bench/writer_vs_fio.py [--seconds 4] [--rounds 3] [--tmpfs]   (root)
"""

from __future__ import annotations

import argparse
import json
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


def fio_mb_s(devnode: str, rw: str, block: int, seconds: float) -> float:
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
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    job = json.loads(out)["jobs"][0]["write"]
    return float(job["bw_bytes"]) / 1e6


def rig_mb_s(devnode: str, load: Workload, engine: str, seconds: float) -> float:
    target = DirectTarget(devnode)
    try:
        state = LbaState(0, target.nblocks)
        log = CycleLog()
        stop = threading.Event()
        load = Workload(**{**load.__dict__, "engine": engine})
        writer = Writer(load, WriterContext(1, target, state, log, stop), seed=7)
        writer.start()
        time.sleep(0.3)  # let the batch size settle, as fio's ramp
        start_ns = time.monotonic_ns()
        time.sleep(seconds)
        end_ns = time.monotonic_ns()
        stop.set()
        writer.join(30)
        done = log.column("complete_ns")
        inside = (done >= start_ns) & (done < end_ns) & (log.column("status") == 0)
        nbytes = int(log.column("nblocks")[inside].sum()) * target.block_size
        return nbytes / ((end_ns - start_ns) / 1e9) / 1e6
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
            header = "| case | fio MB/s | rig native MB/s | native/fio | rig threads MB/s |"
            print(header + " threads/fio |")
            print("|---|---|---|---|---|---|")
            for name, (rw, block, load) in CASES.items():
                fio, native, threads = [], [], []
                for _ in range(opts.rounds):
                    fio.append(fio_mb_s(devnode, rw, block, opts.seconds))
                    native.append(rig_mb_s(devnode, load, "native", opts.seconds))
                    if not opts.no_threads:
                        threads.append(rig_mb_s(devnode, load, "threads", opts.seconds))
                ratio_n = statistics.median(n / f for n, f in zip(native, fio, strict=True))
                row = (
                    f"| {name} | {statistics.median(fio):.0f} | {statistics.median(native):.0f}"
                    f" | {ratio_n:.2f} |"
                )
                if threads:
                    ratio_t = statistics.median(t / f for t, f in zip(threads, fio, strict=True))
                    row += f" {statistics.median(threads):.0f} | {ratio_t:.2f} |"
                else:
                    row += " - | - |"
                print(row, flush=True)
        finally:
            subprocess.run(["losetup", "-d", devnode], check=False)


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
