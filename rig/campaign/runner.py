"""`rig run`: a campaign from its file, or `--resume` from its store, unattended.

- all channels in parallel (rig/campaign/), live progress (rig/campaign/progress.py), a JSON-lines
  log (rig/campaign/runlog.py);
- SIGINT/SIGTERM stop safely: every drive's cycle in flight ends at its next phase boundary and
  is recorded as `interrupted`, the store is closed consistent, power goes to the safe state;
- `--resume STORE` continues the store's last campaign at the next cycle (rig/campaign/resume.py).
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from rig.campaign import resume, startup
from rig.campaign.model import DriveSummary
from rig.campaign.notices import CampaignNotices
from rig.campaign.observer import (
    CampaignEvents,
    EdgeRecorder,
    ResumeReconciliation,
    RunLogLines,
    Started,
)
from rig.campaign.parallel import run_campaign
from rig.campaign.preparation import Attachment
from rig.campaign.progress import Progress
from rig.campaign.runlog import RunLog
from rig.config import campaign_file
from rig.config.campaign import Campaign, Criteria
from rig.errors import UserError
from rig.notify import failures as notify_failures
from rig.notify.sender import Notifier, apprise_services
from rig.power.base import Edge
from rig.station import backends
from rig.station.model import Station
from rig.store import Store, open_existing

# (campaign, where its switching edges go, its store's path) -> its station (rig/station/build.py)
StationFactory = Callable[[Campaign, Callable[[Edge], None], str], Station]


@dataclass(frozen=True)
class RunResult:
    db: str
    log: str
    summaries: list[DriveSummary]
    finished_before: list[str]  # drives a resume found dead, stopped or done
    signal: int  # the signal that stopped the run, 0 if none
    criteria: Criteria  # the campaign's pass criteria (the end table's verdicts)
    resumable: bool = True  # its drives outlive the rig (not a simulated station's)


def default_log_path(db: str) -> str:
    return os.path.splitext(db)[0] + ".log.jsonl"


@contextmanager
def stop_on_signals(stop: threading.Event, on_signal: Callable[[int], None]) -> Iterator[list[int]]:
    """SIGINT and SIGTERM set `stop` (a second one too: the stop is already under way)."""
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        # Only set the event here: the main thread may hold any other lock (progress, log)
        # at the moment the handler runs on it; a helper thread reports the signal.
        received.append(signum)
        stop.set()

    def report() -> None:
        stop.wait()
        if received:
            on_signal(received[0])

    threading.Thread(target=report, name="signal-report", daemon=True).start()

    if threading.current_thread() is not threading.main_thread():
        yield received  # signals can only be caught on the main thread
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def wait_for_drives(station: Station, campaign: Campaign, progress: Progress) -> None:
    """After a crash the drives may still be coming back (the board's watchdog has just put
    power back on): wait for each, up to its return timeout, before opening it."""
    deadline = time.monotonic() + campaign.cut.return_timeout_s
    for spec in campaign.drives:
        if station.presence.find(spec.identity) is not None:
            continue
        if not station.power.state(spec.channel):
            station.power.on(spec.channel)
        progress.message(f"ch{spec.channel}: waiting for {spec.identity.label()} to come back")
        while station.presence.find(spec.identity) is None:
            if time.monotonic() > deadline:
                raise UserError(f"drive {spec.identity.label()} not found on the bus")
            time.sleep(0.1)


def _observer(
    events: CampaignEvents,
    log: RunLog,
    progress: Progress,
    campaign: Campaign,
    store: Store,
) -> Notifier | None:
    """The run's subscribers after the edge recorder and the start flag, in the order they
        hear each event: the run log, the progress display and, where the campaign has `[notify]`
        URLs, its notices (queued only: rig/notify/sender.py sends them), whose failures reach the
    terminal and the store too (rig/notify/failures.py). Returns the notifier."""
    spec = campaign.notify
    services = apprise_services(spec.urls, spec.config) if spec.enabled else []
    told = notify_failures.Told(log.write, progress.message, store)
    notifier = Notifier(services, told.write) if services else None
    events.subscribe(RunLogLines(log))
    events.subscribe(progress)
    if notifier is not None:
        events.subscribe(CampaignNotices(campaign, notifier, where=store.path))
    return notifier


def _open_resume(resume_db: str) -> tuple[Store, resume.Resumable]:
    """The store to resume, open, and what it continues."""
    store = open_existing(resume_db)
    try:
        resumable = resume.load(store)
    except BaseException:
        store.close()
        raise
    if backends.lookup(resumable.campaign.station.kind).simulated_drives:
        store.close()
        raise UserError(
            f"{resume_db}: a simulated station's drives live inside the rig process and"
            " are gone with it; resume needs drives that outlive it"
        )
    return store, resumable


def _begin(
    station: Station,
    store: Store,
    log: RunLog,
    campaign: Campaign,
    db: str,
    resumable: resume.Resumable | None,
    progress: Progress,
) -> None:
    """The run log's first line; a resume first waits for its drives and counts the resume."""
    if resumable is None:
        log.write("start", campaign=campaign.name, db=db, cycles=campaign.cycles)
        return
    wait_for_drives(station, campaign, progress)
    resume.mark_resumed(store, resumable.campaign_id)
    log.write(
        "resume",
        campaign=campaign.name,
        db=db,
        drives=[d.channel for d in campaign.drives],
        finished=resumable.finished,
    )


def run(
    station_factory: StationFactory,
    *,
    campaign_path: str = "",
    campaign: Campaign | None = None,
    resume_db: str = "",
    db: str = "",
    log_path: str = "",
    progress: Progress | None = None,
) -> RunResult:
    """Run a campaign file (`campaign_path`), a campaign already read (`campaign`: `rig demo`'s,
    adjusted by its command line), or resume a store (`resume_db`). A new campaign's store and
    log are made only once every check that can refuse it has passed (rig/campaign/startup.py)."""
    if sum(map(bool, (campaign_path, campaign, resume_db))) != 1:
        raise UserError("rig run: give a campaign file, or --resume STORE (not both)")
    progress = progress or Progress()
    store: Store | None = None
    resumable: resume.Resumable | None = None
    unmade: startup.Unmade | None = None
    if resume_db:
        store, resumable = _open_resume(resume_db)
        campaign, db = resumable.campaign, resume_db
    else:
        campaign = campaign or campaign_file.load(campaign_path)
        db = db or f"{campaign.name}.sqlite"
        startup.refuse_a_used_store(db)  # read-only, before any file is touched
    log_path = log_path or default_log_path(db)
    if store is None:
        unmade = startup.Unmade(db, log_path)  # (their folders checked: before any file)
    edges = startup.EdgeSink(db)
    started = Started()  # every drive prepared: from here on, a record
    events = CampaignEvents(EdgeRecorder(edges), started)  # the run's one observer
    attached: dict[int, Attachment] = {}
    refused = False
    try:
        station = station_factory(campaign, events.edge, db)
        try:
            if store is None:
                attached = startup.acquire_drives(campaign, station)
                store = Store(db)
            edges.attach(store)
            run = _Run(campaign, db, station, store, log_path, events, progress)
            return run.go(resumable, attached)
        finally:
            for attachment in attached.values():
                attachment.release()  # (those no drive's run took)
            station.power.close()
    except UserError:
        refused = unmade is not None and not started.started
        raise
    finally:
        progress.close()
        if store is not None:
            store.close()
        if refused and unmade is not None:
            unmade.remove()  # refused at the start: no store and no log left behind


@dataclass
class _Run:
    """The campaign on its open store and log, under SIGINT/SIGTERM handling."""

    campaign: Campaign
    db: str
    station: Station
    store: Store
    log_path: str
    events: CampaignEvents
    progress: Progress

    def go(self, resumable: resume.Resumable | None, attached: dict[int, Attachment]) -> RunResult:
        campaign, events = self.campaign, self.events
        log = RunLog(self.log_path)
        if resumable is not None:  # first: its messages reach the log and progress below
            events.subscribe(ResumeReconciliation(resumable, self.store, events))
        notifier = _observer(events, log, self.progress, campaign, self.store)
        stop = threading.Event()
        summaries: list[DriveSummary] = []
        finished = resumable.finished if resumable else []
        try:
            with stop_on_signals(stop, functools.partial(self.signal, log)) as received:
                _begin(self.station, self.store, log, campaign, self.db, resumable, self.progress)
                summaries = run_campaign(
                    campaign,
                    self.station,
                    self.store,
                    events,
                    stop,
                    campaign_id=resumable.campaign_id if resumable else None,
                    resume=resumable.points if resumable else None,
                    attached=attached,
                )
            return RunResult(
                self.db,
                log.path,
                summaries,
                finished,
                received[0] if received else 0,
                campaign.criteria,
                resumable=not backends.simulates_drives(campaign.station.kind),
            )
        finally:
            if notifier is not None:  # queued notices get a few seconds at most (then logged)
                notifier.close()
            log.close()

    def signal(self, log: RunLog, signum: int) -> None:
        name = signal.Signals(signum).name
        log.write("signal", signal=name)
        self.progress.message(f"rig: {name}: stopping after each drive's current phase")
