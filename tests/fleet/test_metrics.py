"""Prometheus metrics (rig/interface/fleet/metrics.py): `rig serve --db STORE` and the station
agent's listener scraped by a real Prometheus server (Debian's) on loopback, its PromQL answers
compared with the store."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fixtures import sim_station
from fixtures.pgcluster import Cluster
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.interface.fleet import metrics
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.dashboard import create_app
from rig.interface.fleet.replicator import replicate_store
from rig.interface.fleet.views import CentralView, StoreView
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text
from tests.prometheus_server import available, free_port, prometheus


def make_store(path: Path) -> dict[str, int]:
    """A campaign on an honest and a lying drive; what the store says, by plain SQL."""
    text = campaign_text(["plp", "lying-flush"], 6, flush_every=2)
    # cuts late enough that flushes have completed: the liar loses flushed data at every cut;
    # cuts at 0.5-8 ms after the first write, as they fall on time, may hold none
    campaign = campaign_file.parse(text.replace("delay_ms = [0.5, 8]", "delay_ms = [20, 40]"))
    station, _ = sim_station.build(campaign)
    store = Store(str(path))
    run_campaign(campaign, station, store, Observer())
    q = store.query
    facts = {
        "cuts": q("SELECT COUNT(*) FROM cycle WHERE status IN ('ok', 'dead')")[0][0],
        "failing": q("SELECT COUNT(*) FROM cycle WHERE failures > 0")[0][0],
        "lost_durable": q(
            "SELECT COUNT(DISTINCT cycle_id) FROM finding"
            " WHERE failure = 1 AND class = 'lost_durable_write'"
        )[0][0],
        "returned": q("SELECT COUNT(*) FROM cycle WHERE back_ns >= cut_ns")[0][0],
        "returned_fast": q("SELECT COUNT(*) FROM cycle WHERE back_ns - cut_ns <= 1e9")[0][0],
    }
    store.close()
    return facts


def value(result: list[dict[str, object]]) -> float:
    assert len(result) == 1, result
    sample = result[0]["value"]
    assert isinstance(sample, list)
    return float(sample[1])


def wait_http(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@pytest.mark.skipif(bool(available()), reason=available())
def test_prometheus_scrapes_rig_serve_and_answers_promql(tmp_path: Path) -> None:
    db = tmp_path / "station.sqlite"
    facts = make_store(db)
    assert facts["failing"] and facts["lost_durable"]  # something to count
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "rig.interface.cli", "serve", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/metrics")
        with prometheus([f"127.0.0.1:{port}"], tmp_path / "prom") as prom:
            up = prom.wait_for('up{job="rig"} == 1')
            assert up, prom.log.read_text()[-2000:]
            cuts = prom.wait_for("sum(rig_cuts_total)")
            assert value(cuts) == facts["cuts"]
            assert value(prom.query("sum(rig_failing_cuts_total)")) == facts["failing"]
            lost = prom.query('sum(rig_failing_cuts_by_class_total{class="lost_durable_write"})')
            assert value(lost) == facts["lost_durable"]
            assert value(prom.query("sum(rig_errors_total)")) == 0
            assert value(prom.query("sum(rig_return_seconds_count)")) == facts["returned"]
            fast = prom.query('sum(rig_return_seconds_bucket{le="1.0"})')
            assert value(fast) == facts["returned_fast"]
            by_model = prom.query('rig_failing_cuts_total{model="SIM plp"}')
            assert value(by_model) == 0
            # the campaign ended: its drives are no longer active (the dashboard's states)
            assert value(prom.query('rig_drives{state="ended"}')) == 2
            assert prom.query('rig_drives{state="active"}') == []
    finally:
        serve.terminate()
        serve.wait(10)


def test_the_agent_listener_serves_the_stores_it_names(tmp_path: Path) -> None:
    """The agent's own listener (prometheus-client's HTTP server) on 127.0.0.1: the stores are
    named at each scrape, so a campaign that starts later is counted without a restart."""
    paths: list[str] = []
    port = free_port()
    server, thread = metrics.serve_stores(lambda: list(paths), "alpha", "127.0.0.1", port)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert "rig_cuts_total{" not in answer.read().decode()
        db = tmp_path / "later.sqlite"
        facts = make_store(db)
        paths.append(str(db))
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        cuts = [line for line in text.splitlines() if line.startswith("rig_cuts_total{")]
        assert len(cuts) == 2 and all('station="alpha"' in line for line in cuts)
        assert sum(float(line.rsplit(" ", 1)[1]) for line in cuts) == facts["cuts"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def samples(text: str, station: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, its station label replaced by `station`."""
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            labels = tuple(sorted({**s.labels, "station": station}.items()))
            found[s.name, labels] = s.value
    return found


def test_the_central_database_gives_the_same_metrics(pg: Cluster, tmp_path: Path) -> None:
    """`rig serve --central`: the fleet's SQL (rig/interface/fleet/central/reads.py) gives the
    station store's figures once the store is replicated."""
    db = tmp_path / "replicated.sqlite"
    make_store(db)
    store = Store(str(db))
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as central:
            assert replicate_store(store, central, "alpha") > 0
    finally:
        store.close()
    local = create_app(StoreView([str(db)])).test_client().get("/metrics")
    view = CentralView(pg.dsn("viewer", "pw-viewer", host="127.0.0.1"))
    try:
        fleet = create_app(view).test_client().get("/metrics")
    finally:
        view.close()
    assert local.status_code == fleet.status_code == 200
    expected = samples(local.get_data(as_text=True), "alpha")
    assert any(name == "rig_failing_cuts_by_class_total" for name, _ in expected)
    got = samples(fleet.get_data(as_text=True), "alpha")
    assert got == pytest.approx(expected, rel=1e-9)  # sums of seconds: summed in another order


def test_rig_drives_stops_counting_a_drive_active_once_its_campaign_ended(tmp_path: Path) -> None:
    """Both drives' campaign ended `done`: they are `ended`, as the dashboard shows them."""
    db = tmp_path / "ended.sqlite"
    make_store(db)
    text = create_app(StoreView([str(db)])).test_client().get("/metrics").get_data(as_text=True)
    states = {
        s.labels["state"]: s.value
        for family in text_string_to_metric_families(text)
        if family.name == "rig_drives"
        for s in family.samples
    }
    assert states == {"ended": 2}, states
