"""One power-cut cycle: its phases in order (rig/campaign/cutcycle/phases.py), then the record
phase, which always runs; power goes back on every exit path (docs/architecture.md,
"Safety rules")."""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from rig.campaign import recording
from rig.campaign.cutcycle import cuts, maintenance, phases, runon
from rig.campaign.model import Cycle, CycleRecord, DeadDevice, Interrupted
from rig.check import verify
from rig.errors import ChannelLostError, RigError, UnsafeDeviceError
from rig.power import shapes
from rig.window.spec import pool_of

if TYPE_CHECKING:
    from rig.campaign.model import CycleDrive

RESTORE_ATTEMPTS = 3  # the teardown's tries to switch a channel back on (a serial timeout)
RESTORE_RETRY_S = 1.0
CUT_SCHEDULED = frozenset({"write", "maintain"})  # phases after which a cut may have fallen


def run_cycle(drive: CycleDrive, seq: int) -> CycleRecord:
    """Cycle `seq` of the drive, recorded; a phase that fails ends it as ERROR or DEAD."""
    # Each cycle's randomness derives from (seed, channel, seq) alone, so a resumed campaign
    # draws the same cut delays and writes as one that never stopped.
    drive.rng = random.Random(f"{drive.campaign.seed}/{drive.spec.channel}/{seq}")
    spec = drive.campaign.cut
    model = pool_of(drive.spec.identity)  # the window design of the drive's model
    planned = drive.window.next_delay_ms(model, drive.rng) if drive.window else None
    draw = cuts.draw(spec.strategy, spec.delay_ms, spec.after_ms, drive.rng, planned)
    c = Cycle(seq, draw.delay_s, cut_warmup_s=draw.warmup_s)
    c.shape = shapes.draw(spec.shape, drive.rng)  # after the delay: "off" draws nothing
    name = ""
    phase_ms: dict[str, float] = {}  # where the cycle's time went (event `phase_ms`)
    try:
        plan = maintenance.MAINTENANCE_PHASES if spec.maintenance else phases.PHASES
        for phase in plan:
            name = phase.__name__
            if drive.stop.is_set():
                raise Interrupted("stop requested")
            started = time.monotonic_ns()
            phase_ms[name] = 0.0  # reached (the write phase may schedule the cut)
            try:
                phase(drive, c)
            finally:
                phase_ms[name] = round((time.monotonic_ns() - started) / 1e6, 3)
    except Interrupted as error:
        c.status, c.error = "interrupted", f"{name}: {error}"
        c.findings = []
    except DeadDevice as error:
        c.status, c.error = "dead", f"{name}: {error}"
        c.findings.append(verify.drive_finding(verify.DEAD, {"phase": name}))
    except UnsafeDeviceError as error:  # identity or an interlock failed after a return
        c.status, c.error, c.stop_channel = "error", f"{name}: {error}", True
    except ChannelLostError as error:  # its board lost or restarted: the others go on
        c.status, c.error, c.stop_channel = "error", f"{name}: {error}", True
    except (RigError, OSError) as error:
        c.status, c.error = "error", f"{name}: {error}"
    except Exception as error:  # a bug in the rig: an ERROR of the cycle, never a finding
        c.status, c.error = "error", f"{name}: internal error: {error!r}"
        logging.getLogger("rig").exception("cycle %d phase %s", seq, name)
    finally:
        c.stop.set()
        # a writer's crash was already raised in observe_loss
        writers_done = c.writer is None or c.writer.join(5.0, raise_crash=False)
        if c.watch is not None:
            c.events.extend(c.watch.bus_events())
            c.watch.close()
        if CUT_SCHEDULED.intersection(phase_ms) and not c.restored:
            restore_after_fault(drive, c, writers_done)
        c.events.append((time.monotonic_ns(), "phase_ms", phase_ms))
    # the cut was scheduled (its edge may have fallen unseen: a lost reply or edge report)
    cut_maybe = c.edge is not None or bool(CUT_SCHEDULED.intersection(phase_ms))
    if c.status in ("error", "interrupted") and cut_maybe:
        # maybe a cut, maybe not (power that did not go off): no counter judged across it
        c.findings = [f for f in c.findings if f.cls != verify.COUNTER_ANOMALY]
        if drive.tracker is not None:
            drive.tracker.cycle_failed_after_cut()
    runon.cut_rail(c)  # the rail capture, if not asked yet: the record holds it
    recording.record(drive, c)
    if drive.window is not None and c.status not in ("error", "interrupted"):
        context = next((d for _, kind, d in c.events if kind == "cut_context"), None)
        found = [(f.cls, f.detail) for f in c.findings]
        drive.window.observe(model, context, found)
    return c


def restore_after_fault(drive: CycleDrive, c: Cycle, writers_done: bool) -> None:
    """The teardown guarantee (docs/architecture.md, "Safety rules"): the cycle ended after a cut
    was scheduled and before the restore phase switched the channel on (a writer crash, a serial
    timeout, an exception, a stop). Power goes back as the campaign says (after its off time),
    whatever happened; the cut may or may not have fallen, so the drive is found and proven again
    before the next write. A switch that still does not answer stops the channel (the
    board's watchdog puts power back on when the host falls silent)."""
    drive.reacquire = True
    if writers_done:
        drive.target.close()  # a loop device leaves the bus only after its last close
    else:  # its descriptor stays open: a number reused by the next open would take their I/O
        c.stop_channel = True
        c.error += "; writers still stuck in I/O: channel stopped"
    off_s = drive.campaign.cut.off_ms / 1000
    if c.edge is not None:
        since_cut_s = (time.monotonic_ns() - c.edge.host_ns) / 1e9
        time.sleep(max(0.0, off_s - since_cut_s))
    else:
        time.sleep(off_s)
    failed: list[str] = []
    for _ in range(RESTORE_ATTEMPTS):
        try:
            edge = drive.station.power.on(drive.spec.channel)
        except ChannelLostError as error:  # no retry: its board's watchdog has the channel
            c.stop_channel = True
            if str(error) not in c.error:
                c.error += f"; {error}"
            return
        except (RigError, OSError) as error:
            failed.append(str(error))
            time.sleep(RESTORE_RETRY_S)
            continue
        detail = {"error_ns": edge.error_ns, "teardown": True, "failed_attempts": failed}
        c.events.append((edge.host_ns, "power_on", detail))
        return
    c.stop_channel = True
    c.error += f"; power could not be restored ({RESTORE_ATTEMPTS} tries: {failed[-1]})"
