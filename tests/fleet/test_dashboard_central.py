"""The overview read from the fleet's central database (a real PostgreSQL) after a finished
`rig demo --cycles 20` was replicated there: the campaign's real target, its drives' end state
and the report's verdicts, as from the store itself (tests/fleet/test_dashboard_finished.py)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from fixtures.pgcluster import Cluster
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.dashboard import create_app, overview_fragment
from rig.interface.fleet.replicator import replicate_store
from rig.interface.fleet.verdicts import VerdictBoard
from rig.interface.fleet.views import CentralView, StoreView
from rig.notify import failures
from rig.store import Store, open_existing
from tests.cli_runner import rig
from tests.reports.storebuilder import DriveSpec, build

CYCLES = 20


def test_the_central_overview_after_a_finished_demo(pg: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = rig(
        "demo", "--in-process", "--cycles", str(CYCLES), "--out", str(out), "--quiet", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    store = open_existing(str(out / "demo.sqlite"))
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as alpha:
            assert replicate_store(store, alpha, alpha.my_station(), ledgers=False) == 3 * CYCLES
    finally:
        store.close()
    expected = {
        m["model"]: m["verdict"]["label"]
        for m in json.loads((out / "report.json").read_text())["models"]
    }
    view = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    try:
        overview = view.overview()
        (campaign,) = [c for c in overview.campaigns if c.name == "demo"]
        assert (campaign.cycles, campaign.planned) == (3 * CYCLES, 3 * CYCLES)
        assert [d.status for d in campaign.drives] == ["ended"] * 3
        board = VerdictBoard(view)
        assert {v.model: v.label for v in board.campaign(campaign)} == expected
        assert {m: v.label for m, v in board.models(overview).items()} == expected
        page = overview_fragment(overview, board)
        for model in expected:
            assert f'href="/model/{model.replace(" ", "%20")}"' in page
        assert not re.search(r'href="/model/[^"]* ', page)
    finally:
        view.close()


SECRET_URL = "json://bob:hunter2@hooks.example:8443/T0KEN/x?key=s3cr3t"


def test_undelivered_notices_reach_the_central_overview_and_campaign_page(
    pg: Cluster, tmp_path: Path
) -> None:
    """A station's notices not delivered (its store's station-wide events, written by the
    runner's `Told`) are replicated with its campaign and shown on the central overview and
    that campaign's page as on the station's own dashboard: a line per kind, the newest ones
    with their time; the URL only as scheme and host."""
    db = build(tmp_path / "n.sqlite", [DriveSpec("Notified", "N1", ["ok"] * 3)])
    store = Store(str(db))
    try:
        told = failures.Told(lambda *a, **k: None, lambda line: None, store)
        for _ in range(2):
            told.write("notify_failed", event="fail", url=SECRET_URL, attempt=3, error="401")
        told.write("notify_gave_up", url=SECRET_URL, sending="campaign_end", pending=[])
    finally:
        store.close()
    store = open_existing(str(db))
    try:
        with CentralStore(pg.dsn("rig_station_beta")) as beta:
            replicate_store(store, beta, beta.my_station(), ledgers=False)
    finally:
        store.close()
    local = StoreView([str(db)]).overview()
    (own,) = local.campaigns
    expected = [
        "notifications not delivered: 2 notify_failed (last: fail to"
        " json://hooks.example:8443: 401)",
        "notifications not delivered: 1 notify_gave_up (last: campaign_end to"
        " json://hooks.example:8443: gave up at the end: 1 notice(s) not delivered)",
    ]
    assert own.undelivered.lines() == expected
    view = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    try:
        (campaign,) = [c for c in view.overview().campaigns if c.station == "beta"]
        assert campaign.undelivered == own.undelivered
        assert [u.kind for u in campaign.undelivered.last] == ["notify_gave_up"] + [
            "notify_failed"
        ] * 2
        client = create_app(view).test_client()
        overview = client.get("/fragment/overview").get_data(as_text=True)
        page = client.get(f"/campaign/{campaign.key}").get_data(as_text=True)
    finally:
        view.close()
    for line in expected:
        assert f"campaign {campaign.name} on beta: {html.escape(line)}" in overview, overview
        assert html.escape(line) in page
    assert page.count("<td>json://hooks.example:8443</td>") == 3
    for secret in ("bob", "hunter2", "T0KEN", "s3cr3t"):
        assert secret not in overview and secret not in page
