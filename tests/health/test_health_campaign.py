"""The health phase inside real campaigns (production campaign code, in-process drives whose
health is answered as smartctl JSON and parsed by the production parser)."""

from __future__ import annotations

import dataclasses
import json
import zlib
from pathlib import Path

import pytest

from fixtures import sim_station
from fixtures.virtual_health import VirtualHealth
from rig.campaign.model import DriveSummary
from rig.campaign.observer import Lines, Observer
from rig.campaign.parallel import run_campaign
from rig.check import verify
from rig.config import campaign_file
from rig.errors import UserError
from rig.store import Store

TEXT = """
[campaign]
name = "health"
cycles = {cycles}
seed = 3
region_mib = 2
[station]
kind = "simulated"
[workload]
workers = 2
write_blocks = [1, 2]
flush_every = 2
[cut]
delay_ms = [0.5, 3]
off_ms = 1
sample_blocks = 16
{health}
[[drive]]
channel = 0
model = "SIM NVMe"
serial = "H0001"
profile = "plp"
"""


def run(
    tmp_path: Path, cycles: int, health: str = "", **virtual: object
) -> tuple[list[DriveSummary], Store, VirtualHealth]:
    campaign = campaign_file.parse(TEXT.format(cycles=cycles, health=health))
    station, drives = sim_station.build(campaign)
    shim = VirtualHealth(drives, **virtual)  # type: ignore[arg-type]
    station = dataclasses.replace(station, health=shim.health)
    store = Store(str(tmp_path / "h.sqlite"))
    return run_campaign(campaign, station, store, Observer()), store, shim


def anomalies(store: Store) -> list[tuple[int, dict[str, object]]]:
    rows = store.query(
        "SELECT c.seq, f.detail, f.failure FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " WHERE f.class = ? ORDER BY c.seq",
        (verify.COUNTER_ANOMALY,),
    )
    assert all(r["failure"] == 1 for r in rows)
    return [(r["seq"], json.loads(r["detail"])) for r in rows]


def test_honest_counters_give_a_snapshot_per_cut_and_no_anomaly(tmp_path: Path) -> None:
    summaries, store, _ = run(tmp_path, 6)
    assert summaries[0].cycles == 6 and summaries[0].errors == 0
    rows = store.query("SELECT id, after_seq, source, fields FROM health ORDER BY after_seq")
    assert [r["after_seq"] for r in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert {r["source"] for r in rows} == {"smartctl"}
    fields = [json.loads(r["fields"]) for r in rows]
    assert [f["unsafe_shutdowns"] for f in fields] == [7, 8, 9, 10, 11, 12, 13]
    assert [f["power_cycles"] for f in fields] == [40, 41, 42, 43, 44, 45, 46]
    assert fields[0]["identity"]["serial"] == "H0001"
    # the raw tool output is kept, compressed, exactly as the tool printed it
    raw = store.health_raw(rows[-1]["id"])
    assert json.loads(raw)["nvme_smart_health_information_log"]["unsafe_shutdowns"] == 13
    assert zlib.decompress(
        store.query("SELECT raw FROM health WHERE id = ?", (rows[0]["id"],))[0]["raw"]
    ).startswith(b"{")
    assert anomalies(store) == []
    assert summaries[0].failures == {}


def test_unsafe_shutdowns_that_do_not_count_the_cut_are_counter_anomalies(
    tmp_path: Path,
) -> None:
    summaries, store, _ = run(tmp_path, 4, lying=True)
    found = anomalies(store)
    # a rig error leaves the counters uncompared across its cycle and the next (a rebaseline):
    # say which, so a missing anomaly is told apart from a missed one
    errors = [tuple(r) for r in store.query("SELECT seq, status, error FROM cycle")]
    assert summaries[0].errors == 0, errors
    assert [seq for seq, _ in found] == [1, 2, 3, 4]
    for _, detail in found:
        assert detail["field"] == "unsafe_shutdowns"
        assert detail["before"] == detail["after"] == 7
        assert detail["reason"] == "unsafe-shutdown counter did not count the cut"
        assert detail["cuts"] == 1
    assert summaries[0].failures == {verify.COUNTER_ANOMALY: 4}


def test_rising_media_errors_are_counter_anomalies(tmp_path: Path) -> None:
    _, store, _ = run(tmp_path, 3, media_errors_per_cut=2)
    found = anomalies(store)
    assert [(seq, d["field"], d["before"], d["after"]) for seq, d in found] == [
        (1, "media_errors", 0, 2),
        (2, "media_errors", 2, 4),
        (3, "media_errors", 4, 6),
    ]


def test_cadence_compares_over_the_cuts_in_between(tmp_path: Path) -> None:
    _, store, _ = run(tmp_path, 5, health="[health]\nevery = 2", lying=True)
    rows = store.query("SELECT after_seq FROM health ORDER BY after_seq")
    assert [r["after_seq"] for r in rows] == [0, 2, 4]
    found = anomalies(store)
    assert [(seq, d["cuts"], d["expected"]) for seq, d in found] == [
        (2, 2, "+2 (= 9)"),
        (4, 2, "+2 (= 9)"),
    ]


def test_every_zero_reads_no_health(tmp_path: Path) -> None:
    _, store, _ = run(tmp_path, 2, health="[health]\nevery = 0", lying=True)
    assert store.query("SELECT COUNT(*) FROM health")[0][0] == 0
    assert anomalies(store) == []


def test_a_station_without_health_refuses_a_campaign_that_asks_for_it(tmp_path: Path) -> None:
    campaign = campaign_file.parse(TEXT.format(cycles=1, health="[health]\nevery = 1"))
    station, _ = sim_station.build(campaign)  # in-process drives: no health capability
    assert station.health is None
    store = Store(str(tmp_path / "h.sqlite"))
    with pytest.raises(UserError, match="cannot read drive health"):
        run_campaign(campaign, station, store, Observer())
    assert store.query("SELECT COUNT(*) FROM cycle")[0][0] == 0


def test_write_cache_option_needs_a_station_that_can_set_it(tmp_path: Path) -> None:
    campaign = campaign_file.parse(TEXT.format(cycles=1, health='[health]\nwrite_cache = "off"'))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "h.sqlite"))
    with pytest.raises(UserError, match="cannot set a drive's write cache"):
        run_campaign(campaign, station, store, Observer())


def test_write_cache_is_set_and_recorded_every_cycle(tmp_path: Path) -> None:
    campaign = campaign_file.parse(TEXT.format(cycles=3, health='[health]\nwrite_cache = "off"'))
    station, _ = sim_station.build(campaign)
    asked: list[bool | None] = []

    def cache(node: object, wanted: bool | None) -> bool | None:
        asked.append(wanted)
        return False

    station = dataclasses.replace(station, write_cache=cache)
    store = Store(str(tmp_path / "h.sqlite"))
    run_campaign(campaign, station, store, Observer())
    assert asked == [False] * 4  # before the first cut and after every return
    rows = store.query(
        "SELECT e.cycle_id, e.detail FROM event e WHERE e.kind = 'write_cache' ORDER BY e.id"
    )
    assert [json.loads(r["detail"]) for r in rows] == [{"enabled": False, "wanted": False}] * 4
    assert [r["cycle_id"] is not None for r in rows] == [False, True, True, True]


@pytest.mark.parametrize("text", ["every = -1", "write_cache = 'maybe'", "evrey = 1"])
def test_bad_health_options_are_one_line_errors(text: str) -> None:
    with pytest.raises(UserError, match=r"\[health\]"):
        campaign_file.parse(TEXT.format(cycles=1, health=f"[health]\n{text}"))


def test_a_refused_drive_releases_its_claim(tmp_path: Path) -> None:
    from contextlib import AbstractContextManager

    from rig.station import locks

    campaign = campaign_file.parse(TEXT.format(cycles=1, health="[health]\nevery = 1"))
    station, drives = sim_station.build(campaign)
    lock_dir = str(tmp_path / "locks")

    def claim(node: object, name: str) -> AbstractContextManager[object]:
        return locks.claim(drives[0].identity, name, lock_dir)

    station = dataclasses.replace(station, claim=claim)
    store = Store(str(tmp_path / "h.sqlite"))
    with pytest.raises(UserError, match="cannot read drive health"):
        run_campaign(campaign, station, store, Observer())
    with locks.claim(drives[0].identity, "next", lock_dir):  # free again
        pass


def test_a_health_tool_that_is_not_installed_refuses_the_campaign(tmp_path: Path) -> None:
    from rig.health.errors import ToolMissing

    campaign = campaign_file.parse(TEXT.format(cycles=1, health=""))
    station, _ = sim_station.build(campaign)

    def no_smartctl(node: object) -> object:
        raise ToolMissing("smartctl: not found on PATH", ("smartctl",))

    station = dataclasses.replace(station, health=no_smartctl)
    store = Store(str(tmp_path / "h.sqlite"))
    with pytest.raises(UserError, match="health: smartctl: not found on PATH"):
        run_campaign(campaign, station, store, Observer())


def test_a_drive_that_cannot_answer_health_runs_without_it_and_says_so(tmp_path: Path) -> None:
    from rig.health.errors import ToolFailed

    campaign = campaign_file.parse(TEXT.format(cycles=2, health=""))
    station, _ = sim_station.build(campaign)

    def cannot(node: object) -> object:
        raise ToolFailed("smartctl could not open the device: Unable to detect", (), 1, "")

    station = dataclasses.replace(station, health=cannot)
    store = Store(str(tmp_path / "h.sqlite"))
    [summary] = run_campaign(campaign, station, store, Observer())
    assert summary.cycles == 2 and summary.errors == 0
    rows = store.query("SELECT detail FROM event WHERE kind = 'health_unavailable'")
    assert [json.loads(r["detail"])["error"] for r in rows] == [
        "smartctl could not open the device: Unable to detect"
    ]
    assert store.query("SELECT COUNT(*) FROM health")[0][0] == 0


UNTYPABLE = "smartctl rejected the command line: /dev/loop7: Unable to detect device type"


@pytest.mark.parametrize("health", ["", "[health]\nevery = 1"], ids=["no-health", "health"])
def test_smartctl_that_cannot_type_the_device_refuses_only_with_health(
    tmp_path: Path, health: str
) -> None:
    """Real smartctl exits 1 on a device it cannot type, the status bit it also uses for a
    command line it cannot parse (a ToolUsageError, a rig fault). Without [health] the drive
    runs without health (one warning line, one event); with [health] it is refused, as asked."""
    from rig.health.errors import ToolUsageError

    campaign = campaign_file.parse(TEXT.format(cycles=2, health=health))
    station, _ = sim_station.build(campaign)

    def untypable(node: object) -> object:
        raise ToolUsageError(UNTYPABLE, ("smartctl", "-x"), 1, "")

    station = dataclasses.replace(station, health=untypable)
    store = Store(str(tmp_path / "h.sqlite"))
    lines: list[str] = []
    if health:
        with pytest.raises(UserError, match="health: smartctl rejected the command line"):
            run_campaign(campaign, station, store, Lines(lines.append))
        assert store.query("SELECT COUNT(*) FROM cycle")[0][0] == 0
        return
    [summary] = run_campaign(campaign, station, store, Lines(lines.append))
    assert summary.cycles == 2 and summary.errors == 0
    warnings = [line for line in lines if "warning" in line]
    assert len(warnings) == 1 and "running without health" in warnings[0], lines
    assert UNTYPABLE in warnings[0]
    events = store.query("SELECT detail FROM event WHERE kind = 'health_unavailable'")
    assert [json.loads(r["detail"])["error"] for r in events] == [UNTYPABLE]
