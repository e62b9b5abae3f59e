"""The guest station takes any drive model meeting `fixtures.guest.drive.DriveModel`, not only
the fault core's: here an independent write-through RAM disk (tests/guest/ramdrive.py) in a
hot-plug NVMe slot and in a fixed SATA slot, given to the station as its drives, nothing patched.
`rig run` in the guest cuts both through the real firmware; the station's slot rules (removal
and return for hot-plug, a stale device until the guest re-initialises it for the fixed slot)
hold for this model too, and a drive that loses nothing is judged clean. Its own guest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.guest.drive import GuestDriveSpec
from fixtures.guest.station import GuestStation
from tests.guest.conftest import guest_unavailable
from tests.guest.guest_helpers import campaign_text, cut_counts, event_rows, run_campaign
from tests.guest.ramdrive import RamDrive

DRIVES = [
    (GuestDriveSpec(0, "nvme-hotplug", "ramdisk", "GRN0001", seed=121), RamDrive("ramdisk")),
    (GuestDriveSpec(3, "sata-fixed", "ramdisk", "GRA0001", seed=124), RamDrive("ramdisk", 512)),
]
CUTS = 3


@pytest.fixture(scope="module")
def own_drive_station(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GuestStation]:
    reason = guest_unavailable()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("guest-own-drive")
    station = GuestStation(DRIVES, workdir, workdir / "station.truth.jsonl")
    try:
        yield station
    finally:
        station.close()


# its own guest boot (1-2 min under TCG, several on a loaded host): the long target; the short
# tier shows the same protocol with the RAM disk in tests/guest/test_guest_nbd.py and
# tests/station/test_station_drives.py
@pytest.mark.slow
def test_a_drive_model_of_its_own_in_the_guest(own_drive_station: GuestStation) -> None:
    station = own_drive_station
    assert all(station.drives[spec.channel].model is model for spec, model in DRIVES)
    text = campaign_text(
        "guest-own", station, [0, 3], CUTS, recover_wait_s="{ nvme = 20, sata = 3 }",
        health_every=0,
    )  # fmt: skip
    run = run_campaign(station, Path(station.workdir), "guest-own", text)
    for channel in (0, 3):
        statuses = [status for _, status, *_ in run.run.cycles(channel)]
        assert statuses == ["ok"] * CUTS, (channel, run.run.stderr[-3000:])
    failures = run.run.rows("SELECT class, COUNT(*) FROM finding WHERE failure = 1 GROUP BY class")
    assert failures == [], failures
    assert cut_counts(station) == {0: CUTS, 3: CUTS}  # by the model's own truth interface
    # the fixed slot: stale after each cut, recovered by a rescan, answered after the guest
    # re-initialised the device (the station's rule, noted in this model's truth)
    assert len(event_rows(run.run, 3, "bus_stale")) == CUTS
    reinits = [e for e in run.truth if e["channel"] == 3 and e["kind"] == "host_reinit"]
    assert len(reinits) == CUTS, run.truth
    assert not event_rows(run.run, 0, "bus_stale") and not station.errors()
