"""A notification receiver that hangs, against none: the same campaign's cycles, same run.

Runs one campaign on the in-process simulated station twice in this process, alternately,
`--rounds` times each: without `[notify]`, and with `[notify]` pointing at a receiver on
127.0.0.1 that accepts every connection and never answers (tests/notify_receivers.py). The
lying-flush drive fails from its first cuts, so FAIL, verdict and end notices are queued while
the sender sits in its first send. Per run: the median cycle time (a cycle's `ended_at -
started_at`), the median gap from one cycle's end to the next one's start on the same channel
(where the runner's per-cycle hooks, the notices among them, run), and the campaign's time from
its first cycle's start to its last cycle's end. Each figure is printed with the ratio
hanging/none of the medians over rounds.

Expected: ratios near 1 (the cycle's thread only queues a notice; docs/decisions.md,
"Notifications go through Apprise; a cut never waits on them").

Run: .venv/bin/python bench/notify_hang.py [--cycles 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import itertools
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fixtures import sim_station
from rig.campaign import runner
from rig.campaign.progress import Progress
from rig.config import campaign_file
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text
from tests.notify_receivers import hanging_receiver


def figures(db: str) -> tuple[float, float, float]:
    """(median cycle s, median gap between a channel's cycles s, campaign s)."""
    store = Store(db, read_only=True)
    try:
        rows = store.query(
            "SELECT d.channel, c.started_at, c.ended_at FROM cycle c"
            " JOIN drive d ON d.id = c.drive_id ORDER BY d.channel, c.seq"
        )
    finally:
        store.close()
    cycles = [r[2] - r[1] for r in rows]
    gaps = [b[1] - a[2] for a, b in itertools.pairwise(rows) if a[0] == b[0]]
    span = max(r[2] for r in rows) - min(r[1] for r in rows)
    return statistics.median(cycles), statistics.median(gaps), span


def run(text: str, db: str) -> tuple[float, float, float]:
    runner.run(
        lambda c, on_edge, db: sim_station.build(c)[0],
        campaign=campaign_file.parse(text),
        db=db,
        progress=Progress(io.StringIO(), live=False),
    )
    return figures(db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    text = campaign_text(["lying-flush", "plp"], args.cycles, flush_every=2)
    results: dict[str, list[tuple[float, float, float]]] = {"none": [], "hanging": []}
    with tempfile.TemporaryDirectory() as tmp, hanging_receiver() as hang:
        loud = text + f'[notify]\nurls = ["json://127.0.0.1:{hang.port}/"]\n'
        for i in range(args.rounds):
            results["none"].append(run(text, f"{tmp}/none{i}.sqlite"))
            results["hanging"].append(run(loud, f"{tmp}/hang{i}.sqlite"))
        answered = hang.answered
    print(f"{args.cycles} cycles x 2 drives, {args.rounds} rounds; receiver answered {answered}")
    print(f"{'figure':<28} {'none':>10} {'hanging':>10} {'ratio':>7}")
    for i, name in enumerate(("median cycle (ms)", "median gap (ms)", "campaign (s)")):
        scale = 1000 if "ms" in name else 1
        a = statistics.median(r[i] for r in results["none"]) * scale
        b = statistics.median(r[i] for r in results["hanging"]) * scale
        print(f"{name:<28} {a:>10.2f} {b:>10.2f} {b / a:>7.2f}")


if __name__ == "__main__":
    main()
