"""Builds real rig stores (through rig.store.Store, the campaign's own writer) with chosen outcomes,
so report tests know exactly what every figure must be."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rig.check import failures
from rig.io.ledger import CycleLog
from rig.store import CycleRow, RailSenseRow, Store

MS = 1_000_000


@dataclass
class DriveSpec:
    model: str
    serial: str
    # one entry per cycle: "ok", "error", "interrupted", "dead", or failure classes joined by "+"
    outcomes: Sequence[str]
    firmware: str = "FW1"
    channel: int = 0
    return_ms: float = 80.0
    # per cycle: (ms from the last ack to the cut, ms from the last flush to the cut)
    delays_ms: Sequence[tuple[float, float]] = field(default_factory=list)
    # health snapshots: (after_seq, typed fields) as the health phase stores them
    health: Sequence[tuple[int, dict[str, object]]] = field(default_factory=list)
    # rail-sense captures of the first cycles: hi_us, lo_us, end, dt_us, samples, thresholds
    rail: Sequence[dict[str, Any]] = field(default_factory=list)
    # the drawn shapes of the first cycles, as the cut phase records them (`cut_shape` events)
    shapes: Sequence[dict[str, Any]] = field(default_factory=list)


def healthy_plp_drive() -> DriveSpec:
    """Channel 0: a PLP drive with 30 clean cuts and health read three times."""
    return DriveSpec(
        "Model PLP",
        "P1",
        ["ok"] * 30,
        channel=0,
        return_ms=70,
        health=[(s, {"unsafe_shutdowns": 3 + s, "power_cycles": 9 + s}) for s in (0, 10, 30)],
    )


def falling_rails(n: int) -> list[dict[str, Any]]:
    """`n` rail-sense captures of a rail that fell through both thresholds, each a little
    different."""
    return [
        {
            "hi_us": 150 + i,
            "lo_us": 400 + i,
            "end": "fell",
            "dt_us": 50,
            "samples": [820 - 70 * k - i for k in range(12)],
            "hi_threshold": 500,
            "lo_threshold": 60,
        }
        for i in range(n)
    ]


def _ledger(cut_ns: int, ack_ms: float, flush_ms: float) -> CycleLog:
    log = CycleLog()
    gens = np.ones(1, dtype=np.uint32)
    log.add_write(0, 1, 100, gens, cut_ns - 50 * MS, cut_ns - int(ack_ms * MS), 0, False)
    log.add_write(0, 2, 101, gens, cut_ns - 2 * MS, -1, 0, False)  # in flight at the cut
    log.add_flush(0, cut_ns - 60 * MS, cut_ns - int(flush_ms * MS), 0)
    log.add_flush(0, cut_ns - 1 * MS, cut_ns + 5 * MS, 0)  # completed after the cut: not counted
    return log


def _rail(spec: DriveSpec, seq: int, cut_ns: int) -> RailSenseRow | None:
    if seq > len(spec.rail):
        return None
    r = spec.rail[seq - 1]
    samples = tuple(r.get("samples", ()))
    return RailSenseRow(
        channel=spec.channel,
        edge_mcu_us=seq * 1_000_000,
        edge_ns=cut_ns,
        edge_error_ns=1000,
        hi_threshold=r.get("hi_threshold", 0),
        lo_threshold=r.get("lo_threshold", 0),
        window_ms=50,
        v0=samples[0] if samples else 800,
        hi_us=r.get("hi_us"),
        lo_us=r.get("lo_us"),
        min_v=min(samples) if samples else None,
        end_reason=r.get("end", "fell"),
        sample_dt_us=r.get("dt_us"),
        samples=samples,
    )


def build(
    path: Path,
    drives: Sequence[DriveSpec],
    name: str = "qual",
    station: str = "station-a",
    config: str = '[campaign]\nname = "qual"\n',
    seed: int = 1,
    criteria_column: str | None = None,  # JSON for campaign.criteria (store v5), as the rig writes
    delays_in_row: bool = True,  # ack/flush-to-cut in the cycle row (v8) as the rig writes them
) -> Path:
    store = Store(str(path))
    try:
        campaign = store.new_campaign(name, config, seed, station)
        if criteria_column is not None:
            with store.transaction() as db:
                db.execute(
                    "UPDATE campaign SET criteria = ? WHERE id = ?", (criteria_column, campaign)
                )
        for spec in drives:
            _add_drive(store, campaign, spec, delays_in_row)
        store.end_campaign(campaign, "done")
    finally:
        store.close()
    return path


def _add_drive(store: Store, campaign: int, spec: DriveSpec, delays_in_row: bool) -> None:
    """The drive, its cycles one per outcome, its health snapshots and, if it died, its status."""
    drive_id = store.add_drive(
        campaign,
        spec.channel,
        {"model": spec.model, "serial": spec.serial, "wwn": "", "firmware": spec.firmware},
        1 << 30,
        4096,
        (0, 4096),
    )
    for seq, outcome in enumerate(spec.outcomes, start=1):
        _record_cycle(store, drive_id, spec, seq, outcome, delays_in_row)
    for after_seq, fields in spec.health:
        store.add_health(drive_id, after_seq, after_seq * 10_000 * MS, "smartctl", fields, "{}")
    if "dead" in spec.outcomes:
        store.set_drive_status(drive_id, "dead")


def _findings(classes: list[str]) -> list[dict[str, Any]]:
    """One finding per failure class, and an allowed loss (not a failure) after them."""
    findings: list[dict[str, Any]] = [
        {
            "cls": cls,
            "failure": True,
            "lba_first": 100 + i,
            "lba_count": 2,
            "expected_gen": 5,
            "observed_gen": 4,
            "expected_op": 1,
            "observed_op": 0,
            "detail": (
                {
                    "field": "unsafe_shutdowns",
                    "before": 7,
                    "after": 7,
                    "expected": "+1 (= 8)",
                    "reason": "unsafe-shutdown counter did not count the cut",
                    "cuts": 1,
                }
                if cls == failures.COUNTER_ANOMALY
                else {"ack_to_cut_ns": 3 * MS, "flush_to_cut_ns": 2 * MS}
            ),
        }
        for i, cls in enumerate(classes)
    ]
    findings.append(
        {
            "cls": failures.ALLOWED_LOSS,
            "failure": False,
            "lba_first": 7,
            "lba_count": 1,
            "expected_gen": 2,
            "observed_gen": 1,
            "expected_op": 1,
            "observed_op": 0,
            "detail": {},
        }
    )
    return findings


def _record_cycle(
    store: Store, drive_id: int, spec: DriveSpec, seq: int, outcome: str, delays_in_row: bool
) -> None:
    cut_ns = seq * 10_000 * MS
    status = outcome if outcome in ("ok", "error", "interrupted", "dead") else "ok"
    classes = [] if outcome in ("ok", "error", "interrupted") else outcome.split("+")
    if outcome == "dead":
        classes = [failures.DEAD]
    findings = _findings(classes)
    ack_ms, flush_ms = spec.delays_ms[seq - 1] if seq <= len(spec.delays_ms) else (1.0, 5.0)
    back = None if status != "ok" else cut_ns + int(spec.return_ms * MS)
    ledger = _ledger(cut_ns, ack_ms, flush_ms) if status != "error" else None
    delays = (None, None)
    if delays_in_row and ledger is not None:
        delays = ledger.last_ack_and_flush_to_cut(cut_ns)
    store.record_cycle(
        CycleRow(
            drive_id=drive_id,
            seq=seq,
            status=status,
            cut_delay_ns=20 * MS,
            started_at=1.7e9 + seq,
            cut_ns=None if status == "error" else cut_ns,
            cut_error_ns=1000,
            back_ns=back,
            failures=len(classes),
            bytes_written=3 * 4096,
            blocks_checked=0 if status == "error" else 64,
            full_scan=int(seq % 10 == 0 and status == "ok"),
            last_ack_to_cut_ns=delays[0],
            last_flush_to_cut_ns=delays[1],
        ),
        findings if status != "error" else [],
        [(cut_ns, "cut_shape", spec.shapes[seq - 1])] if seq <= len(spec.shapes) else [],
        ledger.to_bytes() if ledger is not None else None,
        None,
        _rail(spec, seq, cut_ns),
    )
