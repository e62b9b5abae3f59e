"""The report's PTS, write-cliff and TRIM sections (reports/analysis/endurance.py,
endurance_html.py) from drive runs with known series: rounds judged by the rig's own rule
(campaign/endurance/pts.py), a cliff at a known capacity multiple, cuts and retention checks at
known places."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from reports.analysis import endurance
from reports.analysis import reliability as analysis
from reports.load.dataset import CampaignData, Cut, Dataset, DriveData
from reports.render import csv_tables, html, json_out
from rig.campaign.endurance import pts

REGION = 64 << 20
T0 = 1_700_000_000.0


def _campaign(name: str, discard: str, interval_s: float = 1.0) -> CampaignData:
    config: dict[str, Any] = {
        "campaign": {"name": name, "region_mib": REGION >> 20},
        "workload": {"workers": 4},
        "endurance": {
            "intervals": 12,
            "interval_s": interval_s,
            "precondition": True,
            "discard": discard,
            "steady_window": 5,
            "max_rounds": 25,
        },
    }
    return CampaignData(
        f"/stores/{name}.sqlite", 1, name, "sim", "done", T0, T0 + 99, 1, config, {}
    )


def _rows(speeds: list[float], latency_us: float = 500.0) -> list[dict[str, Any]]:
    """Two preconditioning passes (one region each), then one write interval per speed of one
    region/4 each, with rounds judged as the rig judges them."""
    rows: list[dict[str, Any]] = []
    host = 0
    seq = 0
    for n in (1, 2):
        seq += 1
        host += REGION
        rows.append(_row(seq, "precondition", host, 800.0, 1.0, {"pass": n}, None))
    tracker = pts.SteadyState(window=5, max_rounds=25)
    for number, mb in enumerate(speeds, start=1):
        seq += 1
        host += REGION // 4
        iops = mb * 1e6 / 4096
        verdict = tracker.add(pts.Round(number, iops, mb, latency_us * 800 / mb))
        figures = {
            "round": number,
            "iops": iops,
            "mb_per_s": mb,
            "mean_latency_us": latency_us * 800 / mb,
            "verdict": verdict,
        }
        row = _row(seq, "write", host, mb, 1.0, {"pts": figures}, number)
        row["iops"] = iops
        row["steady"] = int(tracker.steady)
        rows.append(row)
    return rows


def _row(
    seq: int, kind: str, host: int, mb: float, fill: float, detail: dict[str, Any], no: int | None
) -> dict[str, Any]:
    return {
        "_table": "endurance_interval",
        "seq": seq,
        "kind": kind,
        "started_at": T0 + seq * 10,
        "seconds": 1.0,
        "host_bytes_total": host,
        "mb_per_s": mb,
        "iops": mb * 1e6 / 131072,
        "lat_p50_us": 300.0,
        "lat_p99_us": 900.0,
        "lat_p999_us": None,
        "lat_max_us": 4000.0 + seq,
        "lat_samples": 5000,
        "fill_fraction": fill,
        "steady": 0,
        "tbw_fraction": None,
        "verified_blocks": 0,
        "failures": 0,
        "interval_no": no,
        "detail": detail,
    }


def _cut(seq: int, at: float) -> Cut:
    return Cut(seq, "ok", 5.0, frozenset(), 80.0, 10.0, 1.0, 2.0, at, 1000, 10, False)


CLIFF = [500, 480, 300, 120, 100, 101, 99, 100, 100, 100]  # reached at round 9 (rounds 5..9)
WITH_TRIM = [500, 490, 495, 300, 300, 301, 299, 300, 300, 300]


def _run(campaign: CampaignData, speeds: list[float], serial: str = "S1") -> DriveData:
    run = DriveData(campaign, 1, 0, "M1", serial, "", "FW", "plp", "done")
    run.intervals = _rows(speeds)
    # a retention check after write interval 4 (seq 6), a cut after write interval 6 (seq 8)
    run.intervals.insert(
        6, _row(7, "retention", run.intervals[5]["host_bytes_total"], 0, 1, {}, None)
    )
    for later in run.intervals[7:]:
        later["seq"] += 1
        later["started_at"] += 10
    run.cuts = [_cut(1, T0 + 9 * 10 + 5)]  # after the row of seq 9 started
    return run


def _report(*runs: DriveData) -> analysis.Report:
    return analysis.analyse(
        Dataset([r.campaign.source for r in runs], [r.campaign for r in runs], list(runs))
    )


def test_series_capacity_multiples_marks_and_steady_window() -> None:
    m = _report(_run(_campaign("off", "none"), CLIFF)).models[0]
    [s] = m.endurance
    assert [r["kind"] for r in s.rows] == ["precondition"] * 2 + ["write"] * len(CLIFF)
    assert [r["capacity_multiple"] for r in s.rows[:4]] == [1.0, 2.0, 2.25, 2.5]
    # the cliff: throughput past 2.75 capacity multiples is a fifth of the start
    assert s.rows[5]["capacity_multiple"] == 3.0 and s.rows[5]["mb_per_s"] == 120
    retention = [k for k in s.marks if k.kind == "retention"]
    cuts = [k for k in s.marks if k.kind == "cut"]
    assert [k.capacity_multiple for k in retention] == [3.0]  # after write interval 4
    assert [k.capacity_multiple for k in cuts] == [3.5]  # after the row of seq 9 (interval 6)
    assert s.steady.verdict == pts.REACHED and s.steady.reached_at == 9
    assert [f.variable for f in s.steady.fits] == list(pts.TRACKED)
    assert all(f.rounds == [5, 6, 7, 8, 9] and f.ok for f in s.steady.fits)
    mbs = next(f for f in s.steady.fits if f.variable == "mb_per_s")
    assert mbs.average == 100.0 and mbs.range_share == 0.02


def test_report_shows_convergence_window_cliff_and_marks() -> None:
    page = html.render(_report(_run(_campaign("off", "none"), CLIFF)))
    assert "PTS steady-state convergence: S1 (off)" in page
    assert "steady state reached at round 9 (measurement window rounds 5–9)" in page
    for label in ("IOPS", "MB/s", "mean latency µs"):
        assert f"Window, {label}: range" in page
    assert "Throughput vs fill level" in page
    assert "Write cliff: throughput vs drive capacity written" in page
    assert "IOPS vs drive capacity written" in page
    assert "Latency vs capacity written: mean (solid), p99 (dashed), max (dotted)" in page
    assert ">cut</text>" in page and ">retention</text>" in page
    # max latency of the run is in the summary table
    assert f"<td>{4000 + 12}</td>" in page or "4012" in page


def test_not_reached_is_said_and_never_claimed() -> None:
    zigzag = [100, 200] * 13  # never flat; 26 rounds > max_rounds 25
    page = html.render(_report(_run(_campaign("noisy", "none"), zigzag)))
    assert "steady state not reached within 25 rounds" in page
    assert "steady state reached" not in page
    assert "max rounds: not reached" in page


def test_trim_pair_side_by_side_with_the_difference() -> None:
    off = _run(_campaign("trim-off", "none"), CLIFF)
    on = _run(_campaign("trim-on", "blkdiscard"), WITH_TRIM)
    m = _report(off, on).models[0]
    [pair] = m.trim_pairs
    assert (pair.off.campaign, pair.on.campaign) == ("trim-off", "trim-on")
    page = html.render(_report(off, on))
    assert "TRIM off / on: S1" in page
    assert "TRIM off: MB/s vs capacity written" in page
    assert "TRIM on (blkdiscard): MB/s vs capacity written" in page
    # medians 300 (TRIM) and 100.5 (no TRIM): +199 %
    assert "Median write-interval MB/s with TRIM +199% against without." in page


def test_no_trim_pair_when_more_than_discard_differs_or_another_drive() -> None:
    off = _run(_campaign("trim-off", "none"), CLIFF)
    longer = _run(_campaign("trim-on", "blkdiscard", interval_s=2.0), WITH_TRIM)
    assert _report(off, longer).models[0].trim_pairs == []
    other = _run(_campaign("trim-on", "blkdiscard"), WITH_TRIM, serial="S2")
    assert _report(off, other).models[0].trim_pairs == []
    assert "TRIM off / on" not in html.render(_report(off, other))


def test_exports_carry_the_series_marks_and_windows(tmp_path: Path) -> None:
    off = _run(_campaign("trim-off", "none"), CLIFF)
    on = _run(_campaign("trim-on", "blkdiscard"), WITH_TRIM)
    report = _report(off, on)
    body = json.loads(json_out.to_json(report, 0.0))
    model = body["models"][0]
    assert len(model["endurance"]) == 2 and len(model["trim_pairs"]) == 1
    assert model["endurance"][0]["steady"]["reached_at"] == 9
    data = Dataset([], [off.campaign, on.campaign], [off, on])
    csv_tables.write_csvs(report, data, tmp_path)
    with open(tmp_path / "endurance_series.csv", newline="") as handle:
        series = list(csv.DictReader(handle))
    assert len(series) == 2 * (2 + len(CLIFF))
    first_off = [r for r in series if r["campaign"] == "trim-off"]
    assert [r["kind"] for r in first_off[:3]] == ["precondition", "precondition", "write"]
    assert first_off[2]["round"] == "1" and first_off[2]["capacity_multiple"] == "2.25"
    assert first_off[-1]["pts_verdict"] == "reached"
    with open(tmp_path / "endurance_marks.csv", newline="") as handle:
        marks = list(csv.DictReader(handle))
    assert sorted(r["kind"] for r in marks) == ["cut", "cut", "retention", "retention"]
    with open(tmp_path / "pts_windows.csv", newline="") as handle:
        windows = list(csv.DictReader(handle))
    assert {(r["campaign"], r["variable"]) for r in windows} == {
        (c, v) for c in ("trim-off", "trim-on") for v in pts.TRACKED
    }


def test_region_from_the_campaign_file() -> None:
    assert endurance.region_bytes({"campaign": {"region_kib": 512}}) == 512 << 10
    assert endurance.region_bytes({"campaign": {"region_bytes": 4096}}) == 4096
    assert endurance.region_bytes({}) == endurance.DEFAULT_REGION_BYTES
