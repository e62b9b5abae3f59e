"""The report's dataset from a central database, as `rig report --central DSN` reads it."""

from __future__ import annotations

from reports.load import central as report_central
from reports.load.dataset import Dataset
from rig.interface.fleet.central import CentralStore


def central_dataset(dsn: str) -> Dataset:
    with CentralStore(dsn) as store:
        return report_central.read(store)
