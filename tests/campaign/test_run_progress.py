"""Live progress: per-drive figures (cycles, failures, rate, ETA), plain lines when not on a
terminal, a redrawn table on one, stop messages folded into the table."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from fixtures import sim_station
from rig.campaign.drive import DriveRun
from rig.campaign.observer import CampaignEvents, Observer
from rig.campaign.parallel import run_campaign
from rig.campaign.progress import Progress, _duration
from rig.config import campaign_file
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text


def test_plain_lines_carry_rate_and_eta(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = Progress(out, live=False)
    campaign = campaign_file.parse(campaign_text(["plp", "lying-flush"], cycles=3, flush_every=2))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "p.sqlite"))
    runs: list[DriveRun] = []

    class Runs(Observer):
        def start(self, r: Sequence[DriveRun]) -> None:
            runs.extend(r)

    run_campaign(campaign, station, store, CampaignEvents(Runs(), progress))
    store.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 6  # one per cycle, two drives x three cycles
    assert all("rate" in line and "ETA" in line for line in lines)
    assert sum("(3/3)" in line for line in lines) == 2  # each drive's last cycle, counted
    table = progress.table()
    assert table[0].split()[:3] == ["ch", "drive", "cycles"]
    assert "3/3" in table[1] and "3/3" in table[2]
    for row, run in zip(table[1:], runs, strict=True):
        assert all(f"{cls} x{n}" in row for cls, n in run.counts.failures.items())


def test_live_table_redraws_in_place_and_shows_stops(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = Progress(out, live=True)
    campaign = campaign_file.parse(campaign_text(["plp"], cycles=2))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "p.sqlite"))
    run_campaign(campaign, station, store, progress)
    progress.message("ch0: stopped: 2 cycles with failures")  # drawn: the table follows it
    progress.message("rig: SIGINT: stopping")  # the table is erased, the line printed, redrawn
    progress.close()
    store.close()
    text = out.getvalue()
    assert "\x1b[" in text  # cursor moves: the table is redrawn, not appended
    assert text.index("ch0: stopped") < text.index("\x1b[") < text.index("rig: SIGINT")
    assert "STOPPED: 2 cycles with failures" in progress.table()[1]


def test_durations() -> None:
    assert _duration(None) == "--"
    assert _duration(59) == "0m59s"
    assert _duration(3725) == "1h02m"
