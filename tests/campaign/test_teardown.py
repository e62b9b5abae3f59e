"""The teardown guarantee (docs/architecture.md, "Safety rules"): whatever fails in a cycle, power
goes back as the campaign says before the next cycle, the cycle is a rig ERROR (never a drive
failure), and the next cycle runs. A fault of the rig is injected at every point of the cycle in
turn (fixtures/rig_faults.py), on one channel of two; the other channel never notices."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fixtures import rig_faults, sim_station
from fixtures.virtual_health import VirtualHealth
from rig.campaign.drive import DriveRun
from rig.campaign.model import CycleRecord
from rig.campaign.observer import Lines, Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.store import Store

TEXT = """
[campaign]
name = "teardown"
cycles = {cycles}
seed = 5
region_mib = 2
[station]
kind = "simulated"
[workload]
workers = 3
write_blocks = [1, 2, 4]
flush_every = 2
[cut]
delay_ms = [1, 6]
off_ms = 2
sample_blocks = 16
[stop]
max_consecutive_errors = 3
[[drive]]
channel = 0
model = "SIM honest"
serial = "TD0"
profile = "honest"
[[drive]]
channel = 1
model = "SIM plp"
serial = "TD1"
profile = "plp"
"""


def test_a_fault_at_every_point_of_the_cycle_leaves_no_channel_off(tmp_path: Path) -> None:
    points = rig_faults.POINTS
    at = {point: 2 * i + 2 for i, point in enumerate(points)}  # cycles 2, 4, ..., each then one ok
    cycles = 2 * len(points) + 2
    campaign = campaign_file.parse(TEXT.format(cycles=cycles))
    station, drives = sim_station.build(campaign)
    # with health: a cut whose edge the rig never heard of still moves the drive's counters
    station = dataclasses.replace(station, health=VirtualHealth(drives).health)
    station = rig_faults.with_faults(station, campaign, rig_faults.FaultPlan(0, at))
    power = station.power
    seen: list[tuple[int, int, str, str, bool]] = []

    class Seen(Observer):
        def cycle_recorded(self, drive: DriveRun, c: CycleRecord) -> None:
            # after the record phase, before the next cycle: the channel is powered
            channel = drive.spec.channel
            seen.append((channel, c.seq, c.status, c.error, power.state(channel)))

    store = Store(str(tmp_path / "t.sqlite"))
    summaries = run_campaign(campaign, station, store, Seen())
    assert all(powered for *_, powered in seen), [s for s in seen if not s[-1]]
    ch0 = {seq: (status, error) for channel, seq, status, error, _ in seen if channel == 0}
    assert sorted(ch0) == list(range(1, cycles + 1)), "every cycle ran"
    for point, seq in at.items():
        status, error = ch0[seq]
        assert status == "error" and f"injected fault at {point}" in error, (point, status, error)
        assert ch0[seq + 1][0] == "ok", (point, ch0[seq + 1])  # and the next cycle runs
    errors = {seq for seq, (status, _) in ch0.items() if status != "ok"}
    assert errors == set(at.values())
    assert [s.errors for s in summaries] == [len(points), 0]
    assert not summaries[0].stopped_by and not summaries[0].dead
    # a rig fault is never a drive failure, and the honest drives show none (no counter is
    # judged across a cycle whose cut may have fallen unseen: a lost reply or edge report)
    failures = store.query("SELECT class, detail FROM finding WHERE failure = 1")
    assert [tuple(f) for f in failures] == []
    assert store.query("SELECT COUNT(*) FROM health")[0][0] > cycles
    # where a cut may have fallen before the restore phase, the teardown put power back
    restored = store.query(
        "SELECT c.seq FROM event e JOIN cycle c ON c.id = e.cycle_id"
        " WHERE e.kind = 'power_on' AND json_extract(e.detail, '$.teardown') = 1"
    )
    after_cut = ("write", "cut", "writer", "observe_loss", "restore")
    assert sorted(r[0] for r in restored) == sorted(at[p] for p in after_cut)
    store.close()


@pytest.mark.parametrize("point", ["cut", "restore"])
def test_a_switch_that_never_answers_stops_the_channel_with_its_reason(
    tmp_path: Path, point: str
) -> None:
    """The teardown tries the switch again; a switch that keeps failing stops the channel with
    the reason (the board's watchdog powers the drive when the host falls silent)."""
    campaign = campaign_file.parse(TEXT.format(cycles=4))
    station, _ = sim_station.build(campaign)
    plan = rig_faults.FaultPlan(0, {point: 2})
    station = rig_faults.with_faults(station, campaign, plan)
    real_on = station.power.on

    def dead_on(channel: int) -> object:
        if channel == 0 and plan.cycle == 2:
            from rig.errors import PowerTimeoutError

            raise PowerTimeoutError("no answer from the board")
        return real_on(channel)

    station.power.on = dead_on  # type: ignore[method-assign]
    store = Store(str(tmp_path / "t.sqlite"))
    lines: list[str] = []
    summaries = run_campaign(campaign, station, store, Lines(lines.append))
    assert summaries[0].cycles == 2 and summaries[1].cycles == 4
    assert "power could not be restored" in summaries[0].stopped_by
    assert any("ch0: stopped: " in line and "power could not be restored" in line for line in lines)
    store.close()
