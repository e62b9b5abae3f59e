"""`rig serve`: every store given is served (`--db A --db B` as `--db A B`), an unknown model
or campaign is 404, and `--help` says what each option is and its default."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from reports.render.cells import pct
from rig.interface.fleet.dashboard import create_app
from rig.interface.fleet.views import StoreView
from rig.store import Store
from rig.verdict import stats
from tests.cli_runner import rig
from tests.prometheus_server import free_port
from tests.reports.storebuilder import DriveSpec, build


def stores(tmp_path: Path) -> list[Path]:
    return [
        build(tmp_path / "a.sqlite", [DriveSpec("Model A", "A1", ["ok"] * 3, channel=0)]),
        build(tmp_path / "b.sqlite", [DriveSpec("Model B", "B1", ["ok"] * 3, channel=0)]),
    ]


def test_a_repeated_db_serves_every_store(tmp_path: Path) -> None:
    a, b = stores(tmp_path)
    port = free_port()
    command = ["serve", "--db", str(a), "--db", str(b), "--port", str(port)]
    serve = subprocess.Popen(
        [sys.executable, "-m", "rig.interface.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert serve.stdout is not None
        first = serve.stdout.readline()
    finally:
        serve.terminate()
        serve.wait(10)
    assert f"({a}, {b})" in first, first


def test_unknown_models_and_campaigns_are_404(tmp_path: Path) -> None:
    a, b = stores(tmp_path)
    client = create_app(StoreView([str(a), str(b)])).test_client()
    assert client.get("/model/Model%20B").status_code == 200
    assert client.get("/fragment/model/Model%20A").status_code == 200
    for path in (
        "/model/NO-SUCH",
        "/fragment/model/NO-SUCH",
        "/campaign/9/9",
        "/fragment/campaign/0/9",
        "/fragment/campaign-report/NO-SUCH",
    ):
        assert client.get(path).status_code == 404, path


def test_help_texts_name_each_argument_and_its_default(tmp_path: Path) -> None:
    serve = rig("serve", "--help", cwd=tmp_path).stdout
    assert "(default 127.0.0.1)" in serve and "(default 8080)" in serve
    status = rig("status", "--help", cwd=tmp_path).stdout
    assert "STORE" in status and "the SQLite store to read" in status


def test_a_station_model_page_states_exposure_per_class(tmp_path: Path) -> None:
    """`rig serve --db`: a model's page is the report's, with its "Exposure per class": exposed
    and failing cuts and the upper bound of reports/analysis/exposure.py, NOT EXERCISED where no
    cut was
    exposed to a class."""
    a, _ = stores(tmp_path)
    store = Store(str(a))
    try:
        with store.transaction() as tx:
            tx.execute("UPDATE cycle SET exposed = 'bit_corruption'")
    finally:
        store.close()
    client = create_app(StoreView([str(a)])).test_client()
    page = client.get("/fragment/model/Model%20A").get_data(as_text=True)
    assert "Exposure per class" in page
    bound = pct(stats.clopper_pearson_upper(0, 3, 0.95))
    assert re.search(
        rf"<td>bit_corruption</td><td[^>]*>3</td><td[^>]*>0</td><td[^>]*>{bound}<", page
    )
    assert re.search(r"<td>lost_durable_write</td><td[^>]*>0</td>.*?NOT EXERCISED", page)
