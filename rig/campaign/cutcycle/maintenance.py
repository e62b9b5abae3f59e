"""Cuts during maintenance: the phases of a cycle with [cut.maintenance]
(rig/health/maintenance.py has the operations and what the standard promises).

    arm -> fill -> maintain -> cut -> observe_loss -> restore -> observe_return -> identify
    -> health -> settle -> judge

`fill` writes as the workload says for the drawn [cut] delay, then stops and flushes (every
write durable: the data the operation must erase, or keep); `maintain` issues the operation and
has the switch cut `after_ms` later; after the drive returns, `settle` reads the operation's
status (a resumed one is waited for) and `judge` checks the promise: after a completed (or
silently dropped) erase no record from before it may read back (`survived_erase`, the whole
region read), after a reported failure nothing is judged; after a firmware commit the drive
identifies with the old or the new revision (else it is a dead device) and its data is
checked as after any cut.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from rig.campaign.cutcycle import phases
from rig.campaign.model import Cycle, DeadDevice
from rig.check import exposure
from rig.check import verify as checker
from rig.check.baseline import region_chunks
from rig.check.failures import SURVIVED_ERASE
from rig.errors import RigError
from rig.health import maintenance as ops
from rig.io import media
from rig.io.ledger import uncertain
from rig.io.workload import Writer, WriterContext

if TYPE_CHECKING:
    from collections.abc import Callable

    from rig.campaign.model import CycleDrive
    from rig.health.maintenance import MaintenanceSpec

POLL_S = 0.05


def _spec(drive: CycleDrive) -> MaintenanceSpec:
    spec = drive.campaign.cut.maintenance
    assert spec is not None
    return spec


def fill(drive: CycleDrive, c: Cycle) -> None:
    """The workload for the cycle's drawn delay, then every write flushed (the ledger has the
    flush, so the checker knows each write durable)."""
    assert c.target is not None
    sink = drive.intent.add if drive.intent is not None else None
    context = WriterContext(drive.media_id, c.target, drive.state, c.log, c.stop, sink)
    c.writer = Writer(drive.campaign.workload, context, seed=drive.rng.randrange(1 << 30))
    c.write_start_ns = time.monotonic_ns()
    c.writer.start()
    c.stop.wait(c.cut_warmup_s + c.cut_delay_s)
    c.stop.set()
    if not c.writer.join(drive.campaign.cut.gone_timeout_s):
        raise RigError("writers still stuck in I/O before the maintenance operation")
    issued = time.monotonic_ns()
    c.target.flush()
    c.log.add_flush(-1, issued, time.monotonic_ns(), 0)


def maintain(drive: CycleDrive, c: Cycle) -> None:
    """Issue the operation on its own thread (a format may block until done) and have the
    switch cut `after_ms` after it was issued."""
    spec, node = _spec(drive), c.node or drive.node
    tools = drive.station.maintenance
    assert tools is not None
    if spec.operation == ops.FIRMWARE:
        c.events.append(
            (time.monotonic_ns(), "firmware_before", {"revision": tools.revision(node)})
        )
    delay_s = drive.rng.uniform(*spec.after_ms) / 1000
    c.cut_delay_s = delay_s
    failed: list[str] = []

    def issue() -> None:
        try:
            tools.start(node, spec)
        except Exception as error:  # a tool failing as the power goes: recorded, judged after
            failed.append(str(error))

    issued_ns = time.monotonic_ns()
    threading.Thread(target=issue, name="maintenance", daemon=True).start()
    c.pending = drive.station.power.cut(drive.spec.channel, delay_s)
    detail: dict[str, Any] = {"operation": spec.operation, "planned_delay_ns": int(delay_s * 1e9)}
    c.events.append((issued_ns, "maintenance_issued", {**detail, "errors": failed}))


def settle(drive: CycleDrive, c: Cycle) -> None:
    """The operation's state once the drive is back; a resumed one is waited for."""
    spec, tools = _spec(drive), drive.station.maintenance
    assert tools is not None and c.node is not None
    started, deadline = time.monotonic(), time.monotonic() + spec.complete_timeout_s
    status = tools.status(c.node, spec.operation)
    resumed = status.state == ops.IN_PROGRESS
    while status.state == ops.IN_PROGRESS:
        if time.monotonic() > deadline:
            raise RigError(f"{spec.operation} still in progress after {spec.complete_timeout_s} s")
        time.sleep(POLL_S)
        status = tools.status(c.node, spec.operation)
    detail: dict[str, Any] = {"operation": spec.operation, "state": status.state}
    detail.update(resumed=resumed, waited_ms=round((time.monotonic() - started) * 1000, 1))
    if spec.operation == ops.FIRMWARE:
        detail["revision"] = tools.revision(c.node)
    c.events.append((time.monotonic_ns(), "maintenance", detail))


def judge(drive: CycleDrive, c: Cycle) -> None:
    spec = _spec(drive)
    done = next(d for _, kind, d in reversed(c.events) if kind == "maintenance")
    if spec.operation == ops.FIRMWARE:
        before = next(d for _, kind, d in c.events if kind == "firmware_before")["revision"]
        if done["revision"] not in (before, spec.firmware_revision):
            raise DeadDevice(
                f"identifies with firmware {done['revision']!r}, neither the old"
                f" {before!r} nor the new image's"
            )
        c.full_scan = True
        phases.verify(drive, c)
        return
    assert c.edge is not None and c.target is not None
    c.durability = c.log.durability(c.edge.host_ns, c.edge.error_ns)
    state, rel = drive.state, np.arange(drive.state.nblocks, dtype=np.int64)
    if done["state"] == ops.FAILED:  # reported: allowed; what the region holds is unknown
        state.committed[rel] = uncertain(state.committed[rel])
        c.result = checker.CheckResult([], 0, 0, 0, 0, [])
        c.exposure = exposure.of_erase_check(region_read=False)
        return
    found = survivors(c.target.read, state.first_lba, state.nblocks, c.target.block_size)
    detail = {"operation": spec.operation, "state": done["state"], "resumed": done["resumed"]}
    findings = [
        checker.Finding(SURVIVED_ERASE, first, count, 0, gen, detail=dict(detail))
        for first, count, gen in found
    ]
    state.committed[rel] = np.zeros(len(rel), dtype=np.uint32)  # erased: zeros from now on
    c.result = checker.CheckResult(findings, state.nblocks, 0, 0, 0, [])
    c.exposure = exposure.of_erase_check(region_read=True)
    c.findings.extend(findings)


def survivors(
    read: Callable[[int, int], np.ndarray], first: int, nblocks: int, block_size: int
) -> list[tuple[int, int, int]]:
    """Runs of blocks of the region that still hold a valid record (first, count, the first
    block's generation): data from before the erase."""
    per_block = block_size // media.SECTOR
    runs: list[tuple[int, int, int]] = []
    for start, count, sectors in region_chunks(read, first, nblocks):
        valid = (sectors.state == media.VALID).reshape(count, per_block).any(axis=1)
        gens = sectors.generation.reshape(count, per_block).max(axis=1)
        for i in np.flatnonzero(valid).tolist():
            lba = start + i
            if runs and runs[-1][0] + runs[-1][1] == lba:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1, runs[-1][2])
            else:
                runs.append((lba, 1, int(gens[i])))
    return runs


MAINTENANCE_PHASES: tuple[Callable[[CycleDrive, Cycle], None], ...] = (
    phases.arm,
    fill,
    maintain,
    phases.cut,
    phases.observe_loss,
    phases.restore,
    phases.observe_return,
    phases.identify,
    phases.health,
    settle,
    judge,
)
