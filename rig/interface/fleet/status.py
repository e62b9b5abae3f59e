"""`rig fleet status`: the overview as text, each station and campaign saying how old it is
(rig/interface/fleet/freshness.py); `--json` is rig/interface/cli_json.py's `fleet_status`."""

from __future__ import annotations

from typing import Any

from rig.interface.fleet.views import CampaignProgress, Overview


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
    from rig.interface.fleet.freshness import process_bound

    return process_bound(station.kind)
