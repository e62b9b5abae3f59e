"""A campaign file read with the station kinds this rig has (backends.py:STATION_KINDS): what
the commands, the fleet and resume call. rig/config/campaign.py reads the file given the kinds'
table, so it imports no station kind (the kinds build from its `Campaign`)."""

from __future__ import annotations

from rig.config import campaign as campaign_spec
from rig.config.campaign import Campaign
from rig.station.backends import STATION_KINDS


def parse(text: str, where: str = "campaign") -> Campaign:
    return campaign_spec.parse(text, where, kinds=STATION_KINDS)


def load(path: str) -> Campaign:
    return campaign_spec.load(path, kinds=STATION_KINDS)
