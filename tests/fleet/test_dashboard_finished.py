"""The dashboard over a finished campaign: a finished
`rig demo --cycles 20` shows its real target (60 of 60 cycles, a full bar), its drives' end states,
the report's verdicts per campaign and per model, and model links that are URL-encoded; in headless
Chromium over the demo's store (`rig serve --db`, no PostgreSQL). The drive states of a stopped
and a failed campaign are read from a store built here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.pgcluster import free_port
from rig.interface.fleet.views import StoreView
from rig.store import Store
from tests.cli_runner import rig
from tests.fleet import browser
from tests.fleet.test_dashboard_browser import end, start, wait_http

CYCLES = 20


@pytest.fixture(scope="module")
def finished_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A finished in-process demo of CYCLES cuts per drive, served by `rig serve --db`."""
    why = browser.requirements()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("demo")
    done = rig(
        "demo", "--in-process", "--cycles", str(CYCLES), "--out", str(out), "--quiet", cwd=out
    )
    assert done.returncode == 0, done.stderr
    port = free_port()
    server = start(["serve", "--db", str(out / "demo.sqlite"), "--port", str(port)], out / "log")
    try:
        wait_http(port)
        yield out, port
    finally:
        end(server)


def test_progress_is_the_campaigns_real_target(finished_demo: tuple[Path, int]) -> None:
    out, port = finished_demo
    drives = len(json.loads((out / "report.json").read_text())["models"])
    with browser.chromium() as page:
        page.get(f"http://127.0.0.1:{port}/")
        row = page.find_element("css selector", "tr.campaign")
        progress = row.find_element("css selector", "span.done").find_element("xpath", "..").text
        assert progress == f"{CYCLES * drives}/{CYCLES * drives}"  # was 60/180
        bar = row.find_element("css selector", ".bar i")
        outer = row.find_element("css selector", ".bar")
        assert bar.size["width"] == pytest.approx(outer.size["width"], abs=1)  # a full bar


def test_drives_show_their_end_state(finished_demo: tuple[Path, int]) -> None:
    _, port = finished_demo
    with browser.chromium() as page:
        page.get(f"http://127.0.0.1:{port}/campaign/0/1")
        drives = page.find_elements("css selector", "table.live")[-1]  # ch, model, serial, status
        states = [
            r.find_elements("tag name", "td")[3].text
            for r in drives.find_elements("xpath", "./tbody/tr[td]")
        ]
        assert states == ["ended"] * 3  # they stayed "active" after the end


def test_overview_has_the_reports_verdicts(finished_demo: tuple[Path, int]) -> None:
    """Per model and per campaign, the verdict report.json (the report's analysis) states."""
    out, port = finished_demo
    expected = {
        m["model"]: m["verdict"]["label"]
        for m in json.loads((out / "report.json").read_text())["models"]
    }
    assert set(expected.values()) == {"FAIL", "NOT YET DEMONSTRATED"}  # the demo's drives
    with browser.chromium() as page:
        page.get(f"http://127.0.0.1:{port}/")
        shown = {}
        for row in page.find_elements("css selector", "tr.model"):
            cells = row.find_elements("css selector", "td")
            shown[cells[0].text] = cells[1].text
        assert shown == expected
        campaign = page.find_element("css selector", "tr.campaign td.verdicts").text
        for model, label in expected.items():  # one campaign holds every model here
            assert f"{label} {model}" in campaign.splitlines()


def test_model_links_are_url_encoded_and_lead_to_the_model(
    finished_demo: tuple[Path, int],
) -> None:
    _, port = finished_demo
    with browser.chromium() as page:
        page.get(f"http://127.0.0.1:{port}/")
        links = page.find_elements("css selector", "a[href^='/model/']")
        hrefs = {a.text: a.get_attribute("href") for a in links}
        raw = [a.get_dom_attribute("href") for a in links]
        assert len(raw) == 3 and all(" " not in h and "%20" in h for h in raw), raw
        model = "RIGSIM Lying Flush"
        page.get(hrefs[model])
        assert page.find_element("tag name", "h1").text == f"Model {model}"
        body = page.find_element("tag name", "body").text
        assert "FAIL" in body and "RIGSIM Torn Writer" not in body


@pytest.mark.parametrize(
    ("campaign_status", "drive_status", "shown"),
    [
        ("done", "active", "ended"),
        ("stopped", "active", "stopped"),
        ("error", "active", "failed"),
        ("done", "dead", "dead"),
        ("done", "stopped", "stopped"),
        ("", "active", "active"),  # still running
    ],
)
def test_drive_state_after_the_end_comes_from_the_store(
    tmp_path: Path, campaign_status: str, drive_status: str, shown: str
) -> None:
    path = str(tmp_path / "s.sqlite")
    store = Store(path)
    cid = store.new_campaign("c", "[campaign]\ncycles = 5\n", 1, "simulated")
    ident = {"model": "m", "serial": "s1", "wwn": "", "firmware": ""}
    drive = store.add_drive(cid, 0, ident, 1 << 30, 4096, (0, 100))
    store.set_drive_status(drive, drive_status)
    if campaign_status:
        store.end_campaign(cid, campaign_status)
    store.close()
    (campaign,) = StoreView([path]).overview().campaigns
    assert [d.status for d in campaign.drives] == [shown]
