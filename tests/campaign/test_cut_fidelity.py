"""Every cycle stores where its cut fell against its plan, and `rig status` and the
campaign-end notice say when more than 1 % of the cuts fell outside the requested range."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fixtures import sim_station
from rig.campaign import runner
from rig.campaign.progress import Progress
from rig.config import campaign_file
from rig.store import Store
from tests.cli_runner import rig
from tests.notify_receivers import json_endpoint

TEXT = """
[campaign]
name = "f"
cycles = 6
seed = 2
region_mib = 4
[station]
kind = "simulated"
[workload]
workers = 2
write_blocks = [1, 2]
flush_every = 4
[cut]
strategy = "uniform"
delay_ms = {delay}
off_ms = 1
sample_blocks = 16
[[drive]]
channel = 0
model = "SIM a"
serial = "SN0"
profile = "honest"
[notify]
urls = ["json://127.0.0.1:{port}/"]
events = ["campaign_end"]
"""


# [0.001, 0.002] ms: no host can send a cut within 2 µs of the first write's issue (the
# realized delay is at least the time from that stamp to the switch, tens of µs), so every
# cut falls outside; [1, 50] ms is kept by every cut
@pytest.mark.parametrize("delay, warned", [("[0.001, 0.002]", True), ("[1, 50]", False)])
def test_cuts_outside_the_requested_range_are_stored_and_warned_of(
    tmp_path: Path, delay: str, warned: bool
) -> None:
    db = str(tmp_path / "f.sqlite")
    with json_endpoint() as (posts, port):
        campaign = campaign_file.parse(TEXT.format(delay=delay, port=port))
        runner.run(
            lambda c, on_edge, db: sim_station.build(c)[0],
            campaign=campaign,
            db=db,
            progress=Progress(io.StringIO(), live=False),
        )
    store = Store(db, read_only=True)
    rows = store.query(
        "SELECT cut_delay_ns, realized_delay_ns, timed_from, delay_error_ns, delay_in_range"
        " FROM cycle ORDER BY seq"
    )
    store.close()
    assert len(rows) == 6
    for planned, realized, timed_from, bound, inside in rows:
        assert timed_from == "first_write" and bound == 0
        assert realized >= planned  # never before the plan
        assert inside == (not warned)
    end = next(p for p in posts if "campaign done" in p["title"])
    assert ("fell outside the requested delay range" in end["message"]) == warned
    status = rig("status", db, cwd=tmp_path)
    assert ("6 of 6 cuts (100.0 %) fell outside" in status.stdout) == warned, status.stdout
    assert status.stdout.count("warning:") == int(warned)
    # the report's timing section, and report.json's
    out = tmp_path / "r"
    done = rig("report", db, "--out", str(out), cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    (row,) = json.loads((out / "report.json").read_text())["timing"]
    assert row["strategy"] == "uniform" and row["cuts"] == 6
    assert row["outside_range"] == (6 if warned else 0) and row["warn"] == warned
    assert 0 <= row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
    page = (out / "report.html").read_text()
    assert "Cut timing" in page and ("(more than 1 %)" in page) == warned
