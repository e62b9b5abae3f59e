"""Per-cut check time against drive size, and peak memory of a campaign on a 4 TB drive.

Each size runs in its own process (so its peak RSS is its own): a real campaign through
`rig.campaign.run_campaign` on the in-process simulated station, one honest simulated drive whose
capacity is the size and whose whole capacity is the test region, the same workload and cut
delays for every size (the same write window), `cycles` cuts. Per cut it reports the verify
phase's wall and CPU time (the production phase, `rig.campaign.cutcycle.phases.verify`: this cycle's
writes, the recent cycles' writes, a sample of older written blocks, read back and classified)
and the blocks it checked; per run the per-LBA state's memory (`LbaState.nbytes`), the simulated
drive's own stored data (it lives in the same process) and the process's peak RSS.

Expected (docs/architecture.md, "Speed targets"): check time O(writes at risk), about equal for
1 GiB and 64 GiB; memory bounded for 4 TB (the dense arrays this replaced needed 8 GB for 4 TB in
4 KiB blocks).

Run: .venv/bin/python bench/campaign_scale.py [--cycles 30] [--sizes 1G,64G,4T]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fixtures.fake_power import FakePowerSwitch  # noqa: E402
from fixtures.fake_presence import FakePresence  # noqa: E402
from fixtures.profiles import profile  # noqa: E402
from fixtures.virtual_drive import VirtualDrive, VirtualTarget  # noqa: E402
from rig.campaign.cutcycle import phases  # noqa: E402
from rig.campaign.drive import DriveRun  # noqa: E402
from rig.campaign.model import Cycle  # noqa: E402
from rig.campaign.observer import Observer  # noqa: E402
from rig.campaign.parallel import run_campaign  # noqa: E402
from rig.config import campaign_file  # noqa: E402
from rig.station.model import Station  # noqa: E402
from rig.store import Store  # noqa: E402

SIZES = {"1G": 1 << 30, "64G": 64 << 30, "4T": 4 << 40}
BLOCK = 4096

CAMPAIGN = """
[campaign]
name = "scale"
cycles = {cycles}
seed = 11
region_mib = {region_mib}
[station]
kind = "simulated"
[workload]
workers = 8
write_blocks = [1, 2, 4]
flush_every = 4
discard_share = {discard_share}
[cut]
delay_ms = [20, 20]
off_ms = 1
sample_blocks = 256
baseline = false
[[drive]]
channel = 0
model = "SIM scale"
serial = "SCALE0001"
profile = "honest"
"""


def run_one(size: str, cycles: int, discard_share: float = 0.0) -> dict[str, object]:
    """One campaign in this process; the figures as a dict. `discard_share`: of the workload's
    operations, discards (the checker's discard rules then run in every check)."""
    capacity = SIZES[size]
    text = CAMPAIGN.format(cycles=cycles, region_mib=capacity >> 20, discard_share=discard_share)
    camp = campaign_file.parse(text)
    spec = camp.drives[0]
    drive_profile = dataclasses.replace(
        profile(spec.profile), capacity_blocks=capacity // BLOCK, block_size=BLOCK
    )
    drive = VirtualDrive(spec.identity, drive_profile, seed=1)
    station = Station(
        "simulated",
        FakePowerSwitch({spec.channel: drive}),
        FakePresence([drive]),
        lambda node, spec: VirtualTarget(drive),
    )
    checks: list[tuple[float, float, int]] = []
    state_bytes: list[int] = []
    original = phases.verify

    def timed_verify(drive: DriveRun, c: Cycle) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        original(drive, c)
        assert c.result is not None
        checks.append(
            (time.perf_counter() - wall, time.thread_time() - cpu, c.result.blocks_checked)
        )
        state_bytes.append(drive.state.nbytes)

    timed_verify.__name__ = "verify"
    # the production phase, timed: the cycle runs the phases listed in `phases.PHASES`
    phases.PHASES = tuple(timed_verify if p is original else p for p in phases.PHASES)
    with tempfile.TemporaryDirectory(prefix="rig-bench-scale-") as tmp:
        store = Store(str(Path(tmp) / "scale.sqlite"))
        started = time.perf_counter()
        summaries = run_campaign(camp, station, store, Observer())
        elapsed = time.perf_counter() - started
    media_bytes = sum(block.nbytes for block in drive.core._media.values())
    return {
        "size": size,
        "cycles": summaries[0].cycles,
        "errors": summaries[0].errors,
        "failures": sum(summaries[0].failures.values()),
        "check_ms_median": 1000 * statistics.median(w for w, _, _ in checks),
        "check_cpu_ms_median": 1000 * statistics.median(c for _, c, _ in checks),
        "blocks_checked_median": statistics.median(b for _, _, b in checks),
        "state_bytes_max": max(state_bytes),
        "drive_media_bytes": media_bytes,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "campaign_s": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--sizes", default="1G,64G,4T")
    parser.add_argument("--discard-share", type=float, default=0.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child process: run one size
    opts = parser.parse_args()
    if opts.one:
        print(json.dumps(run_one(opts.one, opts.cycles, opts.discard_share)))
        return
    cpu = next(
        line.split(":", 1)[1].strip()
        for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.startswith("model name")
    )
    print(f"# machine: nproc {os.cpu_count()}, {cpu}, kernel {os.uname().release},"
          f" load avg {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(
        f"# {opts.cycles} cuts per size, 8 writers, writes of 1-4 blocks, cut 20 ms into writing,"
        f" discard share {opts.discard_share:g}"
    )
    print(
        "| drive = region | cuts (errors) | blocks checked/cut | check ms/cut (CPU ms) |"
        " per-LBA state | simulated drive data | peak RSS |"
    )
    print("|---|---|---|---|---|---|---|")
    for size in opts.sizes.split(","):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                size,
                "--cycles",
                str(opts.cycles),
                "--discard-share",
                str(opts.discard_share),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"| {size} | {r['cycles']} ({r['errors']}) | {r['blocks_checked_median']:.0f}"
            f" | {r['check_ms_median']:.1f} ({r['check_cpu_ms_median']:.1f})"
            f" | {mib(r['state_bytes_max'])} | {mib(r['drive_media_bytes'])}"
            f" | {mib(r['peak_rss_bytes'])} |",
            flush=True,
        )


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


if __name__ == "__main__":
    main()
