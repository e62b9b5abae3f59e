"""The overview read from the fleet's central database (a real PostgreSQL) after a finished
`rig demo --cycles 20` was replicated there: the campaign's real target, its drives' end state
and the report's verdicts, as from the store itself (tests/fleet/test_dashboard_finished.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fixtures.pgcluster import Cluster
from rig.fleet.central import CentralStore
from rig.fleet.dashboard import overview_fragment
from rig.fleet.replicator import replicate_store
from rig.fleet.verdicts import VerdictBoard
from rig.fleet.views import CentralView
from rig.store import open_existing
from tests.cli_runner import rig

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
