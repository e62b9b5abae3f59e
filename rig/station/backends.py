"""Every station kind a campaign file can name, in one table: `[station] kind = "..."` is looked
up here, its keys are read by the kind's own function, its station built by its own constructor.

A kind is one module in rig/station/kinds/ (its `StationSpec` subclass, `settings`, and a
constructor) plus one row below. Kinds on the real bus give a power backend (`power`):
rig/station/build.py wires it to udev presence and the real tools. A kind that brings its whole
station (the simulated rig) gives `station` instead. Nothing registers itself: a test passes its own
copy of the table to `rig.config.campaign.parse` and `station.build` (docs/decisions.md,
"Station kinds are one explicit table"); the commands read campaign files through
rig/config/campaign_file.py, which hands this table to `rig.config.campaign.parse`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rig.config.station_keys import StationSpec
from rig.config.tables import Table
from rig.errors import UserError
from rig.power.base import Edge, PowerSwitch
from rig.power.shapes import CUT_KINDS
from rig.station.kinds import manual, relay_board, scpi_supply, simulated

if TYPE_CHECKING:
    from rig.config.campaign import Campaign
    from rig.station.model import Station, Wiring


Settings = Callable[[Table, StationSpec], StationSpec]
PowerFactory = Callable[["Campaign", Callable[[Edge], None] | None], PowerSwitch]
StationFactory = Callable[["Campaign", "Wiring"], "Station"]


@dataclass(frozen=True)
class StationKind:
    spec: type[StationSpec]  # its [station] keys: the fields it adds to StationSpec's
    settings: Settings  # reads and checks them (the common ones are read already)
    power: PowerFactory | None = None  # a power backend; drives on the real bus (udev, tools)
    station: StationFactory | None = None  # or a whole station of its own
    # drives simulated by the rig process from a [[drive]] profile: each needs a profile, none
    # is a block device to discard (unless the spec says so: simulated_block_devices, the
    # full-system twin's loop devices), none outlives the rig (no resume)
    simulated_drives: bool = False
    # the cut kinds its switch makes ([cut] kind, rig/power/shapes.py); others are refused
    cut_kinds: tuple[str, ...] = ("off",)

    def __post_init__(self) -> None:
        if (self.power is None) == (self.station is None):
            raise ValueError("a station kind gives either a power backend or a station")

    def own_keys(self) -> tuple[str, ...]:
        common = {f.name for f in dataclasses.fields(StationSpec)}
        return tuple(f.name for f in dataclasses.fields(self.spec) if f.name not in common)


STATION_KINDS: Mapping[str, StationKind] = {
    "simulated": StationKind(
        simulated.SimulatedSpec,
        simulated.settings,
        station=simulated.station,
        simulated_drives=True,
        cut_kinds=("off", "glitch"),
    ),
    "relay-board": StationKind(
        relay_board.RelayBoardSpec,
        relay_board.settings,
        power=relay_board.power,
        cut_kinds=("off", "glitch"),  # a glitch: the board restores power on its own clock
    ),
    "manual": StationKind(StationSpec, manual.settings, power=manual.power),
    "scpi-supply": StationKind(
        scpi_supply.ScpiSupplySpec,
        scpi_supply.settings,
        power=scpi_supply.power,
        cut_kinds=CUT_KINDS,  # off, glitch, sag, ramp (rig/power/scpi.py)
    ),
}


def simulates_drives(name: str) -> bool:
    """Whether the station kind's drives live inside the rig process (none outlives it)."""
    kind = STATION_KINDS.get(name)
    return kind is not None and kind.simulated_drives


def lookup(name: str, kinds: Mapping[str, StationKind] = STATION_KINDS) -> StationKind:
    kind = kinds.get(name)
    if kind is None:
        raise UserError(f"campaign: [station].kind must be one of {', '.join(kinds)}")
    return kind
