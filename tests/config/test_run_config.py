"""Campaign file keys of unattended runs: stop rules, durations, pass criteria; each
bad value is refused with one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures import sim_station
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign as campaign_spec
from rig.config import campaign_file
from rig.errors import UserError
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text

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


def parse(campaign: str = "", station: str = "", tables: str = "") -> campaign_spec.Campaign:
    return campaign_file.parse(BASE.format(campaign=campaign, station=station, tables=tables))


def test_defaults() -> None:
    c = parse()
    assert c.stop == campaign_spec.StopRules()
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
    assert c.stop == campaign_spec.StopRules(3, 9, 7200)
    assert c.criteria == campaign_spec.Criteria(
        0.01, 0.9, ("lost_durable_write", "shorn_write"), 300
    )
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


@pytest.mark.parametrize(
    ("keys", "offset", "size"),
    [
        ("", 0, 64 << 20),
        ("region_offset_mib = 2\nregion_mib = 8", 2 << 20, 8 << 20),
        ("region_offset_kib = 4\nregion_kib = 1536", 4096, 1536 << 10),
        ("region_offset_bytes = 512\nregion_bytes = 1048576", 512, 1 << 20),
        ("region_offset_mib = 1.0", 1 << 20, 64 << 20),  # a whole number written as a float
    ],
)
def test_the_region_in_mib_kib_or_bytes(keys: str, offset: int, size: int) -> None:
    c = parse(keys)
    assert (c.region_offset_bytes, c.region_bytes) == (offset, size)


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ("region_offset_mib = 0.5", r"region_offset_mib = 0.5 is not a whole number \(give"),
        ("region_mib = 1.5", r"region_mib = 1.5 is not a whole number \(give region_kib\)"),
        ("region_offset_kib = 0.5", r"region_offset_kib = 0.5 .*give region_offset_bytes"),
        ("region_offset_bytes = 0.5", r"region_offset_bytes = 0.5 is not a whole number$"),
        ("region_offset_mib = 1\nregion_offset_kib = 4", "gives both region_offset_mib and"),
        ("region_kib = 0", r"region_kib = 0 is outside"),
        ("cycles = 2.5", r"\[campaign\]\.cycles = 2.5 is not a whole number"),
    ],
)
def test_a_fraction_is_refused_never_truncated(keys: str, says: str) -> None:
    text = BASE.format(campaign=keys, station="", tables="")
    if "cycles" in keys:
        text = text.replace("cycles = 10\n", "")
    with pytest.raises(UserError, match=says) as error:
        campaign_file.parse(text)
    assert "\n" not in str(error.value)


def test_a_region_off_the_logical_block_is_refused_at_the_drive(tmp_path: Path) -> None:
    # the simulated drives have 4096-byte logical blocks: 512 B cannot be placed, 8 KiB can
    for keys, refused in (("region_offset_bytes = 512", True), ("region_offset_kib = 8", False)):
        text = campaign_text(["plp"], cycles=1).replace("region_mib = 4", f"region_mib = 4\n{keys}")
        campaign = campaign_file.parse(text)
        station, _ = sim_station.build(campaign)
        store = Store(str(tmp_path / f"{refused}.sqlite"))
        try:
            if refused:
                with pytest.raises(
                    UserError, match="offset 512 B is not a multiple of its 4096-byte"
                ):
                    run_campaign(campaign, station, store, Observer())
            else:
                run_campaign(campaign, station, store, Observer())
                drive = store.query("SELECT region_first_lba FROM drive")[0]
                assert drive["region_first_lba"] == 2
        finally:
            store.close()
