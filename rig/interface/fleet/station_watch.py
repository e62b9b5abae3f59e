"""`station_offline` notifications: `rig serve --central ... --notify URL` watches the fleet's
stations and tells when one falls silent (its agent missed 3 heartbeats:
rig/interface/fleet/freshness.py),
once per fall, through the same sender as a campaign's notices
(rig/notify/sender.py: `Notifier.notify_event(kind, title, body)`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rig.interface.fleet.station_states import StationStates
from rig.interface.fleet.views import FleetView, StationStatus
from rig.notify import settings
from rig.notify.sender import Notifier

log = logging.getLogger("rig.interface.fleet.station_watch")
CHECK_EVERY_S = 2.0  # a station is stale after 3 missed 2 s heartbeats


class StationWatch:
    """Which stations fell silent since the last look (a station seen silent at the first look
    is told too: nobody was told before, so each station is taken to have been online)."""

    def __init__(self, notify: Callable[[str, str, str], None]) -> None:
        self.notify = notify
        self.states = StationStates(assumed="online")

    def look(self, stations: list[StationStatus]) -> list[str]:
        drives = {s.name: s.drives for s in stations}
        fell = []
        for t in self.states.look(stations):
            if t.before != "online" or t.last_seen_s is None:  # (never seen: no fall)
                continue
            fell.append(t.station)
            self.notify(
                settings.STATION_OFFLINE,
                f"rig: station {t.station} offline",
                f"station {t.station}: no heartbeat from its agent for"
                f" {t.last_seen_s:.0f} s ({drives[t.station]} drives)",
            )
        return fell


def start(view: FleetView, notifier: Notifier, stop: threading.Event) -> threading.Thread:
    """Look at the stations every CHECK_EVERY_S until `stop`, on a daemon thread."""
    watch = StationWatch(lambda kind, title, body: notifier.notify_event(kind, title, body))

    def run() -> None:
        while not stop.wait(CHECK_EVERY_S):
            try:
                watch.look(view.overview().stations)
            except Exception as error:  # the database away: the next look tries again
                log.warning("station watch: %s", error)

    thread = threading.Thread(target=run, name="station-watch", daemon=True)
    thread.start()
    return thread
