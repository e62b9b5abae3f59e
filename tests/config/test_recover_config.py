"""[station] recover and recover_wait_s: parsed, refused with one line naming the key, and wired
into the station's presence."""

from __future__ import annotations

import pytest

from rig.bus.recover import DEFAULT_WAIT_S, RecoveringPresence
from rig.config import campaign as campaign_spec
from rig.config import campaign_file
from rig.errors import UserError
from rig.station import build as station

CAMPAIGN = """
[campaign]
name = "t"
cycles = 1
[station]
kind = "{kind}"
{station}
[[drive]]
channel = 0
model = "M"
serial = "S"
{drive}
"""


def parse(station: str, kind: str = "manual", drive: str = "") -> campaign_spec.Campaign:
    return campaign_file.parse(CAMPAIGN.format(kind=kind, station=station, drive=drive))


def test_recovery_is_off_unless_asked_for() -> None:
    spec = parse("").station
    assert (spec.recover, spec.recover_wait_s) == ("none", ())
    presence = station.build(parse("")).presence
    assert isinstance(presence, RecoveringPresence) and presence.mode == "none"


def test_rescan_with_one_wait_or_a_wait_per_transport() -> None:
    one = parse('recover = "rescan"\nrecover_wait_s = 4').station
    assert one.recover == "rescan" and dict(one.recover_wait_s) == dict.fromkeys(DEFAULT_WAIT_S, 4)
    table = parse('recover = "rescan"\nrecover_wait_s = { nvme = 2.5, sas = 30 }')
    presence = station.build(table).presence
    assert isinstance(presence, RecoveringPresence) and presence.mode == "rescan"
    assert presence.waits == {**DEFAULT_WAIT_S, "nvme": 2.5, "sas": 30.0}


@pytest.mark.parametrize(
    ("text", "kind", "key"),
    [
        ('recover = "reset"', "manual", "[station].recover"),
        ("recover = true", "manual", "[station].recover"),
        ("recover_wait_s = { usb = 3 }", "manual", "'usb' is not a transport"),
        ("recover_wait_s = { nvme = -1 }", "manual", "recover_wait_s.nvme"),
        ('recover_wait_s = "10s"', "manual", "[station].recover_wait_s"),
        ('recover = "rescan"', "simulated", "needs drives on a real bus"),
    ],
)
def test_bad_recovery_settings_are_refused_in_one_line(text: str, kind: str, key: str) -> None:
    drive = 'profile = "plp"' if kind == "simulated" else ""
    with pytest.raises(UserError) as error:
        parse(text, kind, drive)
    assert key in str(error.value) and "\n" not in str(error.value)
