"""A PostgreSQL server with the fleet's schema for the fleet tests (one per module), skipped with
the reason where this machine cannot run one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fixtures import pgcluster
from rig.interface.fleet import dispatch
from rig.interface.fleet.central import CentralStore


@pytest.fixture(scope="module")
def pg() -> Iterator[pgcluster.Cluster]:
    why = pgcluster.requirements()
    if why:
        pytest.skip(why)
    with pgcluster.cluster(listen="127.0.0.1") as server:
        dispatch.apply_queue_schema(server.dsn())
        with CentralStore(server.dsn()) as central:
            central.migrate()
            for name in ("alpha", "beta"):
                central.add_station(name, f"pw-{name}")
            central.add_user("viewer", "pw-viewer", "reader")
            central.add_user("operator", "pw-operator", "dispatch")
        yield server
