"""The sequential verdict read from the fleet's central PostgreSQL equals the one read from the
station's store it was replicated from, and pools with another station's store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fixtures import sim_station
from fixtures.pgcluster import Cluster
from reports.analysis import reliability as analysis
from reports.load import dataset
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.replicator import replicate_store
from rig.store import Store
from tests.campaign.test_settled_campaign import settled_demo
from tests.fleet.central_helpers import central_dataset


def _store(path: Path, seed_offset: int) -> Path:
    campaign = settled_demo(cycles=6, when="cycles")
    campaign = dataclasses.replace(campaign, seed=campaign.seed + seed_offset)
    station, _ = sim_station.build(campaign)
    store = Store(str(path))
    try:
        run_campaign(campaign, station, store, Observer())
    finally:
        store.close()
    return path


def _sequential(data: dataset.Dataset) -> dict[str, object]:
    return {
        m.model: dataclasses.asdict(m.sequential)
        for m in analysis.analyse(data).models
        if m.sequential is not None
    }


def test_the_central_database_gives_the_stores_sequential_verdict(
    pg: Cluster, tmp_path: Path
) -> None:
    alpha = _store(tmp_path / "alpha.sqlite", 0)
    beta = _store(tmp_path / "beta.sqlite", 1)
    store = Store(str(alpha))
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as central:
            assert replicate_store(store, central, "alpha", ledgers=False) == 18
    finally:
        store.close()
    from_central = _sequential(central_dataset(pg.dsn("viewer", "pw-viewer", "127.0.0.1")))
    from_store = _sequential(dataset.load([str(alpha)]))
    assert from_central == from_store and len(from_store) == 3
    # beta's store beside the central database: the PLP model's plan pools both stations' cuts
    pooled = _sequential(
        dataset.merge(
            [
                central_dataset(pg.dsn("viewer", "pw-viewer", "127.0.0.1")),
                dataset.load([str(beta)]),
            ]
        )
    )
    plp = pooled["RIGSIM Enterprise PLP"]
    assert isinstance(plp, dict)
    assert plp["model"] == {"decision": "continuing", "cuts": 12, "failing": 0, "cuts_seen": 12}
