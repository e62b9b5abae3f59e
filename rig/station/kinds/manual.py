"""`kind = "manual"`: the operator switches power by hand when the rig says so; drives on the
real bus. No [station] keys of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rig.config.station_keys import StationSpec
from rig.config.tables import Table
from rig.power.base import Edge, PowerSwitch
from rig.power.manual import ManualSwitch

if TYPE_CHECKING:
    from rig.config.campaign import Campaign


def settings(keys: Table, common: StationSpec) -> StationSpec:
    return common


def power(campaign: Campaign, on_edge: Callable[[Edge], None] | None) -> PowerSwitch:
    return ManualSwitch(max(d.channel for d in campaign.drives) + 1)
