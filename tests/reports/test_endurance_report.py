"""The endurance section from a real endurance campaign (production campaign code on the
simulated rig, store v6 `endurance_interval`), rendered through the report."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

from fixtures import sim_station
from reports import export
from reports.analysis import reliability as analysis
from reports.load import dataset
from reports.render import html
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text

ENDURANCE = """
[endurance]
intervals = 5
interval_s = 0.2
verify_every = 2
cut_every = 0
retention_every = 3
retention_off_s = 0.05
tbw_tb = 1
"""


def test_endurance_intervals_become_a_table_and_charts(tmp_path: Path) -> None:
    text = campaign_text(["plp"], cycles=10, extra="", flush_every=2)
    campaign = campaign_file.parse(text.replace("[cut]", ENDURANCE + "[cut]"))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "e.sqlite"))
    run_campaign(campaign, station, store, Observer())
    rows = store.query("SELECT * FROM endurance_interval ORDER BY seq")
    store.close()
    writes = [r for r in rows if r["kind"] == "write"]
    assert len(writes) == 5 and len(rows) > len(writes)  # with a retention check

    model = analysis.analyse(dataset.load([str(tmp_path / "e.sqlite")])).models[0]
    assert [i["seq"] for i in model.intervals] == [r["seq"] for r in rows]
    page = html.render(analysis.analyse(dataset.load([str(tmp_path / "e.sqlite")])))
    assert "Write throughput vs host data written" in page
    assert "Write latency p50 (dotted), p99 (solid), p99.9 (dashed)" in page
    host_gb = f"{writes[-1]['host_bytes_total'] / 1e9:.3g}"
    assert f'<td class="n">{host_gb}</td>' in page
    assert f"{writes[-1]['tbw_fraction'] * 100:.3g}%" in page  # TBW used, of the rated 1 TB
    retention = [r for r in rows if r["kind"] == "retention"]
    assert f"{len(retention)} (0 failing)" in page
    assert "no endurance intervals" not in page

    # the steady state is named by the write interval's own number, which the retention row
    # before it does not take: "intervals 5" and "steady from interval 4", not "from 5"
    after_retention = next(r for r in rows[rows.index(retention[0]) :] if r["kind"] == "write")
    assert after_retention["interval_no"] == 4 and after_retention["seq"] == 5
    with sqlite3.connect(str(tmp_path / "e.sqlite")) as db:
        db.execute("UPDATE endurance_interval SET steady = (id = ?)", (after_retention["id"],))
    page = html.render(analysis.analyse(dataset.load([str(tmp_path / "e.sqlite")])))
    assert "from interval 4" in page and "from interval 5" not in page


def test_a_percentile_without_enough_samples_is_never_a_number(tmp_path: Path) -> None:
    text = campaign_text(["plp"], cycles=10, extra="", flush_every=2)
    campaign = campaign_file.parse(text.replace("[cut]", ENDURANCE.replace("5", "2", 1) + "[cut]"))
    station, _ = sim_station.build(campaign)
    path = str(tmp_path / "e.sqlite")
    store = Store(path)
    run_campaign(campaign, station, store, Observer())
    ids = [r["id"] for r in store.query("SELECT id FROM endurance_interval WHERE kind = 'write'")]
    store.close()
    assert len(ids) == 2
    # one interval just short of p99.9's 10,000 samples, one just at it
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE endurance_interval SET lat_samples = 9999, lat_p999_us = NULL WHERE id = ?",
            (ids[0],),
        )
        db.execute(
            "UPDATE endurance_interval SET lat_samples = 10000, lat_p999_us = 4321 WHERE id = ?",
            (ids[1],),
        )
    out = tmp_path / "report"
    export.write_report([path], str(out))
    page = (out / "report.html").read_text()
    assert "<td>4321 (1 intervals: not enough data)</td>" in page.replace(' class="n"', "")
    with open(out / "endurance.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["kind"] == "write"]
    assert [(r["lat_samples"], r["lat_p999_us"]) for r in rows] == [
        ("9999", "not enough data"),
        ("10000", "4321.0"),
    ]
    body = json.loads((out / "report.json").read_text())
    stated = [(i["lat_samples"], i["lat_p999_us"]) for i in body["models"][0]["intervals"]]
    assert (9999, None) in stated and (10000, 4321.0) in stated

    # neither interval with enough samples: the cell says so, with no number in it
    with sqlite3.connect(path) as db:
        db.execute("UPDATE endurance_interval SET lat_samples = 9999, lat_p999_us = NULL")
    export.write_report([path], str(out))
    page = (out / "report.html").read_text().replace(' class="n"', "")
    assert "<td>not enough data</td>" in page and "4321" not in page
