"""What a person sees in the report and on the dashboard, read in headless Chromium
(tests/fleet/browser.py): bars coloured by the model's verdict (the same colour as the verdict's
badge on the report and the dashboard; lightness apart in grey), the target's label clear of
every bar, the window-of-vulnerability chart with its axis label, legend, t50/t99 marks and
unclipped tick labels; and the page's wording and files (no "1 drives", an unbounded bound said
as such, one figure per cell, no header-only endurance CSV)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from markupsafe import Markup

from reports import export
from reports.analysis.window import ModelWindow
from reports.render import deferred, html, svg, window_html
from rig.interface.fleet.dashboard import create_app
from rig.interface.fleet.views import StoreView
from rig.window import fit
from tests.fleet.browser import chromium, requirements
from tests.reports.storebuilder import DriveSpec, build

pytestmark = pytest.mark.skipif(bool(requirements()), reason=requirements() or "ok")

CONFIG = '[campaign]\nname = "qual"\n[criteria]\nmax_failure_probability = 0.05\n'
CRITERIA = json.dumps({"max_failure_probability": 0.05, "confidence": 0.95, "min_cycles": 0})
# the failing model first: a colour by position gave it the first colour, the passing one red
EXPECTED = {"Liar": "FAIL", "Honest": "PASS", "Young": "NOT YET DEMONSTRATED"}


def rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def luminance(hex_colour: str) -> float:
    def channel(v: int) -> float:
        c = v / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(int(hex_colour[i : i + 2], 16)) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("report")
    db = build(
        where / "models.sqlite",
        [
            DriveSpec("Liar", "L1", ["lost_durable_write", "ok"] * 10, channel=0),
            DriveSpec("Honest", "H1", ["ok"] * 70, channel=1),
            DriveSpec("Young", "Y1", ["ok"] * 10, channel=2),
        ],
        config=CONFIG,
        criteria_column=CRITERIA,
    )
    export.write_report([str(db)], str(where / "out"))
    return where


def boxes(driver: Any, selector: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => {"
        " const b = e.getBoundingClientRect(); return {x: b.left, y: b.top, r: b.right,"
        " b: b.bottom, text: e.textContent, fill: getComputedStyle(e).fill,"
        " background: getComputedStyle(e).backgroundColor, verdict: e.dataset.verdict,"
        " title: (e.querySelector('title') || {}).textContent}; })",
        selector,
    )
    return found


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["x"] < b["r"] and b["x"] < a["r"] and a["y"] < b["b"] and b["y"] < a["b"]


def test_bars_are_coloured_by_verdict_and_the_target_label_is_clear(report: Path) -> None:
    with chromium() as driver:
        driver.get((report / "out" / "report.html").as_uri())
        chart = "svg[aria-label^='Failure probability per cut']"
        bars = boxes(driver, f"{chart} rect.mark")
        assert len(bars) == 3, bars
        for bar in bars:
            model = bar["title"].split(":")[0]
            assert bar["fill"] == rgb(svg.VERDICT_FILL[EXPECTED[model]]), (model, bar)
        labels = boxes(driver, f"{chart} text.line-label")
        assert labels and labels[0]["text"] == "target p < 0.05"
        assert not [b for b in bars if overlap(b, labels[0])], (labels, bars)
        # the summary table's badges: the same colour as the bars (FAIL hatched over it)
        badges = boxes(driver, "span.verdict")
        by_label = {b["text"]: b["background"] for b in badges}
        assert by_label["PASS"] == rgb(svg.VERDICT_FILL["PASS"])
        assert by_label["NOT YET DEMONSTRATED"] == rgb(svg.VERDICT_FILL["NOT YET DEMONSTRATED"])
        page = driver.find_element("tag name", "body").text
    # in grey: every pair of verdict colours lies apart in lightness
    shades = sorted(luminance(c) for c in svg.VERDICT_FILL.values())
    assert min(b - a for a, b in itertools.pairwise(shades)) > 0.08, shades
    assert "1 drives" not in page and "(1 drive)" in page
    assert "is below 100" not in page and "not bounded yet" in page


def test_the_dashboard_shows_verdicts_in_the_reports_colours(report: Path, tmp_path: Path) -> None:
    client = create_app(StoreView([str(report / "models.sqlite")])).test_client()
    page = tmp_path / "overview.html"
    page.write_text(client.get("/").get_data(as_text=True))
    with chromium() as driver:
        driver.get(page.as_uri())
        badges = {b["text"]: b["background"] for b in boxes(driver, "span.verdict")}
    assert badges.get("PASS") == rgb(svg.VERDICT_FILL["PASS"]), badges


def test_one_figure_per_cell_and_no_header_only_endurance_tables(report: Path) -> None:
    text = (report / "out" / "report.html").read_text()
    for head in ("<th>written</th>", "<th>blocks checked</th>", "<th>full scans</th>"):
        assert head in text
    assert "written / checked / full scans / unchecked" not in text
    out = report / "out"
    assert (out / "drives.csv").is_file()
    for name in ("endurance.csv", "endurance_series.csv", "endurance_marks.csv", "pts_windows.csv"):
        assert not (out / name).exists(), name


def window() -> ModelWindow:
    rng = np.random.default_rng(7)
    delays = np.exp(rng.uniform(math.log(0.2), math.log(6000), 240)).tolist()
    p_loss = [1 - 0.5 * math.erfc(-(math.log(20) - math.log(d)) / math.sqrt(2)) for d in delays]
    lost = [bool(rng.random() > p) for p in p_loss]
    result = fit.fit(delays, lost)
    assert result.verdict == "window", result.summary()
    at = np.exp(np.linspace(math.log(min(delays)), math.log(max(delays)), 60))
    low, high = fit.band(result, delays, lost, at)
    return ModelWindow(
        "Liar", "lost_durable_write", "flush", delays, lost, result, at.tolist(), low, high
    )


def test_the_window_chart_has_its_labels_legend_and_quantile_marks(tmp_path: Path) -> None:
    page = tmp_path / "window.html"
    page.write_text(f"<!doctype html><html><body>{window_html.window_section([window()])}</body>")
    with chromium() as driver:
        driver.get(page.as_uri())
        (frame,) = boxes(driver, "svg.window-chart")
        ticks = boxes(driver, "svg.window-chart text.tick-label")
        labels = [b["text"] for b in boxes(driver, "svg.window-chart text.axis-label")]
        legend = boxes(driver, "svg.window-chart g.legend text")
        marks = [b["text"] for b in boxes(driver, "svg.window-chart g.t-mark text")]
    assert "10000" in [t["text"] for t in ticks]
    for t in ticks:  # every tick label whole inside the chart (none clipped at an edge)
        assert frame["x"] <= t["x"] and t["r"] <= frame["r"] and t["b"] <= frame["b"], t
    assert "P(loss: lost_durable_write)" in labels and "ms after the flush (log)" in labels
    assert len(legend) == 4
    assert [m.split()[0] for m in marks] == ["t50", "t99"]


def test_the_window_section_comes_before_the_models_finding_lists(report: Path) -> None:
    from reports.analysis import reliability as analysis
    from reports.load import dataset

    data = dataset.load([str(report / "models.sqlite")])
    marker = "<h2>Window of vulnerability</h2>"
    page = deferred.join(html.render_text(analysis.analyse(data), 0.0, before=Markup(marker)))
    assert page.index(marker) < page.index("Failure findings (first")
