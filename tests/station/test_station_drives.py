"""The in-process station takes its drives (fixtures/sim_station.py `in_process_station`): a
drive model written apart from the fault core (tests/inprocess_ramdrive.py) runs a campaign
through the production campaign code, with nothing patched. A write-through disk loses nothing,
so every cut is judged and none is a failure; the disk's own counters show the rig wrote to it
and cut it. (The guest station's counterpart: tests/guest/test_guest_nbd.py and
tests/guest/test_guest_own_drive.py.)"""

from __future__ import annotations

from pathlib import Path

from fixtures.sim_station import in_process_station
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config.campaign_file import parse
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text
from tests.inprocess_ramdrive import RamDisk


def test_a_drive_model_of_its_own_on_the_in_process_station(tmp_path: Path) -> None:
    campaign = parse(campaign_text(["honest", "honest"], 12))
    disks = [RamDisk(spec.identity) for spec in campaign.drives]
    station = in_process_station(campaign, disks)
    store = Store(str(tmp_path / "c.sqlite"))
    try:
        summaries = run_campaign(campaign, station, store, Observer())
        failures = [tuple(r) for r in store.query("SELECT class FROM finding WHERE failure = 1")]
        statuses = [tuple(r) for r in store.query("SELECT status, COUNT(*) FROM cycle GROUP BY 1")]
    finally:
        store.close()
    assert [s.cycles for s in summaries] == [12, 12] and all(s.errors == 0 for s in summaries)
    assert statuses == [("ok", 24)] and failures == []
    assert all(disk.epoch == 12 and disk.writes > 0 for disk in disks)
