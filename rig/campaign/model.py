"""What a campaign is made of: one cycle's context, where a resumed
drive continues, and what a drive's run sums up to (docs/campaign.md)."""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rig.check import verify
from rig.check.intent import IntentLog
from rig.config.campaign import Campaign, DriveSpec
from rig.drive.node import DriveNode, PresenceWatch
from rig.health.tracker import HealthTracker
from rig.io.blockio import BlockTarget
from rig.io.ledger import CycleLog, Durability, LbaState
from rig.io.workload import Writer
from rig.power.base import Edge, PendingCut, RailResult
from rig.power.shapes import OFF, Shape
from rig.station.model import Station
from rig.store import Store

if TYPE_CHECKING:
    from rig.window.planner import WindowPlanner  # (its statistics load only when used)


class CycleDrive(Protocol):
    """What a cut cycle (cutcycle/), the drive's set-up (preparation.py) and the record phase
    (recording.py) use of a drive's run: `DriveRun` (drive.py) runs them and is one, typed here
    so that they need not import it back."""

    campaign: Campaign
    campaign_id: int
    spec: DriveSpec
    station: Station
    store: Store
    drive_id: int
    media_id: int  # what the record headers carry
    counts: DriveCounts
    rng: random.Random
    stop: threading.Event
    node: DriveNode
    target: BlockTarget
    backing: str
    seen_size_bytes: int
    seen_read_only: bool
    reacquire: bool
    state: LbaState
    recent: deque[np.ndarray]
    tracker: HealthTracker | None
    intent: IntentLog | None
    window: WindowPlanner | None

    def progress(self, text: str) -> None: ...

    def sample_older_blocks(self) -> np.ndarray: ...

    def atomic_blocks(self, node: DriveNode, block_size: int) -> int: ...


class DeadDevice(Exception):
    """The drive did not come back or did not answer."""


class Interrupted(Exception):
    """A stop was requested before the cycle was judged: it is recorded as `interrupted`."""


@dataclass
class ResumePoint:
    """Where a drive's run continues after a stop or a crash (built by rig/campaign/resume.py)."""

    drive_id: int
    state: LbaState
    next_seq: int
    counted: int  # cycles recorded that count towards `cycles` (all but interrupted ones)
    errors: int = 0
    failing_cycles: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    allowed_losses: int = 0
    elapsed_s: float = 0.0  # time spent in cycles so far (the duration stop rules)


@dataclass(frozen=True)
class PowerOn:
    """One power-on of a cycle (n = 0: the restore after its cut; 1..: after each cut of a
    recovery burst): when it came, when the drive was back on the bus and ready (None: not
    before the next cut), and the recovery cut that ended it (None: the cycle's last)."""

    n: int
    on_ns: int
    back_ns: int | None
    ready_ns: int | None
    cut_ns: int | None = None
    state_at_cut: str = ""  # booting | not_ready | ready (cutcycle/recovery.py)


@dataclass
class CycleRecord:
    """One cycle as it is recorded: what the record phase hands the store (recording.py) and
    what the campaign's observer hears (observer.py), filled in phase by phase."""

    seq: int
    cut_delay_s: float
    started_at: float = field(default_factory=time.time)
    log: CycleLog = field(default_factory=CycleLog)
    write_start_ns: int | None = None
    edge: Edge | None = None
    gone_ns: int | None = None
    back_ns: int | None = None
    durability: Durability | None = None
    result: verify.CheckResult | None = None
    findings: list[verify.Finding] = field(default_factory=list)
    events: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    status: str = "ok"
    error: str = ""
    # never write to this channel's node again (docs/architecture.md, "Safety rules")
    stop_channel: bool = False
    full_scan: bool = False
    rail: RailResult | None = None  # the cut's rail-sense capture (rig/campaign/cutcycle/runon.py)
    power_ons: list[PowerOn] = field(default_factory=list)  # a recovery burst's (recovery.py)
    # the classes the cut was a trial of (rig/check/exposure.py); None: not judged
    exposure: frozenset[str] | None = None
    health_compared: bool = False  # health read before and after the cut (counter anomaly)
    ready_judged: bool = False  # the return was held to a readiness limit (slow_ready)


@dataclass
class Cycle(CycleRecord):
    """A cycle while its phases run (cutcycle/): its record, and the live handles and working
    state no record holds. Once the cycle ends (writer joined, watch closed, power back) only
    the record is handed on."""

    # write phase before a triggered cut strategy arms (rig.campaign.cutcycle.cuts)
    cut_warmup_s: float = 0.0
    target: BlockTarget | None = None
    watch: PresenceWatch | None = None
    writer: Writer | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    pending: PendingCut | None = None
    node: DriveNode | None = None
    ready_ns: int | None = None
    restored: bool = False  # the restore phase switched the channel back on
    rail_asked: bool = False
    shape: Shape = OFF  # the cut's kind and drawn shape ([cut] kind, rig/power/shapes.py)
    rode_through: bool = False  # a shaped cut the drive stayed on the bus through
    hung: bool = False  # ... but then answered nothing: the rig power-cycled it (class hang)


@dataclass
class DriveCounts:
    """A drive's counts so far (a resume continues them from the store)."""

    cycles: int = 0  # cycles that count towards the target (all but interrupted ones)
    errors: int = 0
    failing_cycles: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # failure findings per class
    allowed_losses: int = 0
    interrupted: int = 0
    elapsed_s: float = 0.0  # time spent in cycles (the duration stop rules)

    @classmethod
    def resumed(cls, point: ResumePoint | None) -> DriveCounts:
        if point is None:
            return cls()
        return cls(
            point.counted,
            point.errors,
            point.failing_cycles,
            dict(point.failures),
            point.allowed_losses,
            elapsed_s=point.elapsed_s,
        )

    def add(self, c: CycleRecord) -> None:
        """Add a recorded cycle."""
        if c.status == "interrupted":
            self.interrupted += 1
            return
        failures = [f for f in c.findings if f.failure]
        self.cycles += 1
        self.errors += c.status == "error"
        self.failing_cycles += bool(failures)
        for finding in failures:
            self.failures[finding.cls] = self.failures.get(finding.cls, 0) + 1
        self.allowed_losses += sum(1 for f in c.findings if f.cls == verify.ALLOWED_LOSS)


@dataclass(frozen=True)
class DriveSummary:
    channel: int
    label: str
    cycles: int
    errors: int
    dead: bool
    failures: dict[str, int]
    allowed_losses: int
    interrupted: int = 0
    stopped_by: str = ""  # the stop rule that ended this drive early, if any
