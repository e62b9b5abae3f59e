"""Simulated-drive profiles and their modifiers (fixtures/profiles.py, profiles.toml)."""

from __future__ import annotations

import pytest

from fixtures import sim_station
from fixtures.profiles import has_bus_behaviour, modifiers, profile
from rig.config import campaign_file
from rig.errors import UserError


def test_a_modifier_adds_its_keys_to_a_profile() -> None:
    base = profile("honest")
    assert not has_bus_behaviour(base)
    chaos = profile("honest+shared-pool+stale-events")
    assert chaos.name == "honest+shared-pool+stale-events" and chaos.model == base.model
    assert (chaos.node_pool, chaos.change_burst, chaos.replay_stale) == ("shared", 3, True)
    assert has_bus_behaviour(chaos)
    assert {"bus-chaos", "foreign-clone", "untypable"} <= set(modifiers())


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nosuch", "unknown drive profile 'nosuch'"),
        ("honest+nosuch", "unknown profile modifier 'nosuch'"),
        ("shared-pool", "unknown drive profile 'shared-pool'"),  # a modifier is no drive
        ("honest+plp", "unknown profile modifier 'plp'"),  # a drive is no modifier
    ],
)
def test_unknown_names_are_one_line_errors(name: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as error:
        profile(name)
    assert "\n" not in str(error.value)


def test_the_in_process_twin_refuses_bus_behaviours() -> None:
    campaign = campaign_file.parse(
        """
[campaign]
name = "b"
cycles = 1
[station]
kind = "simulated"
[[drive]]
channel = 0
model = "SIM"
serial = "B0"
profile = "honest+shared-pool"
"""
    )
    with pytest.raises(UserError, match="bus behaviours need the full-system twin"):
        sim_station.build(campaign)
