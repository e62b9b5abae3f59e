"""Campaign file keys of unattended runs: stop rules, durations, pass criteria; each
bad value is refused with one line naming the key."""

from __future__ import annotations

import pytest

from rig import config
from rig.errors import UserError

BASE = """
[campaign]
name = "t"
cycles = 10
{campaign}
[station]
kind = "simulated"
{station}
{tables}
[[drive]]
channel = 0
model = "SIM"
serial = "S0"
profile = "plp"
"""


def parse(campaign: str = "", station: str = "", tables: str = "") -> config.Campaign:
    return config.parse(BASE.format(campaign=campaign, station=station, tables=tables))


def test_defaults() -> None:
    c = parse()
    assert c.stop == config.StopRules()
    assert c.criteria.max_failure_probability == 1e-3 and c.criteria.confidence == 0.95
    assert c.duration_s == 0


def test_values_are_read() -> None:
    c = parse(
        "duration_s = 3600",
        "",
        """
[stop]
max_failures = 3
max_consecutive_errors = 9
duration_s = 7200
[criteria]
max_failure_probability = 0.01
confidence = 0.9
classes = ["lost_durable_write", "shorn_write"]
min_cycles = 300
""",
    )
    assert c.duration_s == 3600
    assert c.stop == config.StopRules(3, 9, 7200)
    assert c.criteria == config.Criteria(0.01, 0.9, ("lost_durable_write", "shorn_write"), 300)
    assert c.criteria.as_json()["classes"] == ["lost_durable_write", "shorn_write"]


@pytest.mark.parametrize(
    ("tables", "key"),
    [
        ("[stop]\nmax_failures = -1", "[stop].max_failures"),
        ("[stop]\nmax_consecutive_errors = 0", "[stop].max_consecutive_errors"),
        ("[stop]\nwhen_dead = true", "'when_dead'"),
        ('[stop]\nduration_s = "1h"', "[stop].duration_s"),
        ("[criteria]\nconfidence = 1.0", "[criteria].confidence"),
        ("[criteria]\nmax_failure_probability = 0", "[criteria].max_failure_probability"),
        ('[criteria]\nclasses = ["allowed_loss"]', "[criteria].classes"),
        ('[criteria]\nclasses = ["lost_write"]', "[criteria].classes"),
        ("[criteria]\nmin_cycles = 1.5e9", "[criteria].min_cycles"),
        ("[cut]\nread_budget = -1", "[cut].read_budget"),
    ],
)
def test_bad_values_name_the_key(tables: str, key: str) -> None:
    with pytest.raises(UserError) as error:
        parse(tables=tables)
    message = str(error.value)
    assert key in message and "\n" not in message


def test_read_budget_and_bus_behaviours() -> None:
    assert parse().cut.read_budget == 2048
    assert parse(tables="[cut]\nread_budget = 0").cut.read_budget == 0
    twin = parse(station='twin = "simavr"\nbus = "bus-chaos"')
    assert twin.station.bus == "bus-chaos"
    with pytest.raises(UserError, match=r"\[station\]\.bus is for the full-system twin"):
        parse(station='bus = "bus-chaos"')  # the in-process twin has no bus


def test_bad_duration() -> None:
    with pytest.raises(UserError, match=r"\[campaign\]\.duration_s"):
        parse(campaign="duration_s = -5")
