"""`rig station check` on a relay-board station (tests/loop_station.py: the host build of the
firmware behind a pty, each channel powering a loop device; a campaign of kind "relay-board"):
rail sense read on and off against `[station.rail_sense]`, a miscalibrated threshold named in
one line, and bad input (a drive not on the bus) refused with exit 2 before any channel is cut."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rig.station.check import CONFIRM_CUTS
from tests.cli_runner import rig
from tests.json_schemas import validate
from tests.loop_station import (
    LoopStation,
    campaign_text,
    detach_ours,
    loop_station,
    requirements,
)

RAIL = "\n[station.rail_sense]\nhi = {hi}\nlo = 100\nwindow_ms = 50\n"


@pytest.fixture
def station(tmp_path: Path, udevd: None) -> Iterator[LoopStation]:
    reason = requirements()
    if reason:
        pytest.skip(reason)
    with loop_station(tmp_path, 2) as running:
        for channel in running.images:  # its start-up switch-on, before any test's `since`
            assert running.wait_powered(channel, 20)
        yield running


def _campaign(station: LoopStation, tmp_path: Path, hi: int) -> Path:
    text = campaign_text(station, 1, watchdog_ms=2000)
    text = text.replace("watchdog_ms = 2000\n", "watchdog_ms = 2000\n" + RAIL.format(hi=hi))
    path = tmp_path / "check.toml"
    path.write_text(text)
    return path


def test_rail_sense_on_and_off_against_the_thresholds(station: LoopStation, tmp_path: Path) -> None:
    path = _campaign(station, tmp_path, hi=600)
    since = time.monotonic_ns()
    result = rig("station", "check", str(path), "--json", cwd=tmp_path, timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    validate(report)  # docs/json/rig.station-check-1.schema.json
    assert report["board"]["board"] == "host" and report["board"]["protocol"] == 3
    for check in report["channels"]:
        rail = check["rail"]
        assert (rail["hi"], rail["lo"]) == (600, 100)
        assert rail["on"] >= 600 and rail["off"] < 100, rail  # the modelled rail, on and off
        assert rail["capture"]["end"] == "fell" and rail["capture"]["v0"] >= 600, rail
        # each channel switched off and on again once (up to CONFIRM_CUTS times when another
        # program's disk left during the first cut: the check cut again to tell); the
        # firmware's own boot may still report a channel powered, hence leading "on"s
        switched = [on for _, on in station.switched_since(check["channel"], since)]
        first_off = switched.index(False) if False in switched else len(switched)
        rounds = len(switched[first_off:]) // 2
        assert switched[first_off:] == [False, True] * rounds, (switched, check)
        assert rounds == 1 if not check["coincidental"] else 2 <= rounds <= CONFIRM_CUTS
        assert check["departure_s"] is not None and check["return_s"] is not None


def test_a_rail_threshold_above_the_powered_reading_is_one_line(
    station: LoopStation, tmp_path: Path
) -> None:
    path = _campaign(station, tmp_path, hi=1023)
    result = rig("station", "check", str(path), cwd=tmp_path, timeout_s=300)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if "with power on, below hi" in line]
    assert [line.split(":")[0] for line in lines] == ["channel 0", "channel 1"], result.stdout


def test_a_drive_not_on_the_bus_is_bad_input_and_nothing_is_cut(
    station: LoopStation, tmp_path: Path
) -> None:
    path = _campaign(station, tmp_path, hi=600)
    path.write_text(path.read_text().replace(str(station.images[1]), "/nowhere/else.img"))
    since = time.monotonic_ns()
    result = rig("station", "check", str(path), cwd=tmp_path, timeout_s=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "not found on the bus" in result.stderr
    for channel in (0, 1):  # never switched off
        assert all(on for _, on in station.switched_since(channel, since))


@contextmanager
def another_programs_disk(image: Path, period_s: float) -> Iterator[None]:
    """A loop disk of "another program": attached and detached every `period_s` while the
    check runs, as this shared machine's other tests do all day (ours by its backing file)."""
    with image.open("wb") as handle:
        handle.truncate(1 << 20)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            found = subprocess.run(
                ["losetup", "--find", "--show", str(image)], capture_output=True, text=True
            )
            stop.wait(period_s)
            if found.returncode == 0:
                subprocess.run(["losetup", "-d", found.stdout.strip()], capture_output=True)
            stop.wait(period_s)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
        detach_ours({0: image})


def test_another_programs_disk_leaving_during_the_cuts_is_no_wiring_fault(
    station: LoopStation, tmp_path: Path
) -> None:
    """A disk that leaves during a channel's cut, again in the repeated cuts, but as often with
    no channel cut, is another program's: a note (`coincidental`), never a wiring fault."""
    path = _campaign(station, tmp_path, hi=600)
    with another_programs_disk(tmp_path / "other.img", 0.02):
        result = rig("station", "check", str(path), "--json", cwd=tmp_path, timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and all(not c["problems"] for c in report["channels"]), report
    noted = [label for c in report["channels"] for label in c["coincidental"]]
    assert any("other.img" in label for label in noted), report  # it did leave during a cut
