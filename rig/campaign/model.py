"""What a campaign is made of: one cycle's context, where a resumed
drive continues, and what a drive's run sums up to (docs/campaign.md)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rig.bus.base import DriveNode, PresenceWatch
from rig.check import verify
from rig.check.ledger import CycleLog, Durability, LbaState
from rig.io.blockio import BlockTarget
from rig.io.workload import Writer
from rig.power.base import Edge, PendingCut, RailResult


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


@dataclass
class Cycle:
    """Everything one cycle learns, filled in phase by phase."""

    seq: int
    cut_delay_s: float
    # write phase before a triggered cut strategy arms (rig.campaign.cutcycle.cuts)
    cut_warmup_s: float = 0.0
    started_at: float = field(default_factory=time.time)
    target: BlockTarget | None = None
    watch: PresenceWatch | None = None
    log: CycleLog = field(default_factory=CycleLog)
    writer: Writer | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    pending: PendingCut | None = None
    write_start_ns: int | None = None
    edge: Edge | None = None
    gone_ns: int | None = None
    back_ns: int | None = None
    node: DriveNode | None = None
    ready_ns: int | None = None
    durability: Durability | None = None
    result: verify.CheckResult | None = None
    findings: list[verify.Finding] = field(default_factory=list)
    events: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    status: str = "ok"
    error: str = ""
    stop_channel: bool = False  # never write to this channel's node again (ARCHITECTURE §6)
    full_scan: bool = False
    restored: bool = False  # the restore phase switched the channel back on
    rail: RailResult | None = None  # the cut's rail-sense capture (rig/campaign/cutcycle/runon.py)
    rail_asked: bool = False


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

    def add(self, c: Cycle) -> None:
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
