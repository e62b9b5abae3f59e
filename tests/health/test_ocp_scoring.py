"""The drive's own account of each power loss, scored on the twin's OCP profiles: production
campaign code on in-process drives whose health (smartctl JSON and the OCP C0h log as nvme-cli
prints it) goes through the production parsers. Every lying OCP counter, every failing
capacitor and every slow return is found, on the cycle it happened; nothing on honest drives."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from fixtures import sim_station
from fixtures.virtual_health import VirtualHealth
from reports import export
from reports.render import ocp as ocp_report
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.check import verify
from rig.config import campaign_file
from rig.errors import UserError
from rig.health.delta import diff_snapshots
from rig.health.tracker import HealthTracker
from rig.store import Store

CYCLES = 8
PROFILES = ("ocp-plp", "ocp-plp-lies", "ocp-caps-failing", "ocp-slow-crto", "honest")
TEXT = """
[campaign]
name = "ocp"
cycles = {cycles}
seed = 5
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
[health]
every = 1
"""


def _drive(channel: int, profile: str) -> str:
    return (
        f'[[drive]]\nchannel = {channel}\nmodel = "SIM {profile}"\nserial = "O{channel:04d}"\n'
        + (f'profile = "{profile}"\n')
    )


Ran = tuple[Store, VirtualHealth, list[Any]]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    """The campaign on the OCP profiles, once for the scoring and the report tests."""
    return _run(tmp_path_factory.mktemp("ocp"))


def _run(tmp_path: Path) -> Ran:
    text = TEXT.format(cycles=CYCLES) + "".join(_drive(i, p) for i, p in enumerate(PROFILES))
    campaign = campaign_file.parse(text)
    station, drives = sim_station.build(campaign)
    shim = VirtualHealth(drives)
    station = dataclasses.replace(station, health=shim.health)
    store = Store(str(tmp_path / "ocp.sqlite"))
    run_campaign(campaign, station, store, Observer())
    return store, shim, drives


def _findings(store: Store) -> dict[str, list[tuple[int, str, dict[str, Any]]]]:
    """(cycle seq, class, detail) of every drive-scope finding, by drive serial."""
    rows = store.query(
        "SELECT d.serial, c.seq, f.class, f.detail FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE f.class IN (?, ?) ORDER BY c.seq",
        (verify.COUNTER_ANOMALY, verify.SLOW_READY),
    )
    found: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    for r in rows:
        found.setdefault(r["serial"], []).append((r["seq"], r["class"], json.loads(r["detail"])))
    return found


def test_every_lie_failing_capacitor_and_slow_return_found_none_invented(ran: Ran) -> None:
    store, shim, drives = ran
    found = _findings(store)
    by_profile = {PROFILES[i]: found.get(f"O{i:04d}", []) for i in range(len(PROFILES))}
    cycles = range(1, CYCLES + 1)
    # honest drives, with and without the OCP log: nothing
    assert by_profile["ocp-plp"] == [] and by_profile["honest"] == []
    # the PLP count that never moves: every cut, that field, nothing else
    lies = by_profile["ocp-plp-lies"]
    assert [(seq, d["field"]) for seq, _, d in lies] == [(s, "plp_start_count") for s in cycles]
    assert all(d["reason"] == "PLP start counter did not count the cut" for _, _, d in lies)
    # failing capacitors: every cut at which the twin's capacitors are below its threshold
    caps = drives[PROFILES.index("ocp-caps-failing")]
    failed = [s for s in cycles if shim.capacitors_failed(caps, s)]
    assert failed  # the profile does reach it within the run
    got = by_profile["ocp-caps-failing"]
    assert [seq for seq, _, d in got if d["field"] == "capacitor_health"] == failed
    # ... and the drive's own warning bit, once, when it is newly set
    assert [seq for seq, _, d in got if d["field"] == "critical_warning"] == failed[:1]
    assert {d["field"] for _, _, d in got} == {"capacitor_health", "critical_warning"}
    # slow returns past the drive's own CRTO: exactly the twin's slow power-ons
    slow_drive = drives[PROFILES.index("ocp-slow-crto")]
    truth = [e.cut for e in slow_drive.core.truth if e.kind == "slow_return"]
    slow = by_profile["ocp-slow-crto"]
    assert [seq for seq, cls, _ in slow] == truth and truth
    assert all(cls == verify.SLOW_READY for _, cls, _ in slow)
    detail = slow[0][2]
    assert detail["drive_timeout_s"] == 0.5 and detail["drive_timeout_source"] == "crto.crwmt"
    assert detail["seconds"] > 2.0 and detail["exceeded"] == ["drive"]


def test_a_controlled_power_off_raises_no_finding(tmp_path: Path) -> None:
    text = TEXT.format(cycles=1) + _drive(0, "ocp-plp")
    _, drives = sim_station.build(campaign_file.parse(text))
    shim, drive = VirtualHealth(drives), drives[0]
    node = drive.node()
    before = shim.health(node)
    shim.clean_power_off(node)  # told to shut down, then power off and on
    after = shim.health(node)
    delta = diff_snapshots(before, after, cuts=0, clean_offs=1)
    assert delta.ok, delta.anomalies
    assert delta.change("power_cycles") == 1 and delta.change("unsafe_shutdowns") == 0
    assert delta.change("incomplete_shutdowns") == 0 and delta.change("plp_start_count") == 0
    # judged as a cut it would be found: the rule does look at the clean off
    assert {a.field for a in diff_snapshots(before, after, cuts=1).anomalies} == {
        "unsafe_shutdowns",
        "incomplete_shutdowns",
        "plp_start_count",
    }
    # through the tracker: a clean off, then a cut, compared in one delta
    tracker = HealthTracker(shim.health, every=1)
    tracker.baseline(node)
    shim.clean_power_off(node)
    tracker.clean_power_off()
    drive.set_power(False)
    drive.set_power(True)
    _, delta, events = tracker.after_cut(node)
    assert delta is not None and delta.ok, delta.anomalies
    assert delta.change("power_cycles") == 2 and delta.change("plp_start_count") == 1
    assert events == []


def test_the_report_charts_each_drive_and_flags_plp_unproven(ran: Ran, tmp_path: Path) -> None:
    store, shim, drives = ran
    page = Path(export.write_report([store.path], str(tmp_path / "report"))).read_text()
    assert "The drive's own account of each power loss" in page
    section = page.split("The drive's own account of each power loss")[1]
    # per model (one drive each, but the honest one without the log): both charts
    assert section.count("<svg") == 2 * (len(PROFILES) - 1)
    assert all(f"<h3>SIM {p}</h3>" in section for p in PROFILES[:-1])
    # the lying drive kept its data on every cut its PLP count missed: unproven, each cut
    assert f"PLP unproven</b> on {CYCLES} cuts" in page
    assert page.count("PLP unproven</b>") == 1
    body = json.loads((tmp_path / "report" / "report.json").read_text())
    ocp = {d["serial"]: d for d in body["ocp"]}
    assert set(ocp) == {f"O{i:04d}" for i in range(len(PROFILES) - 1)}  # not the honest one
    lies = ocp["O0001"]
    assert lies["plp_declared"] and lies["plp_unproven"] == list(range(1, CYCLES + 1))
    assert [rise for _, _, rise in lies["series"]] == [0] * (CYCLES + 1)
    honest = ocp["O0000"]
    assert [rise for _, _, rise in honest["series"]] == list(range(CYCLES + 1))
    assert honest["plp_unproven"] == [] and honest["ready_timeout_ms"] == 1000
    caps = [c for _, c, _ in ocp["O0002"]["series"]]
    assert caps[:3] == [100, 85, 70] and ocp["O0003"]["slow_ready"] > 0
    with (tmp_path / "report" / "ocp.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == ocp_report.CSV_HEAD
    by = {r["serial"]: r for r in rows}
    assert by["O0001"]["plp_unproven_cuts"] == str(CYCLES) and by["O0001"]["plp_start_rise"] == "0"
    assert by["O0000"]["incomplete_shutdown_rise"] == str(CYCLES)
    assert by["O0002"]["capacitor_health_last"] == "0"
    caps_failed = [s for s in range(1, CYCLES + 1) if shim.capacitors_failed(drives[2], s)]
    assert by["O0002"]["capacitor_failed_cuts"] == str(len(caps_failed))
    assert ocp["O0002"]["capacitors_failed"] == caps_failed
    assert f"failed</b> after {len(caps_failed)} cuts" in section


def test_a_store_without_ocp_drives_has_no_ocp_section(tmp_path: Path) -> None:
    text = TEXT.format(cycles=2) + _drive(0, "honest")
    campaign = campaign_file.parse(text)
    station, drives = sim_station.build(campaign)
    station = dataclasses.replace(station, health=VirtualHealth(drives).health)
    store = Store(str(tmp_path / "plain.sqlite"))
    run_campaign(campaign, station, store, Observer())
    page = Path(export.write_report([store.path], str(tmp_path / "r"))).read_text()
    assert "OCP C0h" not in page and not (tmp_path / "r" / "ocp.csv").exists()
    assert "ocp" not in json.loads((tmp_path / "r" / "report.json").read_text())


def test_the_labs_ready_limit_finds_every_return_past_it(tmp_path: Path) -> None:
    text = TEXT.format(cycles=3) + "[criteria]\nready_limit_s = 0.001\n" + _drive(0, "ocp-plp")
    campaign = campaign_file.parse(text)
    assert campaign.criteria.ready_limit_s == 0.001
    station, drives = sim_station.build(campaign)
    station = dataclasses.replace(station, health=VirtualHealth(drives).health)
    store = Store(str(tmp_path / "lab.sqlite"))
    run_campaign(campaign, station, store, Observer())
    found = _findings(store)["O0000"]
    assert [(seq, cls) for seq, cls, _ in found] == [(s, verify.SLOW_READY) for s in (1, 2, 3)]
    assert all(d["exceeded"] == ["lab"] and d["drive_timeout_s"] == 1.0 for _, _, d in found)
    events = store.query("SELECT detail FROM event WHERE kind = 'readiness'")
    assert len(events) == 3 and all(json.loads(e["detail"])["bus_s"] > 0 for e in events)


def test_a_ready_limit_outside_its_range_is_refused() -> None:
    with pytest.raises(UserError, match="ready_limit_s"):
        campaign_file.parse(
            TEXT.format(cycles=1) + "[criteria]\nready_limit_s = 0\n" + _drive(0, "honest")
        )
