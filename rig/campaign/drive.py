"""One drive on one channel for the whole campaign: the context its cycles' phases work on
(rig/campaign/cutcycle/phases.py) and the public API that endurance, resume, progress and the runner
use (docs/campaign.md, "Inside a campaign")."""

from __future__ import annotations

import random
import threading
from collections import deque
from typing import TYPE_CHECKING, Protocol

import numpy as np

from rig.campaign import preparation, recording
from rig.campaign.cutcycle.cycle import run_cycle
from rig.campaign.model import CycleRecord, DriveCounts, DriveSummary, ResumePoint
from rig.campaign.settle import Settlement
from rig.check import intent
from rig.config.campaign import Campaign, DriveSpec
from rig.drive.node import DriveNode
from rig.station import backends
from rig.station.model import Station
from rig.store import Store

if TYPE_CHECKING:
    from rig.window.planner import WindowPlanner


class DriveEvents(Protocol):
    """What a drive's run tells: the campaign's observer (rig/campaign/observer.py)."""

    def message(self, text: str) -> None: ...

    def cycle_recorded(self, drive: DriveRun, c: CycleRecord) -> None: ...

    def drive_stopped(self, drive: DriveRun, reason: str) -> None: ...


class DriveRun:
    """A drive's wiring (campaign, station, store, open target), its expected state and its
    counts. Phases read and update it; other modules use only its public methods."""

    def __init__(
        self,
        campaign: Campaign,
        campaign_id: int,
        spec: DriveSpec,
        station: Station,
        store: Store,
        events: DriveEvents,
        resume: ResumePoint | None = None,
        settlement: Settlement | None = None,
        attachment: preparation.Attachment | None = None,
    ) -> None:
        self.campaign = campaign
        # drives the rig process simulates: gone with it, so no resume will read an intent log
        self.simulated = backends.simulates_drives(campaign.station.kind)
        self.campaign_id = campaign_id
        self.store = store
        self.media_id = recording.media_id(self)  # what the record headers carry
        self.spec = spec
        self.station = station
        self.events = events
        self.rng = random.Random(campaign.seed * 7919 + spec.channel)
        self.stop = threading.Event()
        self.counts = DriveCounts.resumed(resume)
        self.next_seq = resume.next_seq if resume else 1
        self.stopped_by = ""
        self.dead = False
        # The open target is not known to be the drive as it is now (a cycle ended between the
        # cut and the identify phase): the next cycle finds and proves the drive again first.
        self.reacquire = False
        self.window: WindowPlanner | None = None  # the window strategy's designs (parallel.py)
        # found, claimed, opened and its region checked: before the campaign's files, by the
        # runner, or here
        attached = (attachment or preparation.Attachment(campaign, spec, station)).take()
        node = self.node = attached.node
        self.settlement = settlement  # the campaign's sequential plans, if it has one
        self.plan_key = settlement.key(node.identity.model, spec.channel) if settlement else ""
        self.backing = node.backing  # a loop device's file: the same after every return
        self.seen_size_bytes, self.seen_read_only = node.size_bytes, node.read_only
        self.claims = attached.claims  # the claim and the open target; released by close()
        self.target = attached.target
        self.claims.callback(lambda: self.target.close())  # whichever target is current
        try:
            self.state, self.drive_id = preparation.region(self, node, resume, attached.region)
            if resume is None or self.next_seq == 1:  # a region no cycle has read yet
                preparation.baseline(self, self.target, self.state)
            # LBAs written in the last few cycles: still at risk (a drive may destage them late)
            self.recent: deque[np.ndarray] = deque(maxlen=campaign.cut.recent_cycles or None)
            where = {"devnode": node.devnode, "diskseq": node.diskseq, "backing": node.backing}
            recording.event(self, "attachment", where)
            self.tracker = preparation.start_health(self, node, self.next_seq - 1)
            # Endurance intervals write outside cycles, so only a cut campaign keeps an intent log.
            log = None if campaign.endurance else intent.path_for(store.path, self.drive_id)
            self.intent = intent.IntentLog(log, self.drive_id) if log else None
            if self.intent is not None:
                self.claims.callback(self.intent.close)
        except BaseException:
            self.claims.close()
            raise

    # the drive's loop ---------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        self.stop = stop
        consecutive_errors = 0
        rules = self.campaign.stop
        try:
            while self.counts.cycles < self.campaign.cycles and not stop.is_set():
                if reason := self.time_is_up() or self.settled():
                    self.stop_drive(reason, "stopped")
                    break
                c = self.next_cycle()
                if self.dead or c.stop_channel:
                    break
                consecutive_errors = consecutive_errors + 1 if c.status == "error" else 0
                if consecutive_errors >= rules.max_consecutive_errors:
                    self.stop_drive(f"{consecutive_errors} rig errors in a row", "stopped")
                    break
                failing = self.counts.failing_cycles
                if rules.max_failures and failing >= rules.max_failures:
                    self.stop_drive(f"{failing} cycles with failures", "stopped")
                    break
            # finished, or a drive no resume can reach (simulated): no resume reads the log
            if self.intent is not None and (not stop.is_set() or self.simulated):
                self.intent.path.unlink(missing_ok=True)
        finally:
            self.close()

    def next_cycle(self) -> CycleRecord:
        """Run and report the next cycle; a dead drive or a channel stop is recorded here."""
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        c = run_cycle(self, seq)
        self.update_plan(c)  # before the observers: a decision this cut made is told with it
        self.events.cycle_recorded(self, c)
        if c.status == "dead":
            self.dead = True
            self.stop_drive("dead device", "dead")
        elif c.stop_channel:  # a different drive or a failed interlock after a return
            self.stop_drive(c.error, "stopped")
        return c

    def close(self) -> None:
        self.claims.close()  # closes the target, then releases the claim

    # public API ---------------------------------------------------------------------------------
    def progress(self, text: str) -> None:
        """A line for people (the campaign's observer: progress display and run log)."""
        self.events.message(text)

    def time_is_up(self) -> str:
        """The duration rule that ends this drive now, if any ("" while time is left)."""
        budgets = [b for b in (self.campaign.duration_s, self.campaign.stop.duration_s) if b]
        if budgets and self.counts.elapsed_s >= min(budgets):
            return f"duration of {min(budgets):g} s reached"
        return ""

    def update_plan(self, c: CycleRecord) -> None:
        """Count the recorded cycle in the sequential plan; record the decision it makes."""
        if self.settlement is None:
            return
        classes = {f.cls for f in c.findings if f.failure}
        exposed = recording.exposure_of(c)
        settled = self.settlement.add(self.plan_key, c.status, classes, exposed)
        if settled is not None:
            recording.event(self, "settled", self.settlement.event(self.plan_key, settled, c.seq))
            rule = self.settlement.event(self.plan_key, settled, c.seq)["rule"]
            self.progress(
                f"ch{self.spec.channel}: plan over {self.plan_key} settled: {settled.decision}"
                f" after {settled.cuts} cuts ({settled.failing} failing; {rule})"
            )

    def settled(self) -> str:
        """With `[stop] when = "settled"`: why this drive stops now ("" while its plan is open)."""
        if self.settlement is None or self.campaign.stop.when != "settled":
            return ""
        done = self.settlement.decision(self.plan_key)
        return f"plan settled: {done.decision} after {done.cuts} cuts" if done else ""

    def stop_drive(self, reason: str, status: str) -> None:
        """End this drive's run: why (progress and summary) and its status in the store."""
        self.stopped_by = reason
        self.events.drive_stopped(self, reason)
        recording.drive_status(self, status)

    def sample_older_blocks(self) -> np.ndarray:
        """A random sample of blocks holding data, O(sample) whatever the region's size."""
        rng = np.random.default_rng(self.rng.randrange(1 << 30))
        pick = self.state.committed.sample_nonzero(self.campaign.cut.sample_blocks, rng)
        return pick + self.state.first_lba

    @staticmethod
    def atomic_blocks(node: DriveNode, block_size: int) -> int:
        """The drive's atomic unit in the rig's blocks: its physical block where it reports one
        larger than the block the rig writes (a 512e drive: 8). For NVMe the kernel sets the
        physical block to min(NPWG, NAWUPF or AWUPF) from identify (the logical block without
        NPWG): never above the power-fail atomic unit, so a tear found inside it is real; a larger
        AWUPF goes unused (fewer tears found, none invented)."""
        return max(1, node.physical_block // block_size)

    def progress_line(self, c: CycleRecord) -> str:
        found = sum(1 for f in c.findings if f.failure)
        extra = f" {c.status.upper()}: {c.error}" if c.status != "ok" else ""
        return (
            f"ch{self.spec.channel} {self.spec.identity.model:<22} cycle {c.seq:>5}"
            f" ({self.counts.cycles}/{self.campaign.cycles})  cut at {c.cut_delay_s * 1000:7.2f} ms"
            f"  failures {found}{extra}"
        )

    def summary(self) -> DriveSummary:
        return DriveSummary(
            self.spec.channel,
            self.spec.identity.label(),
            self.counts.cycles,
            self.counts.errors,
            self.dead,
            dict(self.counts.failures),
            self.counts.allowed_losses,
            self.counts.interrupted,
            self.stopped_by,
        )
