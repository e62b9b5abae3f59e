"""Checking throughput per core on data already read (>= 3 GB/s per core: docs/architecture.md,
"Speed targets").

Over an in-memory image of valid records (and of zeros), per GB of data:
- generate: `media.build_into` (the C kernel the write engine uses);
- check: `media.check_state` (C: every sector's magic, checksum and regenerated payload);
- parse: `media.parse` (check + every header word as columns; the checker's own parse,
  `media.BlockParser`, writes less: per-block summaries, sectors only of blocks not uniform);
- numpy reference: `media.reference_state` (the readable definition, for comparison);
- checker: `verify.check` end to end on a cycle of 4-block writes read back from memory
  (parse + classification + findings), per GB of blocks checked.
Each figure is the best of N runs of CPU time of the process, all its threads (`time.process_time`:
the checker parses a large window on a helper thread while it reads the next), so a
busy machine slows the wall clock but not the figure; wall-clock GB/s are shown beside it.

Run: .venv/bin/python bench/check_throughput.py [--mib 256] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rig.check import verify  # noqa: E402
from rig.io import media  # noqa: E402
from rig.io.ledger import CycleLog, LbaState  # noqa: E402

BLOCK = 4096


def best(action: Callable[[], object], runs: int) -> tuple[float, float]:
    """(CPU s, wall s) of the fastest of `runs` runs."""
    cpu, wall = float("inf"), float("inf")
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        action()
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - w)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    nblocks = (opts.mib << 20) // BLOCK
    record = media.WriteRecord(1, 0, np.arange(1, nblocks + 1, dtype=np.uint64), 3, 7, 123)
    image = media.build(record, BLOCK)
    zeros = np.zeros_like(image)
    small = image[: 16 << 20]  # the numpy reference is slow: time it on 16 MiB

    # a cycle of 4-block writes covering the image, all acknowledged and flushed
    state, log = LbaState(0, nblocks), CycleLog()
    for lba in range(0, nblocks, 4):
        gens = state.next_generations(lba, 4)
        log.add_write(0, lba, lba, gens, 10, 20, 0, False)
    log.add_flush(0, 30, 40, 0)
    written = np.zeros_like(image)
    for lba in range(0, nblocks, 4):
        gens = np.full(4, 1, dtype=np.uint64)
        rec = media.WriteRecord(1, lba, gens, 0, lba, 10)
        media.build_into(written[lba * BLOCK : (lba + 4) * BLOCK], rec, BLOCK)

    def read(lba: int, count: int) -> np.ndarray:
        return written[lba * BLOCK : (lba + count) * BLOCK]

    def checker() -> None:  # re-running it is the same check: what reads back is committed
        result = verify.check(
            1, state, log, log.durability(50, 0), np.zeros(0, dtype=np.int64), read, BLOCK
        )
        assert not [f for f in result.findings if f.failure]

    cases: list[tuple[str, Callable[[], object], int]] = [
        ("generate (C)", lambda: media.build_into(image, record, BLOCK), len(image)),
        ("check (C)", lambda: media.check_state(image), len(image)),
        ("check zeros (C)", lambda: media.check_state(zeros), len(zeros)),
        ("parse: check + header columns", lambda: media.parse(image), len(image)),
        ("numpy reference check", lambda: media.reference_state(small), len(small)),
        ("checker end to end (verify.check)", checker, len(written)),
    ]
    cpu_model = next(
        line.split(":", 1)[1].strip()
        for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.startswith("model name")
    )
    print(f"# machine: nproc {os.cpu_count()}, {cpu_model}, kernel {os.uname().release},"
          f" load avg {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"# {opts.mib} MiB of 4 KiB blocks, best of {opts.runs} runs, process CPU time")
    print("| step | GB/s per core (CPU time) | GB/s wall |")
    print("|---|---|---|")
    for name, action, nbytes in cases:
        cpu, wall = best(action, opts.runs)
        print(f"| {name} | {nbytes / cpu / 1e9:.2f} | {nbytes / wall / 1e9:.2f} |", flush=True)


if __name__ == "__main__":
    main()
