"""`kind = "simulated"`: the simulated rig of fixtures/, either in-process virtual drives or the
full-system twin (firmware in simavr, FUSE-served loop devices). Its keys: twin, bus.

The constructor imports fixtures/ when a simulated campaign is built, never before: the rig's
modules do not depend on the simulator (docs/decisions.md, "Station kinds are one explicit
table")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rig.config.station_keys import StationSpec
from rig.config.tables import Table
from rig.errors import UserError

if TYPE_CHECKING:
    from rig.config.campaign import Campaign
    from rig.station.model import Station, Wiring

TWINS = ("in-process", "simavr")  # fixtures/: virtual drives, or the full-system twin


@dataclass(frozen=True)
class SimulatedSpec(StationSpec):
    twin: str = "in-process"
    bus: str = ""  # the full-system twin: bus behaviours of every drive (a profile modifier)

    def simulated_block_devices(self) -> bool:
        # the full-system twin's drives are loop devices (a discard punches a hole in the
        # drive's image); the in-process twin's are Python objects
        return self.twin == "simavr"

    def describe(self) -> str:
        if self.twin == "in-process":
            return "in-process virtual drives"
        return "firmware in simavr, FUSE-served loop devices"


def settings(keys: Table, common: StationSpec) -> SimulatedSpec:
    spec = SimulatedSpec(
        **vars(common), twin=keys.get("twin", str, "in-process"), bus=keys.get("bus", str, "")
    )
    if spec.twin not in TWINS:
        raise UserError(f"campaign: [station].twin must be one of {', '.join(TWINS)}")
    if spec.recover != "none" and spec.twin == "in-process":
        raise UserError("campaign: [station].recover needs drives on a real bus (not in-process)")
    if spec.bus and spec.twin != "simavr":
        raise UserError('campaign: [station].bus is for the full-system twin (twin = "simavr")')
    return spec


def truth_path(store_path: str) -> Path:
    """Where the full-system twin logs what its drives really did, per cut: by the store."""
    return Path(store_path).with_suffix(".truth.jsonl")


def station(campaign: Campaign, wiring: Wiring) -> Station:
    from fixtures import sim_station  # the simulated rig, loaded only for a simulated campaign

    spec = campaign.station
    assert isinstance(spec, SimulatedSpec)
    if spec.twin == "simavr":  # closing its power switch stops the simulator
        return sim_station.build_twin(campaign, truth_path(wiring.store_path), wiring.on_edge)[0]
    return sim_station.build(campaign, wiring.on_edge)[0]
