"""The report through the production CLI: files written, JSON and CSV agree with the HTML, and the
page renders in headless Chromium (Debian `chromium`, installed by the Makefile) with its plots."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.cli_runner import rig
from tests.reports.storebuilder import DriveSpec, build, falling_rails, healthy_plp_drive

CHROMIUM = shutil.which("chromium")
# the colours of the two models' bars and curves: their verdicts' (reports/render/svg.py
# VERDICT_FILL: Model Liar FAIL, Model PLP not yet demonstrated), drawn opaque
PLOT_COLOURS = {"#b2182b", "#fee08b"}


def _stores(tmp_path: Path) -> list[Path]:
    a = build(
        tmp_path / "station-a.sqlite",
        [
            healthy_plp_drive(),
            DriveSpec(
                "Model Liar",
                "L1",
                ["ok", "lost_durable_write"] * 10 + ["dead"],
                channel=1,
                rail=falling_rails(5),
                return_ms=140,
                delays_ms=[(0.2 * (i + 1), 1.5**i) for i in range(21)],
            ),
        ],
        station="station-a",
    )
    b = build(
        tmp_path / "station-b.sqlite",
        [
            DriveSpec("Model PLP", "P2", ["ok"] * 25 + ["error"], channel=0, return_ms=75),
            DriveSpec("Model Liar", "L2", ["ok"] * 6 + ["shorn_write"] * 4, channel=2),
        ],
        name="qual-b",
        station="station-b",
    )
    return [a, b]


def test_rig_report_merges_stores_into_html_json_and_csv(tmp_path: Path) -> None:
    a, b = _stores(tmp_path)
    out = tmp_path / "report"
    result = rig("report", str(a), str(b), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out / "report.html")
    body = json.loads((out / "report.json").read_text())
    assert body["format"] == "rig-report/1"
    models = {m["model"]: m for m in body["models"]}
    assert models["Model PLP"]["cuts"] == 55 and models["Model PLP"]["rig_errors"] == 1
    assert models["Model Liar"]["any_failure"]["failed"] == 15
    assert models["Model Liar"]["drives_dead"] == 1
    outcomes = [c["outcome"] for c in body["comparisons"]]
    assert outcomes == ["any failure", "lost_durable_write", "shorn_write", "dead_device"]
    with open(out / "drives.csv", newline="") as handle:
        drives = {r["serial"]: r for r in csv.DictReader(handle)}
    assert set(drives) == {"P1", "P2", "L1", "L2"}
    assert drives["L1"]["dead_at_cut"] == "21" and drives["P2"]["cuts"] == "25"
    with open(out / "cuts.csv", newline="") as handle:
        cuts = list(csv.DictReader(handle))
    assert len(cuts) == 30 + 21 + 26 + 10
    page = (out / "report.html").read_text()
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "<script" not in page and "https://" not in page
    # Model Liar has no health snapshots, Model PLP no rail data, nobody endurance: said plainly
    for absent in ("no health snapshots", "no endurance intervals", "no rail-sense"):
        assert absent in page
    assert "Rail fall after the off edge" in page
    assert "Lost durable writes: time they had been acknowledged / flushed" in page
    # every drive of Model Liar failed and none of Model PLP: no model's drives disagree
    assert "The drives of this model disagree" not in page
    # each model also has a page of its own, with its comparisons but no other model's section
    plp = (out / "model-Model-PLP.html").read_text()
    assert 'id="m-Model-PLP"' in plp and 'id="m-Model-Liar"' not in plp
    assert "Model Liar" in plp  # in the model-vs-model table
    assert 'href="model-Model-PLP.html"' in page
    assert "Unsafe-shutdown counter rise vs cuts" in page  # Model PLP's snapshots
    assert "3 → 33 (<b>+30</b>)" in page


def test_report_of_missing_store_is_one_line(tmp_path: Path) -> None:
    result = rig("report", "nothing.sqlite", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "rig: error: nothing.sqlite: no such store"
    assert not (tmp_path / "r").exists()


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="rig-report-chromium-") as profile:
        return subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                *args,
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )


@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium absent (make setup installs it)")
def test_report_renders_in_headless_chromium_with_its_plots(tmp_path: Path) -> None:
    a, b = _stores(tmp_path)
    out = tmp_path / "report"
    assert rig("report", str(a), str(b), "--out", str(out), cwd=tmp_path).returncode == 0
    page = out / "report.html"

    dom = chromium(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    # the rendered DOM holds the charts with their drawn marks (bars, curves, points)
    assert dom.stdout.count('<svg class="chart"') >= 6
    assert dom.stdout.count('class="series"') >= 2  # survival and return-time curves
    assert dom.stdout.count('class="mark"') >= 20

    shot = tmp_path / "shot.png"
    result = chromium(page, f"--screenshot={shot}", "--window-size=1280,2400")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.shape == (2400, 1280, 3)
    assert pixels.std() > 20  # not blank
    packed = np.unique(pixels.reshape(-1, 3).astype(np.uint32) @ np.array([65536, 256, 1]))
    colours = {f"#{int(v):06x}" for v in packed}
    drawn = PLOT_COLOURS & colours
    assert drawn == PLOT_COLOURS, f"plot colours not in the screenshot: {PLOT_COLOURS - drawn}"
    # the charts' area holds many distinct colours (antialiased curves, points, bands)
    assert len(colours) > 200


def test_intervals_of_another_shape_are_charted_per_column(tmp_path: Path) -> None:
    """A store with an interval table not shaped like store v6's (one row per interval and
    drive): every numeric column becomes a chart; the other drives still say they have none.
    (The v6 table itself: tests/reports/test_endurance_report.py.)"""
    a, b = _stores(tmp_path)
    db = sqlite3.connect(a)
    db.execute(
        'CREATE TABLE "interval" (id INTEGER PRIMARY KEY, drive_id INTEGER,'
        " seq INTEGER, mb_per_s REAL, p99_us REAL, note TEXT)"
    )
    drive_id = db.execute("SELECT id FROM drive WHERE serial = 'P1'").fetchone()[0]
    db.executemany(
        'INSERT INTO "interval" (drive_id, seq, mb_per_s, p99_us, note) VALUES (?,?,?,?,?)',
        [(drive_id, i, 500.0 - 30 * (i > 5), 80.0 + 9 * i, "steady") for i in range(10)],
    )
    db.commit()
    db.close()
    out = tmp_path / "report"
    assert rig("report", str(a), str(b), "--out", str(out), cwd=tmp_path).returncode == 0
    page = (out / "report.html").read_text()
    assert 'aria-label="mb per s"' in page and 'aria-label="p99 us"' in page
    assert 'aria-label="note"' not in page  # text columns are not charted
    assert "no endurance intervals" in page  # Model Liar has none


def test_bad_confidence_is_one_line(tmp_path: Path) -> None:
    a, _ = _stores(tmp_path)
    result = rig("report", str(a), "--confidence", "1.5", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "rig: error: --confidence 1.5: must lie in [0.5, 1)"


def test_drives_that_disagree_are_pointed_out(tmp_path: Path) -> None:
    from reports.analysis import reliability as analysis
    from reports.load import dataset
    from reports.render import html

    db = build(
        tmp_path / "d.sqlite",
        [
            DriveSpec("M", "GOOD", ["ok"] * 50, channel=0),
            DriveSpec("M", "BAD", ["ok", "lost_durable_write"] * 25, channel=1),
        ],
    )
    page = html.render(analysis.analyse(dataset.load([str(db)])))
    assert "The drives of this model disagree" in page
    assert "1 of 2 drives had a failing cut" in page
