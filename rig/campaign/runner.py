"""`rig run`: a campaign from its file, or `--resume` from its store, unattended.

- all channels in parallel (rig/campaign/), live progress (rig/campaign/progress.py), a JSON-lines
  log (rig/campaign/runlog.py);
- SIGINT/SIGTERM stop safely: every drive's cycle in flight ends at its next phase boundary and
  is recorded as `interrupted`, the store is closed consistent, power goes to the safe state;
- `--resume STORE` continues the store's last campaign at the next cycle (rig/campaign/resume.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from rig import config
from rig.campaign import resume, startup
from rig.campaign.drive import DriveRun
from rig.campaign.endurance import endurance
from rig.campaign.model import Cycle, DriveSummary
from rig.campaign.notices import CampaignNotices
from rig.campaign.parallel import run_campaign
from rig.campaign.preparation import Attachment
from rig.campaign.progress import Progress
from rig.campaign.runlog import RunLog
from rig.config import Campaign, Criteria
from rig.errors import UserError
from rig.notify.sender import Notifier, apprise_services
from rig.station import backends
from rig.station.model import Station
from rig.store import Store, open_existing

StationFactory = Callable[[Campaign, startup.EventQueue], Station]


@dataclass(frozen=True)
class RunResult:
    db: str
    log: str
    summaries: list[DriveSummary]
    finished_before: list[str]  # drives a resume found dead, stopped or done
    signal: int  # the signal that stopped the run, 0 if none
    criteria: Criteria  # the campaign's pass criteria (the end table's verdicts)


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


class _Reports:
    """Where a run's events go: its JSON-lines log, the progress display and, where the campaign
    has `[notify]` URLs, its notices (queued only: rig/notify/sender.py sends them)."""

    def __init__(self, log: RunLog, progress: Progress, campaign: Campaign) -> None:
        self.log = log
        self.progress = progress
        spec = campaign.notify
        services = apprise_services(spec.urls, spec.config) if spec.enabled else []
        self.notifier = Notifier(services, log.write) if services else None
        self.notices = CampaignNotices(campaign, self.notifier) if self.notifier else None

    def close(self) -> None:
        """The notices still queued get a few seconds at most, then are given up (logged)."""
        if self.notifier is not None:
            self.notifier.close()

    def signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        self.log.write("signal", signal=name)
        self.progress.message(f"rig: {name}: stopping after each drive's current phase")

    def cycle(self, drive: DriveRun, c: Cycle) -> None:
        failures: dict[str, int] = {}
        for f in c.findings:
            if f.failure:
                failures[f.cls] = failures.get(f.cls, 0) + 1
        self.log.write(
            "cycle",
            channel=drive.spec.channel,
            seq=c.seq,
            status=c.status,
            error=c.error,
            cut_delay_ms=round(c.cut_delay_s * 1000, 3),
            writes=c.log.write_count,
            failures=failures,
            counted=drive.counts.cycles,
            target=drive.campaign.cycles,
        )
        self.progress.cycle(drive, c)
        if self.notices is not None:
            self.notices.cycle(drive, c)

    def message(self, text: str) -> None:
        self.log.write("message", text=text)
        self.progress.message(text)

    def end(self, summaries: list[DriveSummary], stopped: bool) -> None:
        self.log.write(
            "end",
            status="stopped" if stopped else "done",
            drives=[
                {
                    "channel": s.channel,
                    "cycles": s.cycles,
                    "errors": s.errors,
                    "interrupted": s.interrupted,
                    "dead": s.dead,
                    "failures": s.failures,
                    "stopped_by": s.stopped_by,
                }
                for s in summaries
            ],
        )
        if self.notices is not None:
            self.notices.end(summaries, stopped)


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
        campaign = campaign or config.load(campaign_path)
        db = db or f"{campaign.name}.sqlite"
    log_path = log_path or default_log_path(db)
    if store is None:
        unmade = startup.Unmade(db, log_path)  # (their folders checked: before any file)
    edges = startup.EdgeSink(db)
    attached: dict[int, Attachment] = {}
    started: list[bool] = []  # every drive prepared: from here on, a record
    refused = False
    try:
        station = station_factory(campaign, edges)
        try:
            if store is None:
                attached = startup.acquire_drives(campaign, station)
                store = Store(db)
            edges.attach(store)
            return _run(
                campaign, db, station, store, log_path, resumable, attached, progress, started
            )
        finally:
            for attachment in attached.values():
                attachment.release()  # (those no drive's run took)
            station.power.close()
    except UserError:
        refused = unmade is not None and not started
        raise
    finally:
        progress.close()
        if store is not None:
            store.close()
        if refused and unmade is not None:
            unmade.remove()  # refused at the start: no store and no log left behind


def _run(
    campaign: Campaign,
    db: str,
    station: Station,
    store: Store,
    log_path: str,
    resumable: resume.Resumable | None,
    attached: dict[int, Attachment],
    progress: Progress,
    started: list[bool],
) -> RunResult:
    """The campaign on its open store and log, under SIGINT/SIGTERM handling."""
    log = RunLog(log_path)
    reports = _Reports(log, progress, campaign)
    stop = threading.Event()
    summaries: list[DriveSummary] = []
    finished = resumable.finished if resumable else []
    try:
        with stop_on_signals(stop, reports.signal) as received:
            _begin(station, store, log, campaign, db, resumable, progress)

            def on_start(runs: list[DriveRun]) -> None:
                started.append(True)
                for drive in runs:
                    if resumable is None:
                        continue
                    scanned = resume.reconcile(drive, resumable, store)
                    lost = resumable.lost.get(drive.spec.channel)
                    reports.message(
                        f"ch{drive.spec.channel}: resumed at cycle {drive.next_seq}"
                        f" ({drive.counts.cycles}/{campaign.cycles} done"
                        + (f"; cycle {lost.seq} was interrupted" if lost else "")
                        + f"); region read back: {scanned.as_json()}"
                    )
                progress.start(runs)

            summaries = run_campaign(
                campaign,
                station,
                store,
                reports.message,
                stop,
                campaign_id=resumable.campaign_id if resumable else None,
                resume=resumable.points if resumable else None,
                on_cycle=reports.cycle,
                on_start=on_start,
                drive_loop=endurance.drive_loop if campaign.endurance else None,
                attached=attached,
            )
        reports.end(summaries, bool(received))
        return RunResult(
            db, log.path, summaries, finished, received[0] if received else 0, campaign.criteria
        )
    finally:
        reports.close()
        log.close()
