"""`rig fleet status`: the overview as text, and as rows for `--json` (one dict per station and
per campaign), each saying how old it is (rig/fleet/freshness.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rig.fleet.views import CampaignProgress, Overview


def _ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.0f} s ago"


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _pace(c: CampaignProgress) -> str:
    """A rate and ETA while it runs, its duration once it has ended."""
    if c.duration_s is not None:
        return f"took {_minutes(c.duration_s)}"
    if c.lagging:
        return f"lagging: its station's last report {_ago(c.reported_s)}"
    eta = f", ETA {_minutes(c.eta_s)}" if c.eta_s is not None else ""
    return f"{c.per_hour:.0f}/h{eta}"


def overview_text(view: Overview) -> str:
    lines = [f"source: {view.source}"]
    for s in view.stations:
        bound = ", in-process drives (campaigns cannot survive their process)" if _bound(s) else ""
        lines.append(
            f"station {s.name}: {s.state}, last heartbeat {_ago(s.last_seen_s)} (every"
            f" {s.heartbeat_s:g} s, stale after {s.stale_after_s:g} s), {s.drives} drives{bound}"
        )
    for c in view.campaigns:
        findings = ", ".join(f"{k} x{v}" for k, v in c.findings.items()) or "no failure"
        shipping = ""
        if c.state == "shipping":
            shipping = f", centre holds {c.held_rows} of {c.final_rows} cycle rows recorded"
        lines.append(
            f"{c.key} {c.name} on {c.station}: {c.state}, {c.cycles}/{c.planned} cycles"
            f" ({_pace(c)}{shipping}), rig errors {c.rig_errors}, dead {len(c.dead)},"
            f" {findings}" + (", cannot survive its process" if c.process_bound else "")
        )
    return "\n".join(lines)


def _bound(station: Any) -> bool:
    from rig.fleet.freshness import process_bound

    return process_bound(station.kind)


def overview_rows(view: Overview) -> dict[str, Any]:
    """The same rows for machines: `rig fleet status --json`."""
    return {
        "source": view.source,
        "generated_at": view.generated_at,
        "stations": [
            {
                "name": s.name,
                "state": s.state,
                "last_seen_s": s.last_seen_s,
                "heartbeat_s": s.heartbeat_s,
                "stale_after_s": s.stale_after_s,
                "drives": s.drives,
                "agent": s.agent,
                "kind": s.kind,
            }
            for s in view.stations
        ],
        "campaigns": [
            {
                "key": c.key,
                "name": c.name,
                "station": c.station,
                "submission_id": c.submission_id,
                "status": c.status,
                "state": c.state,
                "lagging": c.lagging,
                "reported_s": c.reported_s,
                "cycles": c.cycles,
                "planned": c.planned,
                "held_rows": c.held_rows,
                "recorded_rows": c.recorded_rows,
                "final_rows": c.final_rows,
                "per_hour": None if c.duration_s is not None else c.per_hour,
                "eta_s": c.eta_s,
                "duration_s": c.duration_s,
                "process_bound": c.process_bound,
                "rig_errors": c.rig_errors,
                "failing": c.failing,
                "dead": c.dead,
                "findings": c.findings,
                "drives": [dataclasses.asdict(d) for d in c.drives],
            }
            for c in view.campaigns
        ],
    }
