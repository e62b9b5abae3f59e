"""The campaign file's `[notify]` table: where notifications go (Apprise URLs), which events are
sent, and how many rig errors in a row make one. Every URL is checked by Apprise when the file is
read, so a typo is one line and exit 2 before anything is written."""

from __future__ import annotations

from dataclasses import dataclass

from rig.config.tables import Table
from rig.errors import UserError

# The events a campaign (and a fleet) can send, in the order docs/campaign.md lists them.
VERDICT = "verdict"  # a drive's verdict is settled (fixed-sample at the end; sequential plans)
FAIL = "fail"  # a drive's first cut with a failure finding
DEAD = "dead"  # a drive did not come back
RIG_ERRORS = "rig_errors"  # `rig_error_run` rig errors in a row on one channel
CHANNEL_STOPPED = "channel_stopped"  # identity doubt or an interlock stopped a channel
CAMPAIGN_END = "campaign_end"  # the campaign ended (done or stopped), with its summary
STATION_OFFLINE = "station_offline"  # a fleet event: a station's agent fell silent
EVENTS = (VERDICT, FAIL, DEAD, RIG_ERRORS, CHANNEL_STOPPED, CAMPAIGN_END, STATION_OFFLINE)


@dataclass(frozen=True)
class NotifySpec:
    urls: tuple[str, ...] = ()  # Apprise URLs; none (and no config) = no notifications
    events: tuple[str, ...] = EVENTS  # the events sent (default: all)
    rig_error_run: int = 3  # rig errors in a row on one channel that make a `rig_errors` event
    # an Apprise configuration file (YAML or text) with more URLs: secrets kept out of the
    # campaign file, whose text the store and the central database keep
    config: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.urls or self.config)

    def wants(self, kind: str) -> bool:
        return self.enabled and kind in self.events


def check_url(url: str, where: str) -> None:
    """One line naming the URL's position when Apprise cannot make a service of it."""
    import apprise  # only a campaign that notifies loads Apprise and its plugins

    if apprise.Apprise.instantiate(url) is None:
        scheme = url.split("://", 1)[0] if "://" in url else url[:20]
        raise UserError(
            f"campaign: {where}: '{scheme}://...' is not a notification URL Apprise can use"
            " (https://github.com/caronc/apprise/wiki)"
        )


def check_config(path: str, where: str) -> None:
    """One line unless Apprise reads at least one notification URL from the file."""
    import apprise

    loaded = apprise.AppriseConfig()
    services = apprise.Apprise()
    if loaded.add(path):
        services.add(loaded)
    if not len(services):
        raise UserError(
            f"campaign: {where}: {path}: no notification URL Apprise can use (a missing or"
            " unreadable file, or no valid URL in it)"
        )


def parse(table: Table) -> NotifySpec:
    urls = table.get("urls", list, [])
    for index, url in enumerate(urls):
        if not isinstance(url, str) or not url:
            raise UserError(f"campaign: {table.where}.urls[{index}] must be a URL string")
        check_url(url, f"{table.where}.urls[{index}]")
    events = table.get("events", list, list(EVENTS))
    for kind in events:
        if kind not in EVENTS:
            raise UserError(
                f"campaign: {table.where}.events: '{kind}' is not an event ({', '.join(EVENTS)})"
            )
    config = table.get("config", str, "")
    if config:
        check_config(config, f"{table.where}.config")
    rig_error_run = table.whole("rig_error_run", 3, 1, 1_000_000)
    spec = NotifySpec(tuple(urls), tuple(events), rig_error_run, config)
    table.done()
    return spec
