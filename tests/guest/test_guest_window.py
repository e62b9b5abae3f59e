"""The window strategy in the QEMU guest: `rig run` with `[cut] strategy = "window"` on the
hot-plug NVMe (real nvme driver, real udev) whose fault core has a known window of 200 ms after
the flush (jittered: t99 = 640 ms), the cut by the real firmware in simavr over USB serial.
Each cut's outcome as the rig recorded it must be what the twin did (its `destage_timer` truth:
whether the cache was still at risk at the edge); `-m slow` runs enough cuts for a fit whose
t99 interval is checked against the true one. Its own guest (one drive), booted once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.guest.drive import GuestDriveSpec
from fixtures.guest.faultdrive import fault_core_drives
from fixtures.guest.station import GuestStation
from fixtures.profiles import profile
from reports.analysis import window
from reports.load import dataset
from tests.guest.conftest import guest_unavailable
from tests.guest.guest_helpers import campaign_text, run_campaign

PROFILE = "window-200ms-jitter"
DRIVES = [GuestDriveSpec(0, "nvme-hotplug", PROFILE, "GWN0001", seed=111)]
CUTS = int(os.environ.get("RIG_GUEST_WINDOW_CUTS", "6"))
WINDOW = '[cut.window]\nafter = "flush"\nmin_ms = 10\nmax_ms = 10000\n'


@pytest.fixture(scope="module")
def window_station(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GuestStation]:
    reason = guest_unavailable()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp("guest-window")
    station = GuestStation(fault_core_drives(DRIVES), workdir, workdir / "station.truth.jsonl")
    try:
        yield station
    finally:
        station.close()


def window_campaign(station: GuestStation, name: str, cuts: int, seed: int) -> str:
    text = campaign_text(name, station, [0], cuts, recover_wait_s=60.0, seed=seed, health_every=0)
    text = text.replace("[cut]\n", '[cut]\nstrategy = "window"\n', 1)
    return text.replace("[health]\n", WINDOW + "[health]\n", 1)


def run_window(station: GuestStation, name: str, cuts: int, seed: int) -> window.ModelWindow:
    workdir = Path(station.workdir)
    run = run_campaign(station, workdir, name, window_campaign(station, name, cuts, seed))
    cycles = run.run.cycles(0)
    assert [c[1] for c in cycles] == ["ok"] * cuts, run.run.stderr[-3000:]
    timers = sorted(
        (e for e in run.truth if e["kind"] == "destage_timer"), key=lambda e: int(e["cut"])
    )
    assert len(timers) == cuts
    (found,) = window.analyse(dataset.load([str(run.db)]))
    assert found.result.cuts == cuts  # every cut had a delay after a flush
    # the rig's outcome of each cut is the twin's: lost exactly when the cache was at risk
    truth = [bool(e["detail"]["at_risk"]) for e in timers]
    agree = sum(a == b for a, b in zip(truth, found.lost, strict=True))
    assert agree >= cuts - 1, (truth, found.lost, found.delays_ms)
    return found


@pytest.mark.slow  # 105 s of CI time; the window campaign's CI runs are in-process twins
def test_a_short_window_campaign_in_the_guest(window_station: GuestStation) -> None:
    found = run_window(window_station, "guest-window", CUTS, seed=3)
    print(f"\nguest window: {found.result.summary()}")


@pytest.mark.slow
def test_the_guest_campaign_finds_the_window(window_station: GuestStation) -> None:
    found = run_window(window_station, "guest-window-60", 60, seed=7)
    t99 = found.result.quantile(0.99)
    truth = profile(PROFILE).true_quantile_ms(0.99)
    assert t99 is not None and t99.bounded(), found.result.summary()
    assert t99.low_ms / 1.5 <= truth <= t99.high_ms * 1.5, found.result.summary()  # type: ignore[operator]
