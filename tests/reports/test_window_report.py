"""The report's "Window of vulnerability" section, from the stores of real window campaigns on
in-process virtual drives with known windows (reports/analysis/window.py,
reports/render/window_html.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures import sim_station
from fixtures.profiles import profile
from reports.analysis import window
from reports.export import write_report
from reports.load import dataset
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.store import Store
from tests.window.test_window_campaign import DRIVE, campaign_text, window_of

NAME = "window-20ms-jitter"


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two stations' stores, one drive of the same model each (pooled by the report)."""
    paths = []
    for seed in (1, 2):
        where = tmp_path_factory.mktemp(f"station{seed}")
        campaign = campaign_file.parse(campaign_text([NAME], 25, window_of(NAME), seed=seed))
        station, _ = sim_station.build(campaign)
        store = Store(str(where / "s.sqlite"))
        run_campaign(campaign, station, store, Observer())
        store.close()
        paths.append(str(where / "s.sqlite"))
    return paths


def test_a_models_cuts_are_pooled_over_stores_and_fitted(stores: list[str]) -> None:
    windows = window.analyse(dataset.load(stores))
    assert [(w.model, w.cls, w.after) for w in windows] == [
        (f"SIM {NAME}", "lost_durable_write", "flush")
    ]
    (w,) = windows
    assert w.result.cuts == 50 and 0 < w.result.losses < 50
    assert w.result.verdict == "window", w.result.summary()
    t99 = w.result.quantile(0.99)
    assert t99 is not None and t99.bounded()
    truth = profile(NAME).true_quantile_ms(0.99)
    assert t99.low_ms / 3 < truth < t99.high_ms * 3  # type: ignore[operator]
    low, high = w.band_low, w.band_high
    assert all(a <= b for a, b in zip(low, high, strict=True))


def test_the_section_and_its_json_are_in_the_report(stores: list[str], tmp_path: Path) -> None:
    page = Path(write_report(stores, str(tmp_path / "r")))
    text = page.read_text()
    assert "<h2>Window of vulnerability</h2>" in text
    assert text.count("stroke-opacity") == 50  # a tick per cut
    body = json.loads((tmp_path / "r" / "report.json").read_text())
    (entry,) = body["window"]
    assert entry["cuts"] == 50 and set(entry["quantiles"]) == {"t50", "t99"}
    assert len(entry["cut_delays_ms"]) == len(entry["cut_lost"]) == 50


def test_a_drive_that_never_loses_says_so(tmp_path: Path) -> None:
    text = campaign_text(["honest"], 12, 'after = "flush"\nmin_ms = 0.5\nmax_ms = 50')
    campaign = campaign_file.parse(text)
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "h.sqlite"))
    run_campaign(campaign, station, store, Observer())
    store.close()
    (w,) = window.analyse(dataset.load([str(tmp_path / "h.sqlite")]))
    assert w.result.summary().startswith("no window found up to ")
    assert w.result.summary().endswith(" ms in 12 cuts")
    assert DRIVE  # the same drive table as the campaign tests
