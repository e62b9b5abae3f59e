"""The station-kind table (rig/station/backends.py) is data: a new network PDU backend is one module
(tests/power/fake_pdu.py) plus one row in a copy of the table, passed explicitly to the parser
and the station builder. Nothing registers itself by being imported."""

from __future__ import annotations

import pytest

from rig.bus.recover import RecoveringPresence
from rig.config import campaign as campaign_spec
from rig.config import campaign_file
from rig.errors import UserError
from rig.power.base import Edge
from rig.station import backends
from rig.station import build as station
from rig.station.backends import StationKind
from tests.power import fake_pdu

WITH_PDU = {
    **backends.STATION_KINDS,
    "pdu": StationKind(fake_pdu.PduSpec, fake_pdu.settings, power=fake_pdu.power),
}


def campaign_text(kind: str, station_lines: str) -> str:
    return f"""
[campaign]
name = "pdu"
cycles = 1
[station]
kind = "{kind}"
{station_lines}
[[drive]]
channel = 2
wwn = "0x5000000000000001"
"""


def test_a_pdu_kind_parses_its_own_keys_and_builds_its_power() -> None:
    text = campaign_text(
        "pdu", 'address = "10.0.0.9:23"\noutlets = 4\nswitch_s = 0.25\nrecover = "rescan"'
    )
    campaign = campaign_spec.parse(text, kinds=WITH_PDU)
    spec = campaign.station
    assert spec == fake_pdu.PduSpec("pdu", "rescan", (), "10.0.0.9:23", 4, 0.25)
    edges: list[Edge] = []
    built = station.build(campaign, edges.append, kinds=WITH_PDU)
    power = built.power
    assert isinstance(power, fake_pdu.FakePdu) and power.spec is spec
    assert built.name == "pdu 10.0.0.9:23"
    assert isinstance(built.presence, RecoveringPresence) and built.presence.mode == "rescan"
    power.cut(2, 0.0).wait(1.0)
    built.power.close()
    assert power.sent == ["outlet 3 off", "outlet 3 on"]
    assert [(e.channel, e.powered, e.error_ns) for e in edges] == [
        (2, False, 250_000_000),
        (2, True, 250_000_000),
    ]


@pytest.mark.parametrize(
    ("kind", "lines", "message"),
    [
        ("pdu", "", r"\[station\] needs 'address'"),
        ("pdu", 'address = "pdu1"', r"\[station\]\.address must be host:port"),
        ("pdu", 'address = "pdu1:23"\noutlets = 0', r"\[station\]\.outlets = 0 is outside"),
        ("pdu", 'address = "pdu1:23"\noutlets = 2.5', "outlets must be a whole number"),
        ("pdu", 'address = "pdu1:23"\nwatchdog_ms = 900', "applies to relay-board stations only"),
        ("pdu", 'address = "pdu1:23"\noutlet = 3', "unknown key 'outlet'"),
        ("manual", 'address = "pdu1:23"', r"\[station\]\.address applies to pdu stations only"),
    ],
)
def test_bad_pdu_settings_are_refused_in_one_line(kind: str, lines: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as error:
        campaign_spec.parse(campaign_text(kind, lines), kinds=WITH_PDU)
    assert "\n" not in str(error.value)


def test_the_pdu_checks_its_outlets_against_the_campaign() -> None:
    campaign = campaign_spec.parse(
        campaign_text("pdu", 'address = "p:1"\noutlets = 2'), kinds=WITH_PDU
    )
    with pytest.raises(UserError, match="has 2 outlets; campaign uses 3"):
        station.build(campaign, kinds=WITH_PDU)


def test_the_shipped_table_has_no_pdu_and_was_not_changed_by_the_import() -> None:
    assert "pdu" not in backends.STATION_KINDS
    with pytest.raises(
        UserError, match=r"kind must be one of simulated, relay-board, manual, scpi-supply$"
    ):
        campaign_file.parse(campaign_text("pdu", 'address = "p:1"'))


def test_a_row_gives_a_power_backend_or_a_whole_station_not_both() -> None:
    with pytest.raises(ValueError, match="either a power backend or a station"):
        StationKind(fake_pdu.PduSpec, fake_pdu.settings)
    assert WITH_PDU["pdu"].own_keys() == ("address", "outlets", "switch_s")
    assert backends.STATION_KINDS["manual"].own_keys() == ()
