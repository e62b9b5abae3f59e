"""How old the fleet's view is: station states from their heartbeats, campaign states
from what their stations reported, and the one point a notifier polls for stations going stale
or coming back (`StaleWatch`).

A station's agent beats every `heartbeat_s` seconds (published with the beat); the station is
`stale` once STALE_AFTER_BEATS beats are missed, measured on the central server's clock. A live
campaign of a stale station is `lagging`: its progress is what the station last reported. A
campaign that has ended is `shipping` until the centre holds every cycle row its station
recorded (the count the agent reported with the end), and only then `done` (or `stopped`, ...).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rig.interface.fleet.station_states import StationStates, Transition

STALE_AFTER_BEATS = 3
ENDED = ("done", "stopped", "failed", "error")
REPORTING = ("running", "shipping")  # states whose numbers come from a station still at work


@dataclass
class StationStatus:
    name: str
    drives: int
    last_seen_s: float | None  # seconds since the agent's last heartbeat (the server's clock)
    agent: str
    heartbeat_s: float = 5.0  # the interval the agent beats at
    kind: str = ""  # the station kind its agent runs ('' = each campaign's own)

    @property
    def state(self) -> str:
        return station_state(self.last_seen_s, self.heartbeat_s)

    @property
    def stale_after_s(self) -> float:
        return STALE_AFTER_BEATS * self.heartbeat_s


def station_state(last_seen_s: float | None, heartbeat_s: float) -> str:
    """online | stale (STALE_AFTER_BEATS beats missed) | never seen."""
    if last_seen_s is None:
        return "never seen"
    return "online" if last_seen_s <= STALE_AFTER_BEATS * heartbeat_s else "stale"


def campaign_state(status: str, held_rows: int, final_rows: int | None) -> str:
    """A submission's status as the centre can vouch for it: an ended campaign whose station
    recorded more cycle rows than the centre holds is still `shipping`."""
    if status in ENDED and final_rows is not None and held_rows < final_rows:
        return "shipping"
    return status


def station_statuses(rows: Iterable[Mapping[str, Any]]) -> list[StationStatus]:
    """StationStatus of each row of `CentralStore.stations()`."""
    return [
        StationStatus(
            r["name"],
            int(r["drives"]),
            float(r["silent_s"]) if r["silent_s"] is not None else None,
            r["agent"],
            float(r.get("heartbeat_s") or 5.0),
            str(r.get("kind") or ""),
        )
        for r in rows
    ]


# -- what a campaign can survive -------------------------------------------------------------


def effective_kind(station_kind: str, campaign_text: str) -> str:
    """The station kind a campaign runs on: its station's own, else the campaign file's."""
    if station_kind:
        return station_kind
    try:
        kind = tomllib.loads(campaign_text).get("station", {}).get("kind", "")
    except tomllib.TOMLDecodeError:
        return ""
    return kind if isinstance(kind, str) else ""


def process_bound(kind: str) -> bool:
    """Drives of this station kind live inside the rig process (simulated, in-process): a
    campaign on them ends with its process and cannot resume."""
    from rig.station import backends

    found = backends.STATION_KINDS.get(kind)
    return bool(found and found.simulated_drives)


PROCESS_BOUND_WARNING = (
    "station {station} runs in-process simulated drives: this campaign cannot survive its rig"
    " process (a kill or crash of the agent or of `rig run` ends it failed)"
)


# -- the notifier's hook -----------------------------------------------------------------------


class StaleWatch:
    """Station states polled from the central database (a reader role is enough): each `poll()`
    returns the stations that went stale or came back since the last one. The first poll only
    learns the states (a station new to it changes nothing:
    rig/interface/fleet/station_states.py)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.states = StationStates(assumed=None)

    def poll(self) -> list[Transition]:
        from rig.interface.fleet.central import CentralStore

        with CentralStore(self.dsn) as central:
            stations = station_statuses(central.stations())
        return self.update(stations)

    def update(self, stations: list[StationStatus]) -> list[Transition]:
        return self.states.look(stations)
