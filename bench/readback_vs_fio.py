"""Read-back + check against fio's own verify read of the same region.

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
  and any gap between windows), and of it the tail: the share of the wall time after the last
  window was taken (its reads done; what remains is its parse, the rules and the findings).
Rounds interleave fio and the rig, and the ratio is the median of per-round ratios (rig MB/s over
fio MB/s), so a slow moment of this shared machine hits both sides alike. Only the loop device
and file this script creates are touched.

The rig's records are version 1 (every checkout reads them; `--code DIR` runs another checkout's
rig under this script, for before/after runs alternated in the same minutes).

`--buffers 4,8` runs the rig once per round with each count of window buffers per checking
thread (`rig.check.readback.BUFFERS`: two of them are parsed, one taken, the rest read ahead;
16 MiB each), for a same-run comparison of read-ahead depths.

Run: .venv/bin/python bench/readback_vs_fio.py [--mib 512] [--bs 128k] [--rounds 3] [--tmpfs]
     [--code DIR] [--buffers N,M]   (root: loop devices)
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
from rig.io import media  # noqa: E402
from rig.io.blockio import DirectTarget  # noqa: E402
from rig.io.ledger import CycleLog, LbaState  # noqa: E402

CAMPAIGN = 5

# When each window's reads were taken and retired (`AioBatch.finish`, on the checking thread):
# the time after the last one is the check's tail, when no read is left to put in flight
FINISHED: list[float] = []
_finish = readback.AioBatch.finish


def _timed_finish(window: readback.AioBatch) -> None:
    _finish(window)
    FINISHED.append(time.perf_counter())


readback.AioBatch.finish = _timed_finish  # type: ignore[method-assign]


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


def rig_readback(devnode: str, mib: int, bs: int) -> tuple[float, float, float, float, float]:
    """(MB/s, CPU s per GB, mean reads in flight, share of the time with none, share of the time
    after the last window was taken) of `verify.check` reading back and checking the region;
    the in-flight figures from the read stream's own counters (rig/native/readq.c), over the
    check's whole wall time."""
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
        FINISHED.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        result = verify.check(
            CAMPAIGN, state, log, log.durability(50, 0), np.zeros(0, dtype=np.int64),
            target.read, block, max_read_blocks=per_write,
        )  # fmt: skip
        tail = time.perf_counter() - FINISHED[-1]
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        inflight, busy = (b - a for a, b in zip(queue, readback.queue_stats(), strict=True))
        if result.blocks_checked != nblocks or [f for f in result.findings if f.failure]:
            raise SystemExit("the rig's read-back did not check the region clean")
        idle = 1 - busy / wall
        mbs = (mib << 20) / wall / 1e6
        return mbs, cpu / ((mib << 20) / 1e9), inflight / wall, idle, tail / wall
    finally:
        target.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--bs", default="128k", help="request size: 4k .. 1m")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tmpfs", action="store_true", help="back the loop device with tmpfs")
    parser.add_argument("--code", help="the checkout whose rig/ runs (default: this one)")
    parser.add_argument(
        "--buffers", help="window buffers per checking thread, one rig run each (e.g. 4,8)"
    )
    opts = parser.parse_args()
    depths = [int(b) for b in opts.buffers.split(",")] if opts.buffers else [readback.BUFFERS]
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
            print("| round | load | buffers | fio verify MB/s | rig read-back+check MB/s"
                  " | rig/fio | CPU s/GB fio | CPU s/GB rig | rig in flight | rig idle"
                  " | of it the tail |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            ratios: dict[int, list[float]] = {b: [] for b in depths}
            idles: dict[int, list[float]] = {b: [] for b in depths}
            for n in range(1, opts.rounds + 1):
                load = os.getloadavg()[0]
                fio, fio_cpu = fio_verify(devnode, opts.mib, bs)
                for buffers in depths:
                    readback.BUFFERS = buffers  # read by rig/check/verify/reads.py per check
                    rig, rig_cpu, inflight, idle, tail = rig_readback(devnode, opts.mib, bs)
                    ratios[buffers].append(rig / fio)
                    idles[buffers].append(idle)
                    print(f"| {n} | {load:.1f} | {buffers} | {fio:.0f} | {rig:.0f}"
                          f" | {rig / fio:.2f} | {fio_cpu:.2f} | {rig_cpu:.2f}"
                          f" | {inflight:.1f} | {idle:.1%} | {tail:.1%} |",
                          flush=True)  # fmt: skip
            for buffers in depths:
                r, i = ratios[buffers], idles[buffers]
                print(f"# buffers {buffers}: rig/fio min {min(r):.2f}, median"
                      f" {statistics.median(r):.2f}, max {max(r):.2f}; idle min {min(i):.1%},"
                      f" median {statistics.median(i):.1%}, max {max(i):.1%}")  # fmt: skip
        finally:
            subprocess.run(["losetup", "-d", devnode], check=False)


if __name__ == "__main__":
    main()
