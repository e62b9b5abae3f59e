"""A campaign's events and who hears them. `run_campaign` (parallel.py) and each drive's run tell
one observer: the campaign started (every drive prepared), a switching edge, a message for
people, a cycle recorded, a drive stopped, the campaign ended. The runner (runner.py) builds one
`CampaignEvents` and subscribes what a run needs to it: the edge recorder, resume
reconciliation, the run log, the progress display and the notices (docs/architecture.md, "The
campaign's observer").

Each subscriber runs on the thread that told the event: edges on the power backend's, cycles
and stops on the drive's, start and end on the runner's. A subscriber only queues or writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rig.campaign import resume
from rig.power.base import Edge

if TYPE_CHECKING:
    from rig.campaign.drive import DriveRun
    from rig.campaign.model import CycleRecord, DriveSummary
    from rig.campaign.runlog import RunLog
    from rig.campaign.startup import EdgeQueue
    from rig.store import Store


class Observer:
    """One listener of a campaign's events; each event does nothing unless overridden."""

    def start(self, runs: Sequence[DriveRun]) -> None:
        """Every drive's run is prepared; their threads start next."""

    def edge(self, edge: Edge) -> None:
        """The power switch reported a switching edge (before the store may exist)."""

    def message(self, text: str) -> None:
        """A line for people that is not a cycle."""

    def cycle_recorded(self, drive: DriveRun, c: CycleRecord) -> None:
        """A cycle is in the store (its plan decision counted)."""

    def drive_stopped(self, drive: DriveRun, reason: str) -> None:
        """A drive's run ends before its target: told as the message people have always read."""
        self.message(f"ch{drive.spec.channel}: stopped: {reason}")

    def end(self, summaries: Sequence[DriveSummary], stopped: bool) -> None:
        """Every drive's run is over; `stopped`: by a signal, not by reaching its targets."""


class CampaignEvents(Observer):
    """The one observer a run hands down: tells each subscriber in the order subscribed."""

    def __init__(self, *subscribers: Observer) -> None:
        self.subscribers: tuple[Observer, ...] = subscribers

    def subscribe(self, subscriber: Observer) -> None:
        # a new tuple: a drive or power thread telling an event meanwhile sees the old or new one
        self.subscribers = (*self.subscribers, subscriber)

    def start(self, runs: Sequence[DriveRun]) -> None:
        for s in self.subscribers:
            s.start(runs)

    def edge(self, edge: Edge) -> None:
        for s in self.subscribers:
            s.edge(edge)

    def message(self, text: str) -> None:
        for s in self.subscribers:
            s.message(text)

    def cycle_recorded(self, drive: DriveRun, c: CycleRecord) -> None:
        for s in self.subscribers:
            s.cycle_recorded(drive, c)

    def drive_stopped(self, drive: DriveRun, reason: str) -> None:
        for s in self.subscribers:
            s.drive_stopped(drive, reason)

    def end(self, summaries: Sequence[DriveSummary], stopped: bool) -> None:
        for s in self.subscribers:
            s.end(summaries, stopped)


class Lines(Observer):
    """Messages and one line per cycle to `write` (`print` by default): a run without a display."""

    def __init__(self, write: Callable[[str], Any] = print) -> None:
        self.write = write

    def message(self, text: str) -> None:
        self.write(text)

    def cycle_recorded(self, drive: DriveRun, c: CycleRecord) -> None:
        self.write(drive.progress_line(c))


class EdgeRecorder(Observer):
    """Every switching edge into the store as an `edge_on`/`edge_off` event (queued: the store,
    or the store-to-be of a campaign not yet created, rig/campaign/startup.py:EdgeSink)."""

    def __init__(self, queue: EdgeQueue) -> None:
        self.queue = queue

    def edge(self, edge: Edge) -> None:
        detail = {"channel": edge.channel, "error_ns": edge.error_ns, "mcu_us": edge.source_us}
        kind = "edge_on" if edge.powered else "edge_off"
        self.queue.queue_event(None, edge.host_ns, kind, detail)


class Started(Observer):
    """Whether every drive was prepared: from then on a refused run leaves its store behind."""

    def __init__(self) -> None:
        self.started = False

    def start(self, runs: Sequence[DriveRun]) -> None:
        self.started = True


class ResumeReconciliation(Observer):
    """A resumed campaign's drives, as they start: each region read back against what the store
    says was written (rig/campaign/resume.py), told to `tell` (the run's observer)."""

    def __init__(self, resumable: resume.Resumable, store: Store, tell: Observer) -> None:
        self.resumable = resumable
        self.store = store
        self.tell = tell

    def start(self, runs: Sequence[DriveRun]) -> None:
        for drive in runs:
            scanned = resume.reconcile(drive, self.resumable, self.store)
            lost = self.resumable.lost.get(drive.spec.channel)
            self.tell.message(
                f"ch{drive.spec.channel}: resumed at cycle {drive.next_seq}"
                f" ({drive.counts.cycles}/{drive.campaign.cycles} done"
                + (f"; cycle {lost.seq} was interrupted" if lost else "")
                + f"); region read back: {scanned.as_json()}"
            )


class RunLogLines(Observer):
    """The run's JSON-lines log (rig/campaign/runlog.py): messages, cycles and the end."""

    def __init__(self, log: RunLog) -> None:
        self.log = log

    def message(self, text: str) -> None:
        self.log.write("message", text=text)

    def cycle_recorded(self, drive: DriveRun, c: CycleRecord) -> None:
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

    def end(self, summaries: Sequence[DriveSummary], stopped: bool) -> None:
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
