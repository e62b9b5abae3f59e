"""Where the native writer's CPU goes, per GB written (the profile behind bench/writer_vs_fio.py).

Runs `rig.io.workload.Writer` (native engine, 32 slots, stream layout, no flushes) on a loop device
over tmpfs (no device time: the CPU cost shows fully) for 128 KiB sequential and 4 KiB random
writes, and splits the process's CPU time into:
- engine: CPU of the writer thread inside `engine_loop` (the C loop: record generation,
  io_submit/io_getevents, timestamps; kernel time of those syscalls included);
- Python: everything else in the process (planning addresses and generations in numpy, the
  per-LBA state, turning each batch into ledger columns).
For reference it also times the record generation alone per GB: version 1 built whole
(`media.build_into`) and version 2 stamped in place into a prepared buffer (`media.Stamper`, what
the engine does at submission).

Run: .venv/bin/python bench/writer_cpu_split.py [--seconds 4]   (root, for the loop device)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.writer_vs_fio import attach, machine  # noqa: E402
from rig.io import media, workload_native  # noqa: E402
from rig.io import workload as workload_module  # noqa: E402
from rig.io.blockio import DirectTarget  # noqa: E402
from rig.io.ledger import CycleLog, LbaState  # noqa: E402

CASES = {
    "128k-seq-qd32": workload_module.Workload(
        workers=32, write_blocks=(32,), sequential=True, layout="stream", flush_every=0
    ),
    "4k-rand-qd32": workload_module.Workload(
        workers=32, write_blocks=(1,), layout="stream", flush_every=0
    ),
}


def split(devnode: str, load: workload_module.Workload, seconds: float) -> tuple[float, ...]:
    inside = [0.0]
    original = workload_native.engine_loop

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            inside[0] += time.thread_time() - start

    workload_native.engine_loop = timed  # type: ignore[assignment]
    target = DirectTarget(devnode)
    try:
        state, log, stop = LbaState(0, target.nblocks), CycleLog(), threading.Event()
        cpu = time.process_time()
        writer = workload_module.Writer(
            load, workload_module.WriterContext(1, target, state, log, stop), seed=1
        )
        writer.start()
        time.sleep(seconds)
        stop.set()
        writer.join(30)
        cpu = time.process_time() - cpu
        gb = int(log.column("nblocks").sum()) * target.block_size / 1e9
        return gb / seconds, cpu / gb, inside[0] / gb, (cpu - inside[0]) / gb
    finally:
        workload_native.engine_loop = original
        target.close()


def generation_s_per_gb() -> float:
    record = media.WriteRecord(1, 0, np.arange(1, 32769, dtype=np.uint64), 0, 1, 1)
    out = media.build(record, 4096)
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        media.build_into(out, record, 4096)
        best = min(best, time.thread_time() - start)
    return best / (len(out) / 1e9)


def stamp_s_per_gb() -> float:
    """Record version 2 stamped again and again into one prepared 4 MiB buffer (the size of the
    engine's 32 slot buffers of 128 KiB), a call per 4 MiB."""
    out = media.aligned_buffer(1024 * 4096)
    stamper = media.Stamper(out, 4096, 1)
    gens = np.arange(1, 1025, dtype=np.uint64)
    records = [media.WriteRecord(1, 1024 * n, gens, 0, n, n) for n in range(64)]
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        for record in records:
            stamper.stamp(record)
        best = min(best, time.thread_time() - start)
    return best / (len(records) * len(out) / 1e9)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rig-bench-split-", dir="/dev/shm") as tmp:
        image = Path(tmp) / "target.img"
        subprocess.run(["fallocate", "-l", "1024M", str(image)], check=True)
        devnode = attach(image)
        try:
            print(f"# target: {devnode} over {image} (tmpfs, direct-io=on)")
            print(f"# machine: {machine()}")
            print(
                f"# record generation alone: {generation_s_per_gb():.3f} CPU s/GB (v1 built),"
                f" {stamp_s_per_gb():.3f} (v2 stamped in place, 4 MiB a call)"
            )
            print("| case | GB/s | CPU s/GB total | engine (C + syscalls) | Python |")
            print("|---|---|---|---|---|")
            for name, load in CASES.items():
                rate, total, engine, python = split(devnode, load, opts.seconds)
                print(f"| {name} | {rate:.2f} | {total:.3f} | {engine:.3f} | {python:.3f} |")
        finally:
            subprocess.run(["losetup", "-d", devnode], check=False)


if __name__ == "__main__":
    main()
