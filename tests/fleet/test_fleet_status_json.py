"""`rig fleet status --json` against a real PostgreSQL: the document validates against its
published schema (docs/json/rig.fleet-status-1.schema.json) and says what the central
database holds."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.pgcluster import Cluster
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.replicator import replicate_store
from rig.store import Store
from tests.cli_runner import rig
from tests.json_schemas import validate
from tests.reports.storebuilder import DriveSpec, build


def test_fleet_status_json_validates_and_counts_the_replicated_cycles(
    pg: Cluster, tmp_path: Path
) -> None:
    db = build(
        tmp_path / "alpha.sqlite",
        [
            DriveSpec("Model A", "JA1", ["ok", "ok", "shorn_write"], channel=0),
            DriveSpec("Model B", "JB1", ["ok", "error"], channel=1),
        ],
        name="json-night",
    )
    store = Store(str(db))
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as central:
            assert replicate_store(store, central, "alpha") == 5
    finally:
        store.close()
    reader = pg.dsn("viewer", "pw-viewer", "127.0.0.1")
    done = rig("fleet", "status", "--central", reader, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["schema"] == "rig.fleet-status/1"
    assert {"alpha", "beta"} <= {s["name"] for s in doc["stations"]}
    (night,) = [c for c in doc["campaigns"] if c["name"] == "json-night"]
    assert night["station"] == "alpha" and night["key"].startswith("alpha/")
    assert (night["cycles"], night["cuts"], night["rig_errors"]) == (5, 4, 1)
    assert night["findings"] == {"shorn_write": 1} and night["cuts_with_failure"] == 1
    assert {d["serial"]: d["cycles"] for d in night["drives"]} == {"JA1": 3, "JB1": 2}
    assert {"Model A", "Model B"} <= set(doc["models"])
    # the text form is unchanged by --json's existence
    text = rig("fleet", "status", "--central", reader, cwd=tmp_path)
    assert text.returncode == 0 and "json-night on alpha" in text.stdout
