"""What the health layer adds to a cycle, measured on this machine (the rig's share of a cycle:
< 1 s, docs/architecture.md, "Speed targets").

Per step, the median of N runs, and its ratio to spawning /bin/true in the same run (every
tool call pays at least a process start, so the ratio says how much is the tool itself):
- parse: `parse_smartctl_json` over every real capture in fixtures/real-data/smartctl;
- snapshot: `smartctl_snapshot` through the fake smartctl replaying a real NVMe capture
  (process start + Python fake + parse; a real smartctl also waits for the drive);
- cross-check: `drive_answers` on a real loop device with the real smartctl (it cannot type a
  loop device: the cost a loop-device campaign pays per open);
- ready: the O_DIRECT read probe on that loop device.

Run: .venv/bin/python bench/health_overhead.py [N]   (root, for the loop device)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rig.bus.ready import probe_once  # noqa: E402
from rig.drive.identity import DriveIdentity  # noqa: E402
from rig.drive.node import DriveNode  # noqa: E402
from rig.health import crosscheck  # noqa: E402
from rig.health.smart import parse_smartctl_json  # noqa: E402
from rig.health.tools import ToolRunner, smartctl_snapshot  # noqa: E402


def median_s(action: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def real_captures() -> list[Path]:
    return sorted((REPO / "fixtures" / "real-data" / "smartctl").glob("*.json"))


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    spawn = median_s(lambda: subprocess.run(["/bin/true"], check=True), runs)
    rows = [("spawn /bin/true (reference)", spawn)]
    captures = [p.read_text() for p in real_captures()]
    if captures:
        per_file = median_s(lambda: [parse_smartctl_json(t) for t in captures], runs) / len(
            captures
        )
        rows.append((f"parse one real capture (mean of {len(captures)})", per_file))
        nvme = next(p for p in real_captures() if p.name == "INTEL_SSDPE2KX080T8_1.json")
        env = {
            "PATH": f"{REPO / 'fixtures' / 'fakebin'}{os.pathsep}{Path(sys.executable).parent}",
            "FAKE_SMARTCTL_OUTPUT": str(nvme),
        }
        fake = ToolRunner(env=env)
        rows.append(
            (
                "snapshot via fake smartctl",
                median_s(lambda: smartctl_snapshot("/dev/x", fake), runs),
            )
        )
    with tempfile.NamedTemporaryFile(suffix=".img") as image:
        image.truncate(8 << 20)
        devnode = subprocess.run(
            ["losetup", "--find", "--show", "--direct-io=on", "--sector-size=4096", image.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        try:
            real = ToolRunner()
            rows.append(
                (
                    "identity cross-check, loop + real smartctl",
                    median_s(lambda: crosscheck.drive_answers(devnode, real), runs),
                )
            )
            node = DriveNode(DriveIdentity("Linux loop device", image.name), devnode, 8 << 20, 4096)
            rows.append(
                ("ready probe (O_DIRECT read)", median_s(lambda: probe_once(node, real), runs))
            )
        finally:
            subprocess.run(["losetup", "-d", devnode], check=False)
    print(f"{'step':<45} {'median ms':>10} {'x spawn':>8}")
    for name, seconds in rows:
        print(f"{name:<45} {seconds * 1000:>10.2f} {seconds / spawn:>8.2f}")


if __name__ == "__main__":
    main()
