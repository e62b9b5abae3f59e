"""What `--json` prints: one document per command, each naming its schema and version in a
top-level `schema` field (docs/json.md describes every field; docs/json/*.schema.json are the
same as JSON Schema, and the tests validate the output against them).

Within a version a field keeps its name, type and meaning, and fields may be added (a reader
ignores what it does not know); removing or changing a field takes the next version. The
documents are built field by field here, never by dumping internal dataclasses, so a new
attribute inside the rig never leaks into a published schema.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reports import CampaignReport, DriveReport
    from rig.interface.fleet.views import CampaignProgress, Overview, StationStatus
    from rig.station.drives import DriveRow

STATUS_SCHEMA = "rig.status/1"
DRIVES_SCHEMA = "rig.drives/1"
FLEET_STATUS_SCHEMA = "rig.fleet-status/1"


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, allow_nan=False)


def status(store: str, report: CampaignReport, failing: bool) -> dict[str, Any]:
    """`rig status STORE --json`; `failing` is what makes the exit status 1."""
    return {
        "schema": STATUS_SCHEMA,
        "store": store,
        "campaign": {"name": report.name, "station": report.station, "status": report.status},
        "failing": failing,
        "drives": [_status_drive(d) for d in report.drives],
        "undelivered_notices": _undelivered(report),
    }


def _undelivered(report: CampaignReport) -> dict[str, Any]:
    """The notices the store's campaign could not deliver: a URL's scheme and host only."""
    u = report.undelivered
    return {
        "counts": {kind: n for kind, (n, _) in sorted(u.kinds.items())},
        "last": [
            {
                "kind": one.kind,
                "notice": one.notice,
                "scheme": one.scheme,
                "host": one.host,
                "at": None if one.at is None else round(one.at, 3),
                "reason": one.reason,
            }
            for one in u.last
        ],
    }


def _status_drive(d: DriveReport) -> dict[str, Any]:
    median = d.median_return_ms
    return {
        "channel": d.channel,
        "model": d.model,
        "serial": d.serial,
        "wwn": d.wwn,
        "status": d.status,
        "verdict": d.verdict,
        "cycles": d.cycles,
        "cuts": d.cycles_ok,
        "rig_errors": d.cycles_error,
        "cuts_with_failure": d.cycles_with_failure,
        "failures": dict(sorted(d.failures.items())),
        "allowed_losses": d.allowed_losses,
        "blocks_unchecked": d.blocks_unchecked,
        # per class a cut was exposed to (docs/checker.md, "Exposure"); {} for an older store;
        # the bound as the report computes it, without scipy (rig/verdict/exact_bound.py)
        "exposure": {
            k: {"exposed": n, "failing": f, "upper_bound": d.exposure_bound(k)}
            for k, (n, f) in sorted(d.exposure.items())
        },
        "writes": d.writes,
        "bytes_written": d.bytes_written,
        "median_return_ms": None if median is None else round(median, 3),
        "criteria": {
            "max_failure_probability": d.criteria.max_failure_probability,
            "confidence": d.criteria.confidence,
        },
    }


def drives(rows: list[DriveRow]) -> dict[str, Any]:
    """`rig drives --json`."""
    listed = []
    for row in rows:
        node, ident, slot = row.node, row.node.identity, row.slot
        listed.append(
            {
                "node": node.devnode,
                "size_bytes": node.size_bytes,
                "transport": node.transport,
                "model": ident.model,
                "serial": ident.serial,
                "firmware": ident.firmware,
                "wwn": ident.wwn,
                "slot": None
                if slot is None
                else {"bus": slot.kind, "address": slot.address, "hotplug": slot.hotplug},
                "safe": not row.refusals,
                "refusals": list(row.refusals),
            }
        )
    return {"schema": DRIVES_SCHEMA, "drives": listed}


def fleet_status(view: Overview) -> dict[str, Any]:
    """`rig fleet status --json`."""
    return {
        "schema": FLEET_STATUS_SCHEMA,
        "source": view.source,
        "generated_at": _seconds(view.generated_at),
        "stations": [_station(s) for s in view.stations],
        "campaigns": [_campaign(c) for c in view.campaigns],
        "models": list(view.models),
        "findings": {k: int(n) for k, n in view.findings.items()},
    }


def _seconds(value: object) -> float | None:
    """A time or duration as a JSON number (PostgreSQL may hand back a Decimal), or null."""
    return None if value is None else round(float(value), 3)  # type: ignore[arg-type]


def _station(s: StationStatus) -> dict[str, Any]:
    return {
        "name": s.name,
        "state": s.state,
        "drives": int(s.drives),
        "last_seen_s": _seconds(s.last_seen_s),
        "heartbeat_s": _seconds(s.heartbeat_s),
        "stale_after_s": _seconds(s.stale_after_s),
        "agent": s.agent,
        "kind": s.kind,
    }


def _campaign(c: CampaignProgress) -> dict[str, Any]:
    return {
        "key": c.key,
        "name": c.name,
        "station": c.station,
        "status": c.status,
        "submission_id": c.submission_id,
        "started_at": _seconds(c.started_at),
        "ended_at": _seconds(c.ended_at),
        "planned_cycles": int(c.planned),
        "cycles": int(c.cycles),
        "cuts": int(c.cuts),
        "rig_errors": int(c.rig_errors),
        "cuts_with_failure": int(c.failing),
        "per_hour": None if c.duration_s is not None else round(float(c.per_hour), 3),
        "eta_s": _seconds(c.eta_s),
        "duration_s": _seconds(c.duration_s),
        "resumes": int(c.resumes),
        "state": c.state,
        "lagging": c.lagging,
        "reported_s": _seconds(c.reported_s),
        "recorded_rows": c.recorded_rows,
        "held_rows": int(c.held_rows),
        "final_rows": c.final_rows,
        "process_bound": c.process_bound,
        "findings": {k: int(n) for k, n in c.findings.items()},
        "drives": [
            {
                "channel": d.channel,
                "model": d.model,
                "serial": d.serial,
                "status": d.status,
                "cycles": d.cycles,
                "cuts": d.cuts,
                "rig_errors": d.rig_errors,
                "cuts_with_failure": d.failing,
            }
            for d in c.drives
        ],
    }
