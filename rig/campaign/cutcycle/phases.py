"""The phases of one power-cut cycle, in order (`PHASES`): plain functions of the drive's
context and the cycle, each filling in what it learns (docs/campaign.md, "Inside a campaign").

    arm -> write -> cut -> observe_loss -> restore -> recovery -> observe_return -> identify
    -> health -> verify -> evidence

(recovery, evidence: the burst of cuts after power-on of [cut.recovery] and its mark on the
findings, cutcycle/recovery.py; no-ops without one)

A phase that raises ends the cycle (rig/campaign/cutcycle/cycle.py); the record phase always
follows.
"""

from __future__ import annotations

import errno
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from rig.bus.ready import NotReady
from rig.campaign import preparation, recording
from rig.campaign.cutcycle import cuts, runon
from rig.campaign.cutcycle.blocks import blocks_to_check, unchecked_detail, written_lbas
from rig.campaign.cutcycle.recovery import evidence, recovery
from rig.campaign.model import Cycle, DeadDevice
from rig.check import exposure
from rig.check import verify as checker
from rig.drive.node import DriveNode
from rig.errors import RigError, UnsafeDeviceError
from rig.health.readiness import ready_times, slow_ready
from rig.health.snapshot import HealthSnapshot
from rig.health.tracker import anomaly_details
from rig.io.workload import Writer, WriterContext
from rig.power.shapes import ShapedCuts
from rig.window import spec as window_spec

if TYPE_CHECKING:
    from collections.abc import Callable

    from rig.campaign.model import CycleDrive

REACQUIRE_PROBE_S = 1.0  # one readiness probe while the drive is found again after a rig error
REACQUIRE_PAUSE_S = 0.1


def arm(drive: CycleDrive, c: Cycle) -> None:
    power = drive.station.power
    if not power.state(drive.spec.channel):
        raise RigError(f"channel {drive.spec.channel} is off at the start of a cycle")
    if drive.reacquire:
        _reacquire(drive, c)
    c.target = drive.target
    if drive.intent is not None:  # first: a crash before the row below leaves it empty
        drive.intent.begin(c.seq)
    recording.begin_cycle(drive, c)
    c.watch = drive.station.presence.watch(drive.spec.identity)


def write(drive: CycleDrive, c: Cycle) -> None:
    assert c.target is not None
    sink = drive.intent.add if drive.intent is not None else None
    context = WriterContext(drive.media_id, c.target, drive.state, c.log, c.stop, sink)
    c.writer = Writer(drive.campaign.workload, context, seed=drive.rng.randrange(1 << 30))
    draw = cuts.CutDraw(c.cut_warmup_s, c.cut_delay_s)
    power, channel = ShapedCuts(drive.station.power, c.shape), drive.spec.channel
    spec = drive.campaign.cut
    cuts.arm(spec.strategy, draw, c.writer, power, channel)
    c.write_start_ns = time.monotonic_ns()
    c.writer.start()
    after = spec.window.after if spec.window else "ack"
    c.pending, detail = cuts.schedule(
        spec.strategy,
        draw,
        c.writer,
        c.stop,
        power,
        channel,
        after=after,
        quiet_s=window_spec.quiet_s(spec.window),
    )
    c.events.append((time.monotonic_ns(), "cut_scheduled", detail))
    if c.shape.kind != "off":
        c.events.append((time.monotonic_ns(), "cut_shape", c.shape.detail()))


def cut(drive: CycleDrive, c: Cycle) -> None:
    assert c.pending is not None
    c.edge = c.pending.wait(c.cut_delay_s + 10.0)
    c.events.append((c.edge.host_ns, "power_off", {"error_ns": c.edge.error_ns}))


def observe_loss(drive: CycleDrive, c: Cycle) -> None:
    assert c.watch is not None and c.writer is not None
    c.stop.set()
    if not c.writer.join(drive.campaign.cut.gone_timeout_s):
        raise RigError("writers still stuck in I/O after the cut")
    if c.edge is not None:  # where the edge really fell, against the strategy's aim
        c.events.append((c.edge.host_ns, "cut_context", cuts.context(c.log, c.edge.host_ns)))
    # A loop device leaves the bus only after its last close; a real drive leaves while open.
    drive.reacquire = True  # until identify opens the drive as it comes back
    drive.target.close()
    c.gone_ns = c.watch.wait_gone(drive.campaign.cut.gone_timeout_s)
    if c.gone_ns is None and c.shape.kind != "off":  # a sag or glitch the drive rode through
        c.rode_through = True
        c.events.append((time.monotonic_ns(), "rode_through", {"kind": c.shape.kind}))
        return
    if c.gone_ns is None:
        raise RigError("drive did not leave the bus after the cut: did power really go off?")
    c.events.append((c.gone_ns, "bus_gone", {}))


def restore(drive: CycleDrive, c: Cycle) -> None:
    time.sleep(drive.campaign.cut.off_ms / 1000)
    edge = drive.station.power.on(drive.spec.channel)
    c.restored = True
    c.events.append((edge.host_ns, "power_on", {"error_ns": edge.error_ns}))


def observe_return(drive: CycleDrive, c: Cycle) -> None:
    assert c.watch is not None
    timeout = drive.campaign.cut.return_timeout_s
    still = drive.station.presence.find(drive.spec.identity) if c.rode_through else None
    node = still or c.watch.wait_back(timeout)
    if node is None:
        raise DeadDevice(f"did not return within {timeout:g} s of power-on")
    c.node = node
    c.back_ns = time.monotonic_ns()
    proof = {"devnode": node.devnode, "diskseq": node.diskseq, "backing": node.backing}
    c.events.append((c.back_ns, "bus_back", proof))
    c.events.extend(c.watch.bus_events())
    if drive.station.ready is not None:
        try:
            c.ready_ns = drive.station.ready(node, timeout)
        except NotReady as error:
            raise DeadDevice(f"back on the bus but not ready: {error}") from error
        c.events.append((c.ready_ns, "ready", {"devnode": node.devnode}))


def identify(drive: CycleDrive, c: Cycle) -> None:
    assert c.node is not None
    _open_proven(drive, c, c.node)
    if c.rode_through and not _answers_io(drive, c):
        _power_cycle_hung(drive, c)


def _answers_io(drive: CycleDrive, c: Cycle) -> bool:
    """After a shaped cut the drive stayed on the bus through: does it still answer a read? (A
    drive hung by a brownout stays on the bus and answers nothing until power is cut.)"""
    assert c.target is not None
    target, answer = c.target, threading.Event()
    failed: list[OSError] = []

    def probe() -> None:
        try:
            target.read(0, 1)
        except OSError as error:
            failed.append(error)
        answer.set()

    threading.Thread(target=probe, name="hang-probe", daemon=True).start()
    answered = answer.wait(drive.campaign.cut.read_timeout_s)
    return answered and not any(e.errno in (errno.ETIMEDOUT, errno.EIO) for e in failed)


def _power_cycle_hung(drive: CycleDrive, c: Cycle) -> None:
    """The hang class: the drive is power-cycled (off, the campaign's off time, on), found
    and proven again as after any cut; then the cycle is checked as usual."""
    assert c.watch is not None
    c.findings.append(checker.drive_finding(checker.HANG, {"kind": c.shape.kind}))
    c.hung = True
    power, channel = drive.station.power, drive.spec.channel
    drive.reacquire = True
    drive.target.close()
    c.events.append((power.off(channel).host_ns, "power_off", {"hang": True}))
    if c.watch.wait_gone(drive.campaign.cut.gone_timeout_s) is None:
        raise RigError("a hung drive did not leave the bus when its power was cut")
    time.sleep(drive.campaign.cut.off_ms / 1000)
    c.events.append((power.on(channel).host_ns, "power_on", {"hang": True}))
    node = c.watch.wait_back(drive.campaign.cut.return_timeout_s)
    if node is None:
        raise DeadDevice("did not return after the power cycle of a hang")
    c.node = node
    _open_proven(drive, c, node)


def health(drive: CycleDrive, c: Cycle) -> None:
    """Write-cache setting re-applied, then a health snapshot when one is due (tracker)."""
    assert c.node is not None
    if drive.station.write_cache is not None:
        detail = preparation.write_cache(drive, c.node)
        c.events.append((time.monotonic_ns(), "write_cache", detail))
    if drive.tracker is None:
        _readiness(drive, c, None)
        return
    kept_power = c.rode_through and not c.hung  # (a hung drive was power-cycled)
    snapshot, delta, events = drive.tracker.after_cut(c.node, kept_power)
    c.events.extend((ns or time.monotonic_ns(), kind, d) for ns, kind, d in events)
    if snapshot is not None:
        recording.snapshot(drive, c.seq, snapshot)
    c.health_compared = delta is not None  # a counter anomaly could be seen (exposure)
    if delta is not None:
        c.findings.extend(
            checker.drive_finding(checker.COUNTER_ANOMALY, detail)
            for detail in anomaly_details(delta)
        )
    _readiness(drive, c, drive.tracker.last)


def _readiness(drive: CycleDrive, c: Cycle, promise: HealthSnapshot | None) -> None:
    """This power-on's return against the drive's advertised timeout and the lab's limit
    (rig/health/readiness.py): a `readiness` event each cycle, `slow_ready` past either."""
    if c.rode_through:
        return  # no power-on: nothing to be ready from
    power_on = [ns for ns, kind, _ in c.events if kind == "power_on"]
    times = ready_times(power_on[-1] if power_on else None, c.back_ns, c.ready_ns)
    if times.last is None:
        return
    limit = drive.campaign.criteria.ready_limit_s
    timeout_ms = promise.ready_timeout_ms if promise is not None else None
    detail = {"bus_s": times.bus_s, "ready_s": times.ready_s, "drive_timeout_ms": timeout_ms}
    c.events.append((time.monotonic_ns(), "readiness", detail))
    c.ready_judged = timeout_ms is not None or limit is not None  # (exposure to slow_ready)
    slow = slow_ready(times, promise, limit)
    if slow is not None:
        c.findings.append(checker.drive_finding(checker.SLOW_READY, slow))


def zeroes_after_discard(drive: CycleDrive) -> bool:
    """The drive promises zeroes after a discard, by its last health answer (rig/health: NVMe
    DLFEAT, ATA deterministic zeroes after TRIM, SCSI LBPRZ); without one, no promise: a
    discarded block may then read zeroes or its old data (docs/checker.md, "Discards")."""
    last = drive.tracker.last if drive.tracker is not None else None
    return last is not None and last.zeroes_after_discard is True


def verify(drive: CycleDrive, c: Cycle) -> None:
    """The verify phase: this cycle's writes and the blocks at risk, read back and judged."""
    assert c.edge is not None and c.target is not None
    c.durability = durability = c.log.durability(c.edge.host_ns, c.edge.error_ns)
    spec, state = drive.campaign.cut, drive.state
    # A write issued once the drive can no longer run cannot succeed: if one did, the power did
    # not really go off (scheduling delays cannot fake this, unlike timestamps of completions,
    # which may reach the host late). Until then (the edge, its error, then the relay's release
    # and the drive's hold-up: [cut] hold_up_ms) a write may still complete; it is judged as one
    # in flight at the cut (acknowledged after the edge: its loss is allowed).
    rail = runon.cut_rail(c)
    run_on = runon.run_on(spec.hold_up_ms, rail)
    if rail is not None:  # what the window was, where the switch measured the rail
        c.events.append((time.monotonic_ns(), "run_on", {"ms": run_on.ms, "basis": run_on.basis}))
    after_cut = c.log.column("issue_ns") > c.edge.host_ns + c.edge.error_ns + run_on.ns
    # a drive that rode a sag through served writes after its edge: that is no rig fault
    if not c.rode_through and (after_cut & (c.log.column("status") == 0)).any():
        raise RigError(
            f"a write issued after the cut succeeded (more than {run_on.basis} after the edge):"
            " power did not really go off"
        )
    policy = checker.ReadPolicy(timeout_s=spec.read_timeout_s, max_reads=spec.read_budget)
    extra = blocks_to_check(drive, c)
    read, block = c.target.read, c.target.block_size
    c.result = checker.check(
        drive.media_id,
        state,
        c.log,
        durability,
        extra,
        read,
        block,
        policy=policy,
        atomic_blocks=drive.atomic_blocks(c.node or drive.node, block),
        zeroes=zeroes_after_discard(drive),
    )
    if c.full_scan and state.nblocks > checker.SCAN_CHUNK_BLOCKS:
        # a large region: the blocks this cycle did not touch, chunk by chunk
        judged = np.concatenate([written_lbas(c.log), extra])
        rest = checker.scan_rest(
            drive.media_id, state, judged, read, block, policy=policy,
            zeroes=zeroes_after_discard(drive),
        )  # fmt: skip
        c.result = checker.CheckResult(
            c.result.findings + rest.findings,
            c.result.blocks_checked + rest.blocks_checked,
            c.result.nondurable_writes,
            c.result.nondurable_survived,
            c.result.blocks_unchecked + rest.blocks_unchecked,
            c.result.unchecked + rest.unchecked,
        )
    c.findings.extend(c.result.findings)  # after the health phase's findings
    c.exposure = _exposure(c, c.result, block, zeroes_after_discard(drive))
    if c.rode_through and c.target is not None:
        # the drive never lost power: what it holds unflushed is still volatile, and the next
        # cycle must not take it for written (a later cut losing it is no collateral damage)
        c.target.flush()
    if c.result.unchecked:  # where the check left blocks unread (not findings: no failure)
        c.events.append((time.monotonic_ns(), "unchecked", unchecked_detail(c.result)))


def _exposure(
    c: Cycle, result: checker.CheckResult, block_size: int, zeroes: bool
) -> frozenset[str]:
    """The classes this cut was a trial of (rig/check/exposure.py), from what the check read."""
    assert c.durability is not None
    written = len(np.unique(written_lbas(c.log)))
    old = max(0, result.blocks_checked - written)  # (the unread ones counted against the old)
    unread = tuple((f.lba_first, f.lba_count) for f in result.unchecked)
    reading = exposure.Reading(result.blocks_checked, old, unread)
    return exposure.exposed(c.log, c.durability, reading, block_size, c.health_compared, zeroes)


PHASES: tuple[Callable[[CycleDrive, Cycle], None], ...] = (
    arm,
    write,
    cut,
    observe_loss,
    restore,
    recovery,
    observe_return,
    identify,
    health,
    verify,
    evidence,
)


# finding the drive again --------------------------------------------------------------------
def _reacquire(drive: CycleDrive, c: Cycle) -> None:
    """After a cycle that ended between the cut and identify: find the drive on the bus as it
    is now, wait until it answers, prove it and open it (the identify phase's checks), before
    this cycle writes anything."""
    timeout = drive.campaign.cut.return_timeout_s
    deadline = time.monotonic() + timeout
    identity = drive.spec.identity
    while True:
        node = drive.station.presence.find(identity)  # fresh state; two: refused
        if node is not None and _answers(drive, node, deadline):
            again = drive.station.presence.find(identity)
            if again == node:  # the same attachment it answered on
                c.events.append((time.monotonic_ns(), "reacquired", {"devnode": node.devnode}))
                c.node = node
                _open_proven(drive, c, node)
                return
        if time.monotonic() > deadline:
            raise DeadDevice(f"not back within {timeout:g} s after a rig error")
        time.sleep(REACQUIRE_PAUSE_S)


def _answers(drive: CycleDrive, node: DriveNode, deadline: float) -> bool:
    """Whether the drive at `node` answers I/O (a node that lost power does not)."""
    if drive.station.ready is None:
        return True
    try:
        drive.station.ready(node, max(0.0, min(REACQUIRE_PROBE_S, deadline - time.monotonic())))
    except NotReady:
        return False
    return True


def _open_proven(drive: CycleDrive, c: Cycle, node: DriveNode) -> None:
    """Open the drive at `node` once it is proven to be this channel's drive as it is now:
    its identity, the backing file it had when the campaign started (a loop device), the
    same attachment read fresh again just before the open (the ready probe may have taken
    seconds), then the station's own checks (the drive's answer, interlocks, the opened
    descriptor's attachment). Any doubt stops the channel before anything is written."""
    spec = drive.spec
    label = spec.identity.label()
    if not spec.identity.matches(node.identity):
        raise UnsafeDeviceError(f"a different drive came back on channel {spec.channel}")
    if drive.backing and node.backing != drive.backing:
        raise UnsafeDeviceError(
            f"{node.devnode} answers to {label} but is backed by {node.backing or 'no file'},"
            f" not by the drive's {drive.backing}"
        )
    now = drive.station.presence.find(spec.identity)  # two nodes with it: refused
    if now is None:
        raise DeadDevice(f"left the bus again before it was identified at {node.devnode}")
    if (now.devnode, now.diskseq, now.backing) != (node.devnode, node.diskseq, node.backing):
        raise UnsafeDeviceError(
            f"{node.devnode} changed between its return and identify"
            f" (now {now.devnode}, disk sequence {now.diskseq}, was {node.diskseq})"
        )
    c.findings.extend(_bus_changes(drive, node))
    drive.target.close()
    try:
        drive.target = drive.station.open_target(node, spec)
    except OSError as error:
        raise DeadDevice(f"came back but cannot be opened: {error}") from error
    c.target = drive.target
    drive.reacquire = False


def _bus_changes(drive: CycleDrive, node: DriveNode) -> list[checker.Finding]:
    """A drive that returns with another capacity or write-protected lost metadata
    (docs/architecture.md, "The checker's contract", read error / metadata loss); each change is
    reported once."""
    found = []
    if node.size_bytes != drive.seen_size_bytes:
        detail = {"kind": "capacity_changed", "bytes_before": drive.seen_size_bytes}
        detail["bytes_after"] = node.size_bytes
        found.append(checker.drive_finding(checker.READ_ERROR, detail))
    if node.read_only and not drive.seen_read_only:
        detail = {"kind": "read_only", "devnode": node.devnode}
        found.append(checker.drive_finding(checker.READ_ERROR, detail))
    drive.seen_size_bytes, drive.seen_read_only = node.size_bytes, node.read_only
    return found
