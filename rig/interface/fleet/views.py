"""What the dashboard and `rig fleet status` show, read from the central database (the fleet) or
from one station's SQLite stores (a one-station lab needs no PostgreSQL): the same `Overview`
either way, and the report's `Dataset` for a campaign or a model page.

The interface a page needs is small (`FleetView`): an overview, and the dataset of one campaign or
one model. Reading the report's data follows reports/load/dataset.py and reports/load/central.py.
"""

from __future__ import annotations

import contextlib
import threading
import time
import tomllib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from reports import Dataset, load_dataset, read_central, read_summaries
from rig.interface.fleet.freshness import (
    ENDED,
    REPORTING,
    StationStatus,
    campaign_state,
    effective_kind,
    process_bound,
    station_statuses,
)
from rig.interface.fleet.progress import CampaignProgress, FleetDriveProgress, Overview
from rig.notify import failures
from rig.notify.failures import NotDelivered

RATE_WINDOW_S = 900.0  # cycles per hour: over the last 15 minutes (or the campaign's age)


class FleetView(Protocol):
    source: str

    def overview(self) -> Overview: ...

    def campaign_dataset(self, key: str) -> Dataset: ...

    def model_dataset(self, model: str) -> Dataset: ...

    def model_summaries(self, model: str | None = None, campaign: str | None = None) -> Any: ...

    def close(self) -> None: ...


def planned_cycles(config_text: str, drives: int) -> int:
    try:
        cycles = tomllib.loads(config_text).get("campaign", {}).get("cycles", 0)
    except tomllib.TOMLDecodeError:
        return 0
    return int(cycles) * drives if isinstance(cycles, int) else 0


def _rate(recent: int, started_at: float | None, now: float) -> float:
    """Cycles per hour over the rate window (or since the start, if younger)."""
    if not recent or started_at is None:
        return 0.0
    window = max(1.0, min(RATE_WINDOW_S, now - started_at))
    return recent * 3600.0 / window


def _eta(progress: CampaignProgress) -> float | None:
    if progress.status not in ("running", "queued") or not progress.per_hour:
        return None
    left = max(0, progress.planned - progress.cycles)
    return left / progress.per_hour * 3600.0


class CentralView:
    """The fleet, from the central database (a reader role is enough)."""

    def __init__(self, dsn: str) -> None:
        from rig.interface.fleet.central import CentralStore

        self.dsn = dsn
        self.source = "central database"
        self._central = CentralStore(dsn)
        self._lock = threading.Lock()  # one connection, pages served on several threads

    def _fresh(self) -> Any:
        """The connection, reopened if the server went away since the last page."""
        from rig.interface.fleet.central import CentralStore

        if self._central.closed:
            self._central = CentralStore(self.dsn)
        return self._central

    def _retried(self, read: Callable[[Any], Any]) -> Any:
        """`read(connection)`; a connection error (the server restarted since the last page:
        AdminShutdown, a lost link) is retried once on a new connection before it fails."""
        import psycopg

        from rig.interface.fleet.central import CentralStore

        with self._lock:
            try:
                return read(self._fresh())
            except (psycopg.OperationalError, psycopg.InterfaceError):
                with contextlib.suppress(Exception):
                    self._central.close()
                self._central = CentralStore(self.dsn)
                return read(self._central)

    def overview(self) -> Overview:
        return self._retried(self._overview)

    def _overview(self, central: Any) -> Overview:
        now = time.time()
        stations = station_statuses(central.stations())
        by_name = {s.name: s for s in stations}
        progress = {
            (r["station"], r["campaign_uid"], r["channel"]): r
            for r in central.progress_rows(RATE_WINDOW_S)
        }
        findings: dict[tuple[str, int], dict[str, int]] = {}
        for r in central.finding_counts():
            findings.setdefault((r["station"], r["campaign_uid"]), {})[r["class"]] = int(r["n"])
        drives: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for d in central.drive_rows():
            drives.setdefault((d["station"], d["campaign_uid"]), []).append(d)
        submissions = {s["id"]: s for s in central.submissions()}
        undelivered = _central_undelivered(central)
        campaigns: list[CampaignProgress] = []
        shown: set[int] = set()
        for c in central.campaign_rows():
            key = (c["station"], c["uid"])
            sub = submissions.get(c["submission_id"]) if c["submission_id"] else None
            if sub is not None:
                shown.add(sub["id"])
            made = _central_campaign(
                c, sub, drives.get(key, []), progress, findings.get(key, {}), now
            )
            held = sum(int(p["rows"]) for k, p in progress.items() if k[:2] == key)
            made.undelivered = undelivered.get(key, made.undelivered)
            campaigns.append(_freshen(made, sub, by_name.get(c["station"]), held))
        campaigns += [
            _freshen(_queued(s, now), s, by_name.get(s["station"]), 0)
            for s in submissions.values()
            if s["id"] not in shown
        ]
        models = sorted({d["model"] for rows in drives.values() for d in rows})
        return Overview(self.source, stations, campaigns, models, now)

    def campaign_dataset(self, key: str) -> Dataset:
        station, _, uid = key.partition("/")
        return self._retried(
            lambda central: read_central(
                central,
                campaign=lambda row: row["station"] == station and str(row["uid"]) == uid,
            )
        )

    def model_dataset(self, model: str) -> Dataset:
        return self._retried(
            lambda central: read_central(central, drive=lambda row: row["model"] == model)
        )

    def model_summaries(self, model: str | None = None, campaign: str | None = None) -> Any:
        return self._retried(lambda central: read_summaries(central, model, campaign))

    def close(self) -> None:
        self._central.close()


def _central_undelivered(central: Any) -> dict[tuple[str, int], NotDelivered]:
    """Per campaign (station, uid) the notifications not delivered that reached us."""
    found: dict[tuple[str, int], NotDelivered] = {}
    for r in central.notify_failure_kinds():
        one = found.setdefault((r["station"], r["campaign_uid"]), NotDelivered())
        one.kinds[r["kind"]] = (int(r["n"]), failures.undelivered(r["kind"], r["last"]))
    for r in central.notify_failures_last(failures.LAST):
        one = found.setdefault((r["station"], r["campaign_uid"]), NotDelivered())
        one.last.append(failures.undelivered(r["kind"], r["detail"]))
    return found


def _freshen(
    progress: CampaignProgress, sub: Any, station: StationStatus | None, held_rows: int
) -> CampaignProgress:
    """The campaign's numbers and state as old as they are: progress is what its station last
    reported (or what reached us, if more), `shipping` until the centre holds the station's
    final count, `lagging` while its station is stale, a duration once it has ended."""
    progress.held_rows = held_rows
    if sub is not None:
        progress.recorded_rows = _int_or_none(sub["recorded_rows"])
        progress.final_rows = _int_or_none(sub["final_rows"])
        progress.cycles = max(progress.cycles, int(sub["recorded_cycles"] or 0))
        progress.reported_s = float(sub["reported_s"]) if sub["reported_s"] is not None else None
        kind = effective_kind(station.kind if station else "", sub["config"])
        progress.process_bound = process_bound(kind)
    progress.state = campaign_state(progress.status, held_rows, progress.final_rows)
    progress.lagging = progress.state in REPORTING and getattr(station, "state", "") != "online"
    if progress.lagging:
        progress.eta_s = None  # its rate is what reached us, not what the station does
    return _paced(progress)


def _paced(progress: CampaignProgress) -> CampaignProgress:
    """An ended campaign shows how long it took, not a rate that only decays."""
    if progress.state in ENDED:
        if progress.started_at is not None and progress.ended_at is not None:
            progress.duration_s = max(0.0, progress.ended_at - progress.started_at)
        progress.per_hour, progress.eta_s = 0.0, None
    return progress


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _central_campaign(
    c: Any,
    sub: Any,
    rows: list[dict[str, Any]],
    progress: dict[tuple[str, int, int], Any],
    findings: dict[str, int],
    now: float,
) -> CampaignProgress:
    """A campaign of the central database; its submission's state, where it has one, wins."""
    return _campaign_progress(
        c,
        f"{c['station']}/{c['uid']}",
        c["station"],
        sub["status"] if sub is not None else c["status"],
        sub["id"] if sub is not None else None,
        _drive_progress(
            rows, progress, lambda d: (c["station"], c["uid"], d["channel"]), campaign_end(c)
        ),
        findings,
        now,
    )


def _campaign_progress(
    c: Any,
    key: str,
    station: str,
    status: str,
    submission_id: int | None,
    drives: tuple[list[FleetDriveProgress], int],
    findings: dict[str, int],
    now: float,
) -> CampaignProgress:
    """A campaign row (the central database's or a store's: the same columns) with its drives'
    progress and the cycles they ended within the rate window (`_drive_progress`)."""
    per_drive, recent = drives
    return _progress(
        key,
        c["name"],
        station,
        status,
        submission_id,
        c["started_at"],
        c["ended_at"],
        planned_cycles(c["config"], len(per_drive)),
        per_drive,
        recent,
        int(c["resumes"]),
        findings,
        now,
    )


def _queued(sub: Any, now: float) -> CampaignProgress:
    """A submission no cycle of which has reached the central database yet."""
    return _progress(
        f"q{sub['id']}",
        sub["name"],
        sub["station"],
        sub["status"],
        sub["id"],
        None,
        None,
        int(sub["cycles_planned"]),
        [],
        0,
        0,
        {},
        now,
    )


# a drive still `active` in the store when its campaign ended is shown with the campaign's end
ENDED_AS = {"done": "ended", "stopped": "stopped", "error": "failed", "failed": "failed"}


def campaign_end(c: Any) -> str:
    """The campaign row's end status ("" while it has not ended)."""
    return str(c["status"]) if c["ended_at"] is not None else ""


def drive_state(status: str, ended: str) -> str:
    """A drive's state: its own where the store set one (dead, stopped), else its campaign's
    end (ended, stopped, failed) once the campaign has one, else active."""
    if status != "active" or not ended:
        return status
    return ENDED_AS.get(ended, ended)


def _drive_progress(
    rows: list[Any], progress: Mapping[Any, Any], key: Callable[[Any], Any], ended: str = ""
) -> tuple[list[FleetDriveProgress], int]:
    """Each drive's progress, and the cycles its drives ended within the rate window
    (`progress`: progress rows by `key` of their drive row; a drive without cycles has none;
    `ended`: the campaign's end status, `campaign_end`)."""
    per_drive: list[FleetDriveProgress] = []
    recent = 0
    for d in rows:
        found = progress.get(key(d))
        state = drive_state(d["status"], ended)
        per_drive.append(
            FleetDriveProgress(d["channel"], d["model"], d["serial"], state, *_counts(found))
        )
        if found is not None:
            recent += int(found["recent"])
    return per_drive, recent


def _counts(row: Any) -> tuple[int, int, int, int]:
    """(cycles, cuts, rig errors, failing) of a progress row (a mapping or sqlite3.Row)."""
    if row is None:
        return 0, 0, 0, 0
    return int(row["cycles"]), int(row["cuts"]), int(row["rig_errors"]), int(row["failing"])


def _progress(
    key: str,
    name: str,
    station: str,
    status: str,
    submission_id: int | None,
    started_at: float | None,
    ended_at: float | None,
    planned: int,
    drives: list[FleetDriveProgress],
    recent: int,
    resumes: int,
    findings: dict[str, int],
    now: float,
) -> CampaignProgress:
    progress = CampaignProgress(
        key=key,
        name=name,
        station=station,
        status=status,
        submission_id=submission_id,
        started_at=started_at,
        ended_at=ended_at,
        planned=planned,
        cycles=sum(d.cycles for d in drives),
        cuts=sum(d.cuts for d in drives),
        rig_errors=sum(d.rig_errors for d in drives),
        failing=sum(d.failing for d in drives),
        per_hour=_rate(recent, started_at, now),
        eta_s=None,
        resumes=resumes,
        findings=dict(sorted(findings.items())),
        drives=drives,
    )
    progress.eta_s = _eta(progress)
    return progress


class StoreView:
    """One station's SQLite stores, read-only beside the rig that writes them."""

    def __init__(self, paths: list[str], station: str = "this station") -> None:
        from rig.store import Store

        self.paths = paths
        self.station = station
        self.source = ", ".join(paths)
        for path in paths:  # refuse what is not a store now, not on the first page
            Store(path, read_only=True).close()

    def overview(self) -> Overview:
        from rig.store import Store

        now = time.time()
        campaigns: list[CampaignProgress] = []
        models: set[str] = set()
        for index, path in enumerate(self.paths):
            store = Store(path, read_only=True)
            try:
                progress = {r["drive_id"]: r for r in store.progress_rows(now - RATE_WINDOW_S)}
                findings: dict[int, dict[str, int]] = {}
                for r in store.failure_counts():
                    findings.setdefault(r["campaign_id"], {})[r["class"]] = int(r["n"])
                undelivered = failures.read(store)
                held = list(store.campaigns())
                last_id = max((c["id"] for c in held), default=None)
                for c in held:
                    rows = store.drives_of(c["id"])
                    models.update(d["model"] for d in rows)
                    campaigns.append(
                        _paced(
                            _campaign_progress(
                                c,
                                f"{index}/{c['id']}",
                                self.station,
                                c["status"],
                                None,
                                _drive_progress(rows, progress, lambda d: d["id"], campaign_end(c)),
                                findings.get(c["id"], {}),
                                now,
                            )
                        )
                    )
                    if c["id"] == last_id:
                        campaigns[-1].undelivered = undelivered
            finally:
                store.close()
        return Overview(self.source, [], campaigns, sorted(models), now)

    def _dataset(self) -> Dataset:
        return load_dataset(self.paths)

    def campaign_dataset(self, key: str) -> Dataset:
        index, _, campaign_id = key.partition("/")
        if not index.isdigit() or int(index) >= len(self.paths):
            return Dataset(sources=[], campaigns=[], runs=[])
        data = load_dataset([self.paths[int(index)]])
        return _only(data, lambda run: str(run.campaign.campaign_id) == campaign_id)

    def model_dataset(self, model: str) -> Dataset:
        return _only(self._dataset(), lambda run: run.model == model)

    def model_summaries(self, model: str | None = None, campaign: str | None = None) -> Any:
        return None  # a station's stores: the report's own analysis (small)

    def close(self) -> None:
        pass


def _only(data: Dataset, keep: Any) -> Dataset:
    runs = [r for r in data.runs if keep(r)]
    campaigns = [c for c in data.campaigns if any(r.campaign is c for r in runs)]
    return Dataset(data.sources, campaigns, runs, data.unread_tables)
