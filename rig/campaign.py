"""A campaign: N power-cut cycles per drive, all drives in parallel, everything into the store.

One cycle is a fixed sequence of named phases over a `Cycle` context:
    arm -> write -> cut -> observe_loss -> restore -> observe_return -> identify -> health -> verify
and then `record`, which always runs (a phase that fails ends the cycle as ERROR or DEAD, and the
cycle is still recorded). Power is put back to its safe state on every exit path.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rig import cuts, intent, verify
from rig.blockio import BlockTarget
from rig.bus.base import DriveNode, Presence, PresenceWatch
from rig.bus.ready import NotReady
from rig.config import Campaign, DriveSpec
from rig.errors import RigError, UnsafeDeviceError, UserError
from rig.health.errors import HealthToolError, ToolMissing
from rig.health.snapshot import HealthSnapshot
from rig.health.tracker import HealthReader, HealthTracker, anomaly_details, snapshot_fields
from rig.ledger import CycleLog, Durability, LbaState, uncertain
from rig.power.base import Edge, PendingCut, PowerSwitch, RailResult, RailSensedCut
from rig.purge import DrivePurge
from rig.store import CycleRow, RailSenseRow, Store
from rig.workload import Writer, WriterContext

TargetOpener = Callable[[DriveNode, DriveSpec], BlockTarget]
ReadyProbe = Callable[[DriveNode, float], int]  # (node, timeout) -> host ns ready; NotReady
WriteCacheControl = Callable[[DriveNode, bool | None], bool | None]  # set (unless None), read
DriveClaim = Callable[[DriveNode, str], AbstractContextManager[object]]  # (node, campaign)


@dataclass
class Station:
    """The hardware a campaign runs on, wired explicitly (real or simulated)."""

    name: str
    power: PowerSwitch
    presence: Presence
    open_target: TargetOpener  # runs the safety interlocks, then opens the drive for I/O
    # Capabilities a station's drives may lack (None: not available, e.g. in-process drives).
    health: HealthReader | None = None  # a HealthSnapshot; raises HealthToolError
    ready: ReadyProbe | None = None  # after a return: waits until the drive answers I/O
    write_cache: WriteCacheControl | None = None
    claim: DriveClaim | None = None  # holds the drive against other campaigns
    purge: DrivePurge | None = None  # PTS purge before an endurance run (rig/purge.py)


RESTORE_ATTEMPTS = 3  # the teardown's tries to switch a channel back on (a serial timeout)
RESTORE_RETRY_S = 1.0
REACQUIRE_PROBE_S = 1.0  # one readiness probe while the drive is found again after a rig error
REACQUIRE_PAUSE_S = 0.1


class DeadDevice(Exception):
    """The drive did not come back or did not answer."""


class Interrupted(Exception):
    """A stop was requested before the cycle was judged: it is recorded as `interrupted`."""


@dataclass
class ResumePoint:
    """Where a drive's run continues after a stop or a crash (built by rig/resume.py)."""

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
    cut_warmup_s: float = 0.0  # write phase before a triggered cut strategy arms (rig.cuts)
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


class DriveRun:
    """One drive on one channel for the whole campaign."""

    def __init__(
        self,
        campaign: Campaign,
        campaign_id: int,
        spec: DriveSpec,
        station: Station,
        store: Store,
        progress: Callable[[str], None],
        resume: ResumePoint | None = None,
        on_cycle: Callable[[DriveRun, Cycle], None] | None = None,
    ) -> None:
        self.campaign = campaign
        self.campaign_id = campaign_id
        self.media_id = store.media_id(campaign_id)  # what the record headers carry
        self.spec = spec
        self.station = station
        self.store = store
        self.progress = progress
        self.rng = random.Random(campaign.seed * 7919 + spec.channel)
        self.on_cycle = on_cycle
        self.stop = threading.Event()
        self.failures: dict[str, int] = dict(resume.failures) if resume else {}
        self.allowed_losses = resume.allowed_losses if resume else 0
        self.errors = resume.errors if resume else 0
        self.cycles = resume.counted if resume else 0  # cycles that count towards the target
        self.failing_cycles = resume.failing_cycles if resume else 0
        self.interrupted = 0
        self.next_seq = resume.next_seq if resume else 1
        self.elapsed_s = resume.elapsed_s if resume else 0.0
        self.stopped_by = ""
        self.dead = False
        # The open target is not known to be the drive as it is now (a cycle ended between the
        # cut and the identify phase): the next cycle finds and proves the drive again first.
        self.reacquire = False
        node = station.presence.find(spec.identity)
        if node is None:
            raise UserError(f"drive {spec.identity.label()} not found on the bus")
        self.node = node
        self.backing = node.backing  # a loop device's file: the same after every return
        self.seen_size_bytes, self.seen_read_only = node.size_bytes, node.read_only
        self.claims = ExitStack()  # the drive's claim and its open target; released by close()
        try:
            if station.claim is not None:
                self.claims.enter_context(station.claim(node, campaign.name))
            self.target = station.open_target(node, spec)
            self.claims.callback(lambda: self.target.close())  # whichever target is current
            self._prepare(node, resume)
        except BaseException:
            self.claims.close()
            raise

    def _prepare(self, node: DriveNode, resume: ResumePoint | None) -> None:
        spec, campaign = self.spec, self.campaign
        block = self.target.block_size
        for what, size in (
            ("offset", campaign.region_offset_bytes),
            ("size", campaign.region_bytes),
        ):
            if size % block:
                raise UserError(
                    f"drive {spec.identity.label()}: test region {what} {size} B is not a"
                    f" multiple of its {block}-byte logical block"
                )
        first = campaign.region_offset_bytes // block
        count = min(campaign.region_bytes // block, self.target.nblocks - first)
        if count <= 0:
            raise UserError(f"drive {spec.identity.label()}: test region lies beyond its end")
        # LBAs written in the last few cycles: still at risk (a drive may destage them late)
        self.recent: deque[np.ndarray] = deque(maxlen=campaign.cut.recent_cycles or None)
        if resume is not None:
            if (resume.state.first_lba, resume.state.nblocks) != (first, count):
                raise UserError(f"drive {spec.identity.label()}: test region differs from store")
            self.state = resume.state
            self.drive_id = resume.drive_id
        else:
            self.state = LbaState(first, count)
            ident = asdict(node.identity)
            self.drive_id = self.store.add_drive(
                self.campaign_id,
                spec.channel,
                ident,
                node.size_bytes,
                block,
                (first, count),
                spec.profile,
            )
        attachment = {"devnode": node.devnode, "diskseq": node.diskseq, "backing": node.backing}
        self.store.add_event(self.drive_id, time.monotonic_ns(), "attachment", attachment)
        self.tracker = self._start_health(node, self.next_seq - 1)
        # Endurance intervals write outside cycles, so only a cut campaign keeps an intent log.
        where = None if campaign.endurance else intent.path_for(self.store.path, self.drive_id)
        self.intent = intent.IntentLog(where, self.drive_id) if where else None
        if self.intent is not None:
            self.claims.callback(self.intent.close)

    def _start_health(self, node: DriveNode, after_seq: int = 0) -> HealthTracker | None:
        """Write-cache setting and the baseline snapshot, before the first cut."""
        options, station = self.campaign.health, self.station
        wanted = {"keep": None, "on": True, "off": False}[options.write_cache]
        if wanted is not None and station.write_cache is None:
            raise UserError(f"station '{station.name}' cannot set a drive's write cache")
        if options.required and station.health is None:
            raise UserError(f"station '{station.name}' cannot read drive health ([health])")
        if station.write_cache is not None:
            try:
                detail = self._write_cache(node)
            except RigError as error:
                raise UserError(f"drive {self.spec.identity.label()}: {error}") from error
            self.store.add_event(self.drive_id, time.monotonic_ns(), "write_cache", detail)
        if station.health is None or options.every == 0:
            return None
        tracker = HealthTracker(station.health, options.every)
        try:
            snapshot = tracker.baseline(node)
        except HealthToolError as error:
            self._health_unavailable(error)
            return None
        stored = self.store.query(
            "SELECT 1 FROM health WHERE drive_id = ? AND after_seq = ?", (self.drive_id, after_seq)
        )
        if not stored:  # a resume keeps the reading taken after that cycle before the stop
            self._store_snapshot(after_seq, snapshot)
        return tracker

    def _health_unavailable(self, error: HealthToolError) -> None:
        """A baseline that cannot be read. With [health] the campaign asked for health: refused.
        Without it the drive runs without health: one warning line and one store event. Whatever
        the tool's exit status says (real smartctl exits 1, "command line did not parse", on a
        device it cannot type: a loop device, many USB bridges and HBAs); only a tool that is not
        installed is a set-up fault of the host, refused either way."""
        label = self.spec.identity.label()
        if self.campaign.health.required or isinstance(error, ToolMissing):
            raise UserError(f"drive {label}: health: {error}") from error
        self.progress(
            f"ch{self.spec.channel}: warning: {label}: health cannot be read ({error});"
            " running without health ([health] not in the campaign)"
        )
        detail = {"error": str(error)}
        self.store.add_event(self.drive_id, time.monotonic_ns(), "health_unavailable", detail)

    def _store_snapshot(self, after_seq: int, snapshot: HealthSnapshot) -> None:
        fields = snapshot_fields(snapshot)
        self.store.add_health(
            self.drive_id, after_seq, time.monotonic_ns(), snapshot.source, fields, snapshot.raw
        )

    def _write_cache(self, node: DriveNode) -> dict[str, Any]:
        """Apply the campaign's write-cache setting (a power cycle may reset it); the state the
        drive reports afterwards, for the record."""
        assert self.station.write_cache is not None
        wanted = {"keep": None, "on": True, "off": False}[self.campaign.health.write_cache]
        try:
            state = self.station.write_cache(node, wanted)
        except HealthToolError as error:
            if wanted is not None:
                raise RigError(f"write cache: {error}") from error
            return {"enabled": None, "wanted": None, "error": str(error)}
        return {"enabled": state, "wanted": wanted}

    # phases ------------------------------------------------------------------------------------
    def arm(self, c: Cycle) -> None:
        power = self.station.power
        if not power.state(self.spec.channel):
            raise RigError(f"channel {self.spec.channel} is off at the start of a cycle")
        if self.reacquire:
            self._reacquire(c)
        c.target = self.target
        if self.intent is not None:  # first: a crash before the row below leaves it empty
            self.intent.begin(c.seq)
        # Written before any I/O of the cycle: after a crash, resume finds this cycle and
        # records it as interrupted instead of forgetting it.
        with self.store.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO cycle_start (drive_id, seq, started_at, cut_delay_ns)"
                " VALUES (?,?,?,?)",
                (self.drive_id, c.seq, c.started_at, int(c.cut_delay_s * 1e9)),
            )
        c.watch = self.station.presence.watch(self.spec.identity)

    def write(self, c: Cycle) -> None:
        assert c.target is not None
        sink = self.intent.add if self.intent is not None else None
        context = WriterContext(self.media_id, c.target, self.state, c.log, c.stop, sink)
        c.writer = Writer(self.campaign.workload, context, seed=self.rng.randrange(1 << 30))
        c.write_start_ns = time.monotonic_ns()
        c.writer.start()
        draw = cuts.CutDraw(c.cut_warmup_s, c.cut_delay_s)
        power, channel = self.station.power, self.spec.channel
        c.pending, detail = cuts.schedule(
            self.campaign.cut.strategy, draw, c.writer, c.stop, power, channel
        )
        c.events.append((time.monotonic_ns(), "cut_scheduled", detail))

    def cut(self, c: Cycle) -> None:
        assert c.pending is not None
        c.edge = c.pending.wait(c.cut_delay_s + 10.0)
        c.events.append((c.edge.host_ns, "power_off", {"error_ns": c.edge.error_ns}))

    def observe_loss(self, c: Cycle) -> None:
        assert c.watch is not None and c.writer is not None
        c.stop.set()
        if not c.writer.join(self.campaign.cut.gone_timeout_s):
            raise RigError("writers still stuck in I/O after the cut")
        if c.edge is not None:  # where the edge really fell, against the strategy's aim
            c.events.append((c.edge.host_ns, "cut_context", cuts.context(c.log, c.edge.host_ns)))
        # A loop device leaves the bus only after its last close; a real drive leaves while open.
        self.reacquire = True  # until identify opens the drive as it comes back
        self.target.close()
        c.gone_ns = c.watch.wait_gone(self.campaign.cut.gone_timeout_s)
        if c.gone_ns is None:
            raise RigError("drive did not leave the bus after the cut: did power really go off?")
        c.events.append((c.gone_ns, "bus_gone", {}))

    def restore(self, c: Cycle) -> None:
        time.sleep(self.campaign.cut.off_ms / 1000)
        edge = self.station.power.on(self.spec.channel)
        c.restored = True
        c.events.append((edge.host_ns, "power_on", {"error_ns": edge.error_ns}))

    def _restore_after_fault(self, c: Cycle, writers_done: bool) -> None:
        """The teardown guarantee (ARCHITECTURE §6): the cycle ended after a cut was scheduled and
        before the restore phase switched the channel on (a writer crash, a serial timeout, an
        exception, a stop). Power goes back as the campaign says (after its off time), whatever
        happened; the cut may or may not have fallen, so the drive is found and proven again
        before the next write. A switch that still does not answer stops the channel (the
        board's watchdog puts power back on when the host falls silent)."""
        self.reacquire = True
        if writers_done:
            self.target.close()  # a loop device leaves the bus only after its last close
        else:  # its descriptor stays open: a number reused by the next open would take their I/O
            c.stop_channel = True
            c.error += "; writers still stuck in I/O: channel stopped"
        if c.edge is not None:
            since_cut_s = (time.monotonic_ns() - c.edge.host_ns) / 1e9
            time.sleep(max(0.0, self.campaign.cut.off_ms / 1000 - since_cut_s))
        else:
            time.sleep(self.campaign.cut.off_ms / 1000)
        failed: list[str] = []
        for _ in range(RESTORE_ATTEMPTS):
            try:
                edge = self.station.power.on(self.spec.channel)
            except (RigError, OSError) as error:
                failed.append(str(error))
                time.sleep(RESTORE_RETRY_S)
                continue
            detail = {"error_ns": edge.error_ns, "teardown": True, "failed_attempts": failed}
            c.events.append((edge.host_ns, "power_on", detail))
            return
        c.stop_channel = True
        c.error += f"; power could not be restored ({RESTORE_ATTEMPTS} tries: {failed[-1]})"

    def _reacquire(self, c: Cycle) -> None:
        """After a cycle that ended between the cut and identify: find the drive on the bus as it
        is now, wait until it answers, prove it and open it (the identify phase's checks), before
        this cycle writes anything."""
        timeout = self.campaign.cut.return_timeout_s
        deadline = time.monotonic() + timeout
        while True:
            node = self.station.presence.find(self.spec.identity)  # fresh state; two: refused
            if node is not None and self._answers(node, deadline):
                again = self.station.presence.find(self.spec.identity)
                if again == node:  # the same attachment it answered on
                    c.events.append((time.monotonic_ns(), "reacquired", {"devnode": node.devnode}))
                    c.node = node
                    self._open_proven(c, node)
                    return
            if time.monotonic() > deadline:
                raise DeadDevice(f"not back within {timeout:g} s after a rig error")
            time.sleep(REACQUIRE_PAUSE_S)

    def _answers(self, node: DriveNode, deadline: float) -> bool:
        """Whether the drive at `node` answers I/O (a node that lost power does not)."""
        if self.station.ready is None:
            return True
        try:
            self.station.ready(node, max(0.0, min(REACQUIRE_PROBE_S, deadline - time.monotonic())))
        except NotReady:
            return False
        return True

    def observe_return(self, c: Cycle) -> None:
        assert c.watch is not None
        node = c.watch.wait_back(self.campaign.cut.return_timeout_s)
        if node is None:
            raise DeadDevice(
                f"did not return within {self.campaign.cut.return_timeout_s:g} s of power-on"
            )
        c.node = node
        c.back_ns = time.monotonic_ns()
        proof = {"devnode": node.devnode, "diskseq": node.diskseq, "backing": node.backing}
        c.events.append((c.back_ns, "bus_back", proof))
        c.events.extend(c.watch.bus_events())
        if self.station.ready is not None:
            timeout = self.campaign.cut.return_timeout_s
            try:
                c.ready_ns = self.station.ready(node, timeout)
            except NotReady as error:
                raise DeadDevice(f"back on the bus but not ready: {error}") from error
            c.events.append((c.ready_ns, "ready", {"devnode": node.devnode}))

    def identify(self, c: Cycle) -> None:
        assert c.node is not None
        self._open_proven(c, c.node)

    def _open_proven(self, c: Cycle, node: DriveNode) -> None:
        """Open the drive at `node` once it is proven to be this channel's drive as it is now:
        its identity, the backing file it had when the campaign started (a loop device), the
        same attachment read fresh again just before the open (the ready probe may have taken
        seconds), then the station's own checks (the drive's answer, interlocks, the opened
        descriptor's attachment). Any doubt stops the channel before anything is written."""
        label = self.spec.identity.label()
        if not self.spec.identity.matches(node.identity):
            raise UnsafeDeviceError(f"a different drive came back on channel {self.spec.channel}")
        if self.backing and node.backing != self.backing:
            raise UnsafeDeviceError(
                f"{node.devnode} answers to {label} but is backed by {node.backing or 'no file'},"
                f" not by the drive's {self.backing}"
            )
        now = self.station.presence.find(self.spec.identity)  # two nodes with it: refused
        if now is None:
            raise DeadDevice(f"left the bus again before it was identified at {node.devnode}")
        if (now.devnode, now.diskseq, now.backing) != (node.devnode, node.diskseq, node.backing):
            raise UnsafeDeviceError(
                f"{node.devnode} changed between its return and identify"
                f" (now {now.devnode}, disk sequence {now.diskseq}, was {node.diskseq})"
            )
        c.findings.extend(self._bus_changes(node))
        self.target.close()
        try:
            self.target = self.station.open_target(node, self.spec)
        except OSError as error:
            raise DeadDevice(f"came back but cannot be opened: {error}") from error
        c.target = self.target
        self.reacquire = False

    def _bus_changes(self, node: DriveNode) -> list[verify.Finding]:
        """A drive that returns with another capacity or write-protected lost metadata
        (ARCHITECTURE §4, read error / metadata loss); each change is reported once."""
        found = []
        if node.size_bytes != self.seen_size_bytes:
            detail = {"kind": "capacity_changed", "bytes_before": self.seen_size_bytes}
            detail["bytes_after"] = node.size_bytes
            found.append(verify.Finding(verify.READ_ERROR, 0, 0, -1, -1, detail=detail))
        if node.read_only and not self.seen_read_only:
            detail = {"kind": "read_only", "devnode": node.devnode}
            found.append(verify.Finding(verify.READ_ERROR, 0, 0, -1, -1, detail=detail))
        self.seen_size_bytes, self.seen_read_only = node.size_bytes, node.read_only
        return found

    def health(self, c: Cycle) -> None:
        """Write-cache setting re-applied, then a health snapshot when one is due (tracker)."""
        assert c.node is not None
        if self.station.write_cache is not None:
            c.events.append((time.monotonic_ns(), "write_cache", self._write_cache(c.node)))
        if self.tracker is None:
            return
        snapshot, delta, events = self.tracker.after_cut(c.node)
        c.events.extend((ns or time.monotonic_ns(), kind, d) for ns, kind, d in events)
        if snapshot is not None:
            self._store_snapshot(c.seq, snapshot)
        if delta is not None:
            c.findings.extend(
                verify.Finding(verify.COUNTER_ANOMALY, 0, 0, -1, -1, detail=detail)
                for detail in anomaly_details(delta)
            )

    def verify(self, c: Cycle) -> None:
        assert c.edge is not None and c.target is not None
        c.durability = durability = c.log.durability(c.edge.host_ns, c.edge.error_ns)
        # A write issued after the cut edge cannot succeed on a drive without power: if one did,
        # the power did not really go off (scheduling delays cannot fake this, unlike timestamps
        # of completions, which may reach the host late).
        after_cut = c.log.column("issue_ns") > c.edge.host_ns + c.edge.error_ns
        if (after_cut & (c.log.column("status") == 0)).any():
            raise RigError("a write issued after the cut succeeded: power did not really go off")
        spec = self.campaign.cut
        policy = verify.ReadPolicy(timeout_s=spec.read_timeout_s, max_reads=spec.read_budget)
        extra = self._blocks_to_check(c)
        c.result = verify.check(
            self.media_id,
            self.state,
            c.log,
            durability,
            extra,
            c.target.read,
            c.target.block_size,
            policy=policy,
            atomic_blocks=self._atomic_blocks(c.node or self.node, c.target.block_size),
        )
        if c.full_scan and self.state.nblocks > verify.SCAN_CHUNK_BLOCKS:
            # a large region: the blocks this cycle did not touch, chunk by chunk
            judged = np.concatenate([_written_lbas(c.log), extra])
            rest = verify.scan_rest(
                self.media_id, self.state, judged, c.target.read, c.target.block_size,
                policy=policy,
            )  # fmt: skip
            c.result = verify.CheckResult(
                c.result.findings + rest.findings,
                c.result.blocks_checked + rest.blocks_checked,
                c.result.nondurable_writes,
                c.result.nondurable_survived,
                c.result.blocks_unchecked + rest.blocks_unchecked,
                c.result.unchecked + rest.unchecked,
            )
        c.findings.extend(c.result.findings)  # after the health phase's findings
        if c.result.unchecked:  # where the check left blocks unread (not findings: no failure)
            c.events.append((time.monotonic_ns(), "unchecked", _unchecked_detail(c.result)))

    @staticmethod
    def _atomic_blocks(node: DriveNode, block_size: int) -> int:
        """The drive's atomic unit in the rig's blocks: its physical block where it reports one
        larger than the block the rig writes (a 512e drive: 8). For NVMe the kernel sets the
        physical block to min(NPWG, NAWUPF or AWUPF) from identify (the logical block without
        NPWG): never above the power-fail atomic unit, so a tear found inside it is real; a larger
        AWUPF goes unused (fewer tears found, none invented)."""
        return max(1, node.physical_block // block_size)

    def _blocks_to_check(self, c: Cycle) -> np.ndarray:
        """Beyond this cycle's writes: recent cycles' writes, a sample of older blocks, and on
        schedule the whole region. O(writes at risk) except for the scheduled full scans."""
        written = c.log.column("first_lba"), c.log.column("nblocks")
        this_cycle = np.unique(np.repeat(written[0], written[1]) + _offsets(written[1]))
        recent = list(self.recent)
        if self.campaign.cut.recent_cycles:
            self.recent.append(this_cycle)
        every = self.campaign.cut.full_scan_every
        c.full_scan = bool(every) and c.seq % every == 0
        if c.full_scan and self.state.nblocks <= verify.SCAN_CHUNK_BLOCKS:
            return np.arange(self.state.nblocks, dtype=np.int64) + self.state.first_lba
        # (a full scan of a larger region reads the rest in chunks after this check: `verify`)
        return np.concatenate([self._sample_older_blocks(), *recent])

    def _sample_older_blocks(self) -> np.ndarray:
        rng = np.random.default_rng(self.rng.randrange(1 << 30))
        pick = self.state.committed.sample_nonzero(self.campaign.cut.sample_blocks, rng)
        return pick + self.state.first_lba  # O(sample), whatever the region's size

    PHASES = (
        "arm",
        "write",
        "cut",
        "observe_loss",
        "restore",
        "observe_return",
        "identify",
        "health",
        "verify",
    )

    # one cycle ---------------------------------------------------------------------------------
    def run_cycle(self, seq: int) -> Cycle:
        # Each cycle's randomness derives from (seed, channel, seq) alone, so a resumed campaign
        # draws the same cut delays and writes as one that never stopped.
        self.rng = random.Random(f"{self.campaign.seed}/{self.spec.channel}/{seq}")
        spec = self.campaign.cut
        draw = cuts.draw(spec.strategy, spec.delay_ms, spec.after_ms, self.rng)
        c = Cycle(seq, draw.delay_s, draw.warmup_s)
        phase = ""
        phase_ms: dict[str, float] = {}  # where the cycle's time went (event `phase_ms`)
        try:
            for phase in self.PHASES:
                if self.stop.is_set():
                    raise Interrupted("stop requested")
                started = time.monotonic_ns()
                phase_ms[phase] = 0.0  # reached (the write phase may schedule the cut)
                try:
                    getattr(self, phase)(c)
                finally:
                    phase_ms[phase] = round((time.monotonic_ns() - started) / 1e6, 3)
        except Interrupted as error:
            c.status, c.error = "interrupted", f"{phase}: {error}"
            c.findings = []
        except DeadDevice as error:
            c.status, c.error = "dead", f"{phase}: {error}"
            c.findings.append(verify.Finding(verify.DEAD, 0, 0, -1, -1, detail={"phase": phase}))
        except UnsafeDeviceError as error:  # identity or an interlock failed after a return
            c.status, c.error, c.stop_channel = "error", f"{phase}: {error}", True
        except (RigError, OSError) as error:
            c.status, c.error = "error", f"{phase}: {error}"
        except Exception as error:  # a bug in the rig: an ERROR of the cycle, never a finding
            c.status, c.error = "error", f"{phase}: internal error: {error!r}"
            logging.getLogger("rig").exception("cycle %d phase %s", seq, phase)
        finally:
            c.stop.set()
            # (a crash was raised in observe_loss)
            writers_done = c.writer is None or c.writer.join(5.0, raise_crash=False)
            if c.watch is not None:
                c.events.extend(c.watch.bus_events())
                c.watch.close()
            if "write" in phase_ms and not c.restored:
                self._restore_after_fault(c, writers_done)
            c.events.append((time.monotonic_ns(), "phase_ms", phase_ms))
        # the cut was scheduled (its edge may have fallen unseen: a lost reply or edge report)
        cut_maybe = c.edge is not None or "write" in phase_ms
        if c.status in ("error", "interrupted") and cut_maybe:
            # maybe a cut, maybe not (power that did not go off): no counter judged across it
            c.findings = [f for f in c.findings if f.cls != verify.COUNTER_ANOMALY]
            if self.tracker is not None:
                self.tracker.cycle_failed_after_cut()
        self.record(c)
        return c

    def record(self, c: Cycle) -> None:
        log, result = c.log, c.result
        if result is None and log.write_count:
            # Verify did not complete (interrupted, rig error, dead): what this cycle's writes
            # left is unknown, so those blocks are not judged until read back whole (or read
            # back by a resume), rather than reported as flying writes by a later cycle.
            written = np.unique(_written_lbas(log)) - self.state.first_lba
            self.state.committed[written] = uncertain(self.state.committed[written])
        durability = c.durability
        if durability is None and c.edge is not None:  # the cycle ended before verify
            durability = c.log.durability(c.edge.host_ns, c.edge.error_ns)
        failures = [f for f in c.findings if f.failure]
        ack_ns, flush_ns = (
            log.last_ack_and_flush_to_cut(c.edge.host_ns) if c.edge is not None else (None, None)
        )
        row = CycleRow(
            drive_id=self.drive_id,
            seq=c.seq,
            status=c.status,
            error=c.error,
            cut_delay_ns=int(c.cut_delay_s * 1e9),
            started_at=c.started_at,
            write_start_ns=c.write_start_ns,
            cut_ns=c.edge.host_ns if c.edge else None,
            cut_error_ns=c.edge.error_ns if c.edge else None,
            gone_ns=c.gone_ns,
            back_ns=c.back_ns,
            writes=log.write_count,
            writes_acked=int(durability.acked.sum()) if durability else 0,
            writes_durable=int(durability.durable.sum()) if durability else 0,
            flushes=log.flush_count,
            bytes_written=int(log.column("nblocks").sum()) * self.target.block_size,
            blocks_checked=result.blocks_checked if result else 0,
            blocks_unchecked=result.blocks_unchecked if result else 0,
            nondurable_writes=result.nondurable_writes if result else 0,
            nondurable_survived=result.nondurable_survived if result else 0,
            failures=len(failures),
            full_scan=int(c.full_scan),
            unserializable_writes=sum(
                int(f.detail["lost_writes"]) for f in c.findings if f.cls == verify.UNSERIALIZABLE
            ),
            last_ack_to_cut_ns=ack_ns,
            last_flush_to_cut_ns=flush_ns,
        )
        rows = [dict(asdict(f), failure=f.failure) for f in c.findings]
        self.store.record_cycle(
            row, rows, c.events, log.to_bytes(), self.state.to_bytes(), self._rail_sense(c)
        )
        self.elapsed_s += max(0.0, time.time() - c.started_at)
        if c.status == "interrupted":
            self.interrupted += 1
            return
        self.cycles += 1
        self.errors += c.status == "error"
        self.failing_cycles += bool(failures)
        for finding in failures:
            self.failures[finding.cls] = self.failures.get(finding.cls, 0) + 1
        self.allowed_losses += sum(1 for f in c.findings if f.cls == verify.ALLOWED_LOSS)

    def _rail_sense(self, c: Cycle) -> RailSenseRow | None:
        """How the rail fell after this cycle's off edge, if the switch measures it."""
        if c.edge is None or not isinstance(c.pending, RailSensedCut):
            return None
        try:
            result = c.pending.rail(timeout_s=1.0)
        except RigError as error:  # never fails the record phase
            logging.getLogger("rig").warning("cycle %d: no rail-sense result: %s", c.seq, error)
            return None
        return None if result is None else _rail_row(result)

    def run(self, stop: threading.Event) -> None:
        self.stop = stop
        consecutive_errors = 0
        rules = self.campaign.stop
        try:
            while self.cycles < self.campaign.cycles and not stop.is_set():
                if reason := self._time_is_up():
                    self._stop_drive(reason, "stopped")
                    break
                c = self.next_cycle()
                if self.dead or c.stop_channel:
                    break
                consecutive_errors = consecutive_errors + 1 if c.status == "error" else 0
                if consecutive_errors >= rules.max_consecutive_errors:
                    self._stop_drive(f"{consecutive_errors} rig errors in a row", "stopped")
                    break
                if rules.max_failures and self.failing_cycles >= rules.max_failures:
                    self._stop_drive(f"{self.failing_cycles} cycles with failures", "stopped")
                    break
            if self.intent is not None and not stop.is_set():  # finished: no resume reads it
                self.intent.path.unlink(missing_ok=True)
        finally:
            self.close()

    def next_cycle(self) -> Cycle:
        """Run and report the next cycle; a dead drive or a channel stop is recorded here."""
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        c = self.run_cycle(seq)
        if self.on_cycle is not None:
            self.on_cycle(self, c)
        else:
            self.progress(self._progress_line(c))
        if c.status == "dead":
            self.dead = True
            self._stop_drive("dead device", "dead")
        elif c.stop_channel:  # a different drive or a failed interlock after a return
            self._stop_drive(c.error, "stopped")
        return c

    def close(self) -> None:
        self.claims.close()  # closes the target, then releases the claim

    def _time_is_up(self) -> str:
        budgets = [b for b in (self.campaign.duration_s, self.campaign.stop.duration_s) if b]
        if budgets and self.elapsed_s >= min(budgets):
            return f"duration of {min(budgets):g} s reached"
        return ""

    def _stop_drive(self, reason: str, status: str) -> None:
        self.stopped_by = reason
        self.progress(f"ch{self.spec.channel}: stopped: {reason}")
        self.store.set_drive_status(self.drive_id, status)

    def _progress_line(self, c: Cycle) -> str:
        found = sum(1 for f in c.findings if f.failure)
        extra = f" {c.status.upper()}: {c.error}" if c.status != "ok" else ""
        return (
            f"ch{self.spec.channel} {self.spec.identity.model:<22} cycle {c.seq:>5}"
            f" ({self.cycles}/{self.campaign.cycles})  cut at {c.cut_delay_s * 1000:7.2f} ms"
            f"  failures {found}{extra}"
        )

    def summary(self) -> DriveSummary:
        return DriveSummary(
            self.spec.channel,
            self.spec.identity.label(),
            self.cycles,
            self.errors,
            self.dead,
            dict(self.failures),
            self.allowed_losses,
            self.interrupted,
            self.stopped_by,
        )


def _offsets(nblocks: np.ndarray) -> np.ndarray:
    """0..n-1 for each write of n blocks, concatenated."""
    total = int(nblocks.sum())
    starts = np.repeat(np.cumsum(nblocks) - nblocks, nblocks)
    return np.arange(total) - starts


def _rail_row(r: RailResult) -> RailSenseRow:
    mapped = r.error_ns >= 0
    return RailSenseRow(
        r.channel,
        r.edge_us,
        r.host_ns if mapped else None,
        r.error_ns if mapped else None,
        r.hi_threshold,
        r.lo_threshold,
        r.window_ms,
        r.v0,
        r.hi_us,
        r.lo_us,
        r.minimum,
        r.end,
        r.dt_us,
        r.samples,
    )


def _unchecked_detail(result: verify.CheckResult, kept: int = 256) -> dict[str, Any]:
    """The blocks a check left unread, for the store: how many, and where (first ranges)."""
    ranges = [[f.lba_first, f.lba_count, f.detail["reason"]] for f in result.unchecked[:kept]]
    return {
        "blocks": result.blocks_unchecked,
        "ranges": ranges,
        "ranges_total": len(result.unchecked),
    }


def _written_lbas(log: CycleLog) -> np.ndarray:
    """Every block a cycle's writes addressed (one entry per block per write)."""
    nblocks = log.column("nblocks")
    within = np.arange(int(nblocks.sum())) - np.repeat(log.column("gen_offset"), nblocks)
    return np.repeat(log.column("first_lba"), nblocks) + within


def run_campaign(
    campaign: Campaign,
    station: Station,
    store: Store,
    progress: Callable[[str], None] = print,
    stop: threading.Event | None = None,
    *,
    campaign_id: int | None = None,
    resume: dict[int, ResumePoint] | None = None,
    on_cycle: Callable[[DriveRun, Cycle], None] | None = None,
    on_start: Callable[[list[DriveRun]], None] | None = None,
    drive_loop: Callable[[DriveRun, threading.Event], None] | None = None,
) -> list[DriveSummary]:
    """Run every drive's cycles in parallel; power goes to the safe state however this ends.

    With `campaign_id` and `resume` (rig/resume.py) an existing campaign continues: each drive
    from its `ResumePoint`, keyed by channel. `on_start` gets the drive runs before their
    threads start (after resume's read-back of each region), `on_cycle` every recorded cycle.
    """
    stop = stop or threading.Event()
    if campaign_id is None:
        campaign_id = store.new_campaign(
            campaign.name, campaign.source, campaign.seed, station.name
        )
        with store.transaction() as db:
            db.execute(
                "UPDATE campaign SET criteria = ? WHERE id = ?",
                (json.dumps(campaign.criteria.as_json(), sort_keys=True), campaign_id),
            )
    status = "error"
    try:
        for spec in campaign.drives:
            if not station.power.state(spec.channel):
                station.power.on(spec.channel)
        runs: list[DriveRun] = []
        try:
            for spec in campaign.drives:
                point = (resume or {}).get(spec.channel)
                runs.append(
                    DriveRun(campaign, campaign_id, spec, station, store, progress, point, on_cycle)
                )
            if on_start is not None:
                on_start(runs)
        except BaseException:
            for run in runs:
                run.close()
            raise
        threads = [
            threading.Thread(
                target=drive_loop or DriveRun.run, args=(r, stop), name=f"drive-ch{r.spec.channel}"
            )
            for r in runs
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:
            stop.set()
            for thread in threads:
                thread.join()
            status = "stopped"
            raise
        status = "stopped" if stop.is_set() else "done"
        return [r.summary() for r in runs]
    finally:
        station.power.safe()
        store.end_campaign(campaign_id, status)
