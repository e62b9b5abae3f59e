"""Prometheus metrics (`/metrics` in `rig serve` and, on a port of its own, in the station agent)
through prometheus-client. A custom collector computes every value from the data at each scrape
(one station's stores, or the central database), so restarting the server never counts a cut
twice and nothing is kept in between. docs/fleet.md, "Metrics", lists the names.

- rig_cuts_total, rig_failing_cuts_total, rig_errors_total: per drive of each campaign
  (labels station, campaign, model, serial, channel);
- rig_failing_cuts_by_class_total: the same with the failure class (label class);
- rig_return_seconds: a histogram of the time from the cut to the drive back on the bus, per model;
- rig_drives: drives by state (active, dead, stopped; ended or failed once their campaign
  ended) per station.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from rig.store.metrics import bucket_case

RETURN_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
DRIVE_LABELS = ["station", "campaign", "model", "serial", "channel"]


@dataclass
class MetricData:
    """What one scrape shows, read from stores or from the central database."""

    drives: list[dict[str, Any]] = field(default_factory=list)  # DRIVE_LABELS + status, counts
    failing_classes: Counter[tuple[str, ...]] = field(default_factory=Counter)  # labels + class
    # (station, model) -> per bucket (the last one above every bound), count, and seconds
    returns: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add_return(self, station: str, model: str, bucket: int, n: int, seconds: float) -> None:
        row = self.returns.setdefault((station, model), [0.0] * (len(RETURN_BUCKETS_S) + 2))
        row[bucket] += n
        row[-1] += seconds


def _state(row: Any) -> str:
    """A drive's state as the dashboard shows it: its own (dead, stopped), else its campaign's
    end (ended, stopped, failed) once it has one, else active (rig/interface/fleet/views.py)."""
    from rig.interface.fleet.views import drive_state

    return drive_state(str(row["status"]), str(row["campaign_end"] or ""))


def _labels(row: Any, station: str) -> list[str]:
    return [station, row["campaign"], row["model"], row["serial"], str(row["channel"])]


def from_stores(paths: list[str], station: str) -> MetricData:
    """One station's SQLite stores, each opened read-only for the scrape."""
    from rig.store import Store

    data = MetricData()
    for path in paths:
        store = Store(path, read_only=True)
        try:
            models = {}
            for row in store.metric_drives():
                labels = _labels(row, station)
                models[row["campaign"], row["serial"], row["channel"]] = row["model"]
                data.drives.append({"labels": labels, "status": _state(row), **_counts(row)})
            for row in store.metric_failing_classes():
                model = models[row["campaign"], row["serial"], row["channel"]]
                labels = [station, row["campaign"], model, row["serial"], str(row["channel"])]
                for cls in str(row["classes"]).split(","):
                    data.failing_classes[(*labels, cls)] += int(row["cuts"])
            for row in store.metric_returns(RETURN_BUCKETS_S):
                data.add_return(
                    station, row["model"], row["bucket"], row["n"], float(row["seconds"])
                )
        finally:
            store.close()
    return data


def from_central(central: Any) -> MetricData:
    """The fleet's central database (a reader role is enough): every station's drives."""
    data = MetricData()
    models = {}
    for row in central.metric_drives():
        labels = _labels(row, row["station"])
        models[row["station"], row["campaign"], row["serial"], row["channel"]] = row["model"]
        data.drives.append({"labels": labels, "status": _state(row), **_counts(row)})
    for row in central.metric_failing_classes():
        key = (row["station"], row["campaign"], row["serial"], row["channel"])
        labels = [key[0], key[1], models.get(key, ""), key[2], str(key[3])]
        data.failing_classes[(*labels, row["class"])] += int(row["cuts"])
    for row in central.metric_returns(bucket_case("s", RETURN_BUCKETS_S)):
        data.add_return(
            row["station"], row["model"], int(row["bucket"]), int(row["n"]), float(row["seconds"])
        )
    return data


def _counts(row: Any) -> dict[str, int]:
    return {k: int(row[k]) for k in ("cuts", "rig_errors", "failing")}


class RigCollector(Collector):
    """Every metric from `read()` at each scrape (one scrape at a time)."""

    def __init__(self, read: Callable[[], MetricData]) -> None:
        self.read = read
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            data = self.read()
        families = {
            "cuts": CounterMetricFamily(
                "rig_cuts", "power cuts made (cycles ok or dead)", labels=DRIVE_LABELS
            ),
            "failing": CounterMetricFamily(
                "rig_failing_cuts", "cuts with a failure finding", labels=DRIVE_LABELS
            ),
            "rig_errors": CounterMetricFamily(
                "rig_errors", "cycles ended by a fault of the rig", labels=DRIVE_LABELS
            ),
        }
        states: Counter[tuple[str, str]] = Counter()
        for d in data.drives:
            for key, family in families.items():
                family.add_metric(d["labels"], d[key])
            states[d["labels"][0], d["status"]] += 1
        yield from families.values()
        by_class = CounterMetricFamily(
            "rig_failing_cuts_by_class",
            "cuts with a failure finding of the class",
            labels=[*DRIVE_LABELS, "class"],
        )
        for labels, n in sorted(data.failing_classes.items()):
            by_class.add_metric(list(labels), n)
        yield by_class
        drives = GaugeMetricFamily("rig_drives", "drives by state", labels=["station", "state"])
        for (station, state), n in sorted(states.items()):
            drives.add_metric([station, state], n)
        yield drives
        yield _histogram(data)


def _histogram(data: MetricData) -> HistogramMetricFamily:
    family = HistogramMetricFamily(
        "rig_return_seconds",
        "time from the cut to the drive back on the bus",
        labels=["station", "model"],
    )
    for (station, model), row in sorted(data.returns.items()):
        cumulative, buckets = 0.0, []
        for bound, n in zip((*RETURN_BUCKETS_S, float("inf")), row[:-1], strict=True):
            cumulative += n
            buckets.append((_bound(bound), cumulative))
        family.add_metric([station, model], buckets, sum_value=row[-1])
    return family


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(value)


def registry(read: Callable[[], MetricData]) -> CollectorRegistry:
    """A registry of its own (not the process-wide default) holding the rig's collector."""
    own = CollectorRegistry(auto_describe=False)
    own.register(RigCollector(read))
    return own


def serve_stores(paths: Callable[[], list[str]], station: str, host: str, port: int) -> Any:
    """The agent's listener: `/metrics` of the stores `paths()` names at each scrape, on a
    thread of prometheus-client's HTTP server; returns (server, thread) to shut it down."""
    from prometheus_client import start_http_server

    return start_http_server(
        port, addr=host, registry=registry(lambda: from_stores(paths(), station))
    )


def reader_for(view: Any) -> Callable[[], MetricData]:
    """The dashboard's data (rig/interface/fleet/views.py) as metrics: its stores, or the central
    database through a connection of the metrics' own (reopened if the server went away)."""
    paths = getattr(view, "paths", None)
    if paths is not None:
        station = str(getattr(view, "station", "this station"))
        return lambda: from_stores(list(paths), station)
    from rig.interface.fleet.central import CentralStore

    dsn: str = view.dsn
    held: list[Any] = []

    def read() -> MetricData:
        if not held or held[0].closed:
            held[:] = [CentralStore(dsn)]
        return from_central(held[0])

    return read
