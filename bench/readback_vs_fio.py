"""Read-back + check against fio's own verify read of the same region (issue 17).

On one loop device (`losetup --direct-io=on`, 4 KiB sectors) over a preallocated file on the host
disk (default) or tmpfs (`--tmpfs`: no device time, the CPU cost shows fully), per round:
- fio: writes the region with `--verify=crc32c --do_verify=0`, then reads it back with
  `--verify_only` (every block read and its crc32c checked): `--bs` blocks, libaio, QD 32,
  O_DIRECT. Its figure is the verify pass alone (fio's own read runtime).
- rig: writes the region with its records (one ledger write per `--bs`), then `verify.check`
  reads all of it back and classifies it: reads of `--bs` (max_read_blocks) through the
  production reader for a `DirectTarget` (rig/check/readback.py: Linux AIO, QD 32, a timeout per
  read), each sector's checksum and regenerated payload checked, the ledger comparison, findings.
  Its figure is the wall time of `verify.check`, CPU seconds beside it, and from the read
  stream's counters the mean number of reads in flight over that wall time and the share of it
  with none in flight (the device waiting for the rig: before the first read, after the last,
  and any gap between windows).
Rounds interleave fio and the rig, and the ratio is the median of per-round ratios (rig MB/s over
fio MB/s), so a slow moment of this shared machine hits both sides alike. Only the loop device
and file this script creates are touched.

The rig's records are version 1 (every checkout reads them; `--code DIR` runs another checkout's
rig under this script, for before/after runs alternated in the same minutes).

Run: .venv/bin/python bench/readback_vs_fio.py [--mib 512] [--bs 128k] [--rounds 3] [--tmpfs]
     [--code DIR]   (root: loop devices)
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
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# the rig under test: this checkout, or another one's (`--code DIR`, read before the imports)
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv else REPO
sys.path.insert(0, str(CODE))
sys.path.insert(1, str(REPO))

from bench.writer_vs_fio import attach, machine  # noqa: E402
from rig.check import readback, verify  # noqa: E402
from rig.check.ledger import CycleLog, LbaState  # noqa: E402
from rig.io import media  # noqa: E402
from rig.io.blockio import DirectTarget  # noqa: E402

CAMPAIGN = 5


def fio_verify(devnode: str, mib: int, bs: int) -> tuple[float, float]:
    """(MB/s, CPU s per GB) of fio's verify-only read of what it has just written."""
    common = [
        "fio", "--name=readback", f"--filename={devnode}", "--rw=write", f"--bs={bs}",
        "--ioengine=libaio", "--iodepth=32", "--direct=1", f"--size={mib}M",
        "--verify=crc32c", "--output-format=json",
    ]  # fmt: skip
    # fio keeps its verify state in the working directory: a scratch one, not the checkout
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([*common, "--do_verify=0"], capture_output=True, check=True, cwd=scratch)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(
            [*common, "--verify_only"], capture_output=True, text=True, check=True, cwd=scratch
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    job = json.loads(out.stdout)["jobs"][0]["read"]
    nbytes, seconds = float(job["io_bytes"]), float(job["runtime"]) / 1e3
    if nbytes != mib << 20:
        raise SystemExit(f"fio verified {nbytes:.0f} bytes, not {mib} MiB")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return nbytes / seconds / 1e6, cpu / (nbytes / 1e9)


def rig_readback(devnode: str, mib: int, bs: int) -> tuple[float, float, float, float]:
    """(MB/s, CPU s per GB, mean reads in flight, share of the time with none) of `verify.check`
    reading back and checking the region; the last two from the read stream's own counters
    (rig/native/readq.c), over the check's whole wall time."""
    target = DirectTarget(devnode)
    try:
        block = target.block_size
        per_write = bs // block
        nblocks = (mib << 20) // block
        state, log = LbaState(0, nblocks), CycleLog()
        chunk = media.aligned_buffer(1 << 20)
        for lba in range(0, nblocks, per_write):
            gens = state.next_generations(lba, per_write)
            record = media.WriteRecord(CAMPAIGN, lba, gens.astype(np.uint64), 0, lba, 10)
            data = chunk[: per_write * block]
            media.build_into(data, record, block)
            target.write(lba, data)
            log.add_write(0, lba, lba, gens, 10, 20, 0, False)
        target.flush()
        log.add_flush(0, 30, 40, 0)
        queue = readback.queue_stats()
        wall, cpu = time.perf_counter(), time.process_time()
        result = verify.check(
            CAMPAIGN, state, log, log.durability(50, 0), np.zeros(0, dtype=np.int64),
            target.read, block, max_read_blocks=per_write,
        )  # fmt: skip
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        inflight, busy = (b - a for a, b in zip(queue, readback.queue_stats(), strict=True))
        if result.blocks_checked != nblocks or [f for f in result.findings if f.failure]:
            raise SystemExit("the rig's read-back did not check the region clean")
        idle = 1 - busy / wall
        return (mib << 20) / wall / 1e6, cpu / ((mib << 20) / 1e9), inflight / wall, idle
    finally:
        target.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--bs", default="128k", help="request size: 4k .. 1m")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tmpfs", action="store_true", help="back the loop device with tmpfs")
    parser.add_argument("--code", help="the checkout whose rig/ runs (default: this one)")
    opts = parser.parse_args()
    bs = int(opts.bs.lower().rstrip("k")) * 1024 if opts.bs.lower().endswith("k") else 1 << 20
    where = "/dev/shm" if opts.tmpfs else str(REPO.parent if REPO.parent.is_dir() else "/tmp")
    with tempfile.TemporaryDirectory(prefix="rig-bench-readback-", dir=where) as tmp:
        image = Path(tmp) / "target.img"
        subprocess.run(["fallocate", "-l", f"{opts.mib}M", str(image)], check=True)
        devnode = attach(image)
        try:
            print(f"# target: {devnode} over {image} ({opts.mib} MiB, direct-io=on)")
            print(f"# machine: {machine()}")
            print(f"# rig: {CODE}")
            print(f"# {opts.rounds} rounds, {bs >> 10} KiB reads at QD 32, interleaved")
            print("| round | load | fio verify MB/s | rig read-back+check MB/s | rig/fio |"
                  " CPU s/GB fio | CPU s/GB rig | rig in flight | rig idle |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|")
            ratios = []
            for n in range(1, opts.rounds + 1):
                load = os.getloadavg()[0]
                fio, fio_cpu = fio_verify(devnode, opts.mib, bs)
                rig, rig_cpu, inflight, idle = rig_readback(devnode, opts.mib, bs)
                ratios.append(rig / fio)
                print(f"| {n} | {load:.1f} | {fio:.0f} | {rig:.0f} | {rig / fio:.2f}"
                      f" | {fio_cpu:.2f} | {rig_cpu:.2f} | {inflight:.1f} | {idle:.1%} |",
                      flush=True)  # fmt: skip
            print(f"# rig/fio: min {min(ratios):.2f}, median {statistics.median(ratios):.2f},"
                  f" max {max(ratios):.2f}")  # fmt: skip
        finally:
            subprocess.run(["losetup", "-d", devnode], check=False)


if __name__ == "__main__":
    main()
