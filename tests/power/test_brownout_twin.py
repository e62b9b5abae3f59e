"""The twin learns voltage: a drive's rail as a voltage over time (fixtures/rail.py) against its
profile's brown-out threshold, hold-up and band (fixtures/faultcore.py), with the truth logged."""

from __future__ import annotations

import dataclasses
import errno
import time

import numpy as np
import pytest

from fixtures import faultcore
from fixtures.profiles import profile
from fixtures.rail import RailFollower
from fixtures.virtual_drive import VirtualDrive, VirtualTarget
from rig.check import verify
from rig.drive.identity import DriveIdentity
from rig.io import media
from rig.io.ledger import CycleLog, LbaState


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object, int]] = []

    def set_power(self, on: bool, edge_ns: int = 0) -> None:
        self.calls.append(("power", on, edge_ns))

    def brownout(self, effect: str) -> None:
        self.calls.append(("brownout", effect, 0))


def test_below_the_threshold_past_the_hold_up_loses_power_and_the_band_rides_through() -> None:
    drive = Recorder()
    rail = RailFollower(drive, profile("honest"), 12.0)  # threshold 7.2 V, no band
    rail.volts(8.0, 1_000)  # above the threshold: nothing
    rail.volts(12.0, 2_000)
    assert drive.calls == []
    rail.volts(7.0, 3_000)
    rail.volts(12.0, 4_000)
    assert drive.calls == [("power", False, 3_000), ("power", True, 4_000)]


def test_a_dip_shorter_than_the_hold_up_is_ridden_and_a_longer_one_is_not() -> None:
    held = dataclasses.replace(profile("honest"), brownout_holdup_ms=30.0)
    drive = Recorder()
    rail = RailFollower(drive, held, 12.0)
    rail.volts(2.0)
    time.sleep(0.005)
    rail.volts(12.0)
    assert drive.calls == []
    low = time.monotonic_ns()
    rail.volts(2.0, low)
    time.sleep(0.1)
    assert drive.calls == [("power", False, low + 30_000_000)]  # when the hold-up ran out


@pytest.mark.parametrize("name", ["brownout-reset", "brownout-corrupt", "brownout-hang"])
def test_a_dip_into_the_band_makes_the_profiles_effect_once(name: str) -> None:
    drive = Recorder()
    rail = RailFollower(drive, profile(name), 12.0)  # threshold 6 V, band up to 9 V
    for v in (8.0, 7.0, 8.5, 12.0):
        rail.volts(v)
    rail.volts(10.0)  # above the band: nothing
    rail.volts(12.0)
    assert drive.calls == [("brownout", profile(name).band_effect, 0)]
    rail.volts(5.0)  # below the threshold: a power question, not the band's
    rail.volts(12.0)
    assert [c[0] for c in drive.calls[1:]] == ["power", "power"]


def _drive(name: str) -> tuple[VirtualDrive, VirtualTarget]:
    drive = VirtualDrive(DriveIdentity("M", "S"), profile(name), seed=3)
    return drive, VirtualTarget(drive)


def _block(drive: VirtualDrive, value: int) -> np.ndarray:
    return np.full(drive.profile.block_size, value, dtype=np.uint8)


def test_a_reset_drops_the_cache_flushed_or_not_without_a_power_loss() -> None:
    drive, target = _drive("brownout-reset")
    target.write(0, _block(drive, 1))
    target.flush()  # acknowledged from the cache: the drive trusts its capacitors
    target.write(1, _block(drive, 2))
    drive.brownout("reset")
    kinds = {(e.kind, e.lba) for e in drive.core.events(1)}
    assert kinds == {
        (faultcore.CONTROLLER_RESET, -1),
        (faultcore.LOST_FLUSHED, 0),
        (faultcore.LOST_UNFLUSHED, 1),
    }
    assert drive.present and drive.epoch == 0  # never left the bus
    assert not target.read(0, 2).any()


def test_corruption_garbles_what_was_in_flight() -> None:
    drive, target = _drive("brownout-corrupt")
    target.write(5, _block(drive, 7))
    drive.brownout("corrupt")
    events = drive.core.events(1, [faultcore.CORRUPTED_IN_FLIGHT])
    assert [e.lba for e in events] == [5]
    assert not np.array_equal(target.read(5, 1), _block(drive, 7))


def test_a_hung_drive_answers_nothing_until_power_is_cut() -> None:
    drive, target = _drive("brownout-hang")
    drive.brownout("hang")
    with pytest.raises(OSError) as error:
        target.read(0, 1)
    assert error.value.errno == errno.ETIMEDOUT and drive.present
    drive.set_power(False)
    drive.set_power(True)
    time.sleep(drive.profile.boot_s + 0.2)
    VirtualTarget(drive).read(0, 1)  # answers again
    assert [e.kind for e in drive.core.events(1)] == [faultcore.HUNG]


def test_the_truth_says_lost_flushed_where_the_drive_saw_a_flush_the_host_cannot_claim() -> None:
    """The truth log is the drive's view: a flush that reached the drive after it acknowledged
    V1 covers V1 there, though the host stamped that flush before it saw V1 complete (its
    thread ran late), so V1 was never durable to the host. V2 written over V1, a reset drops
    both: the truth says `lost_flushed`, the checker rightly an allowed loss. Hence the
    brownout tests read the truth through the ledger, as the scorer does (docs/decisions.md,
    "Brownout tests read the truth through the ledger")."""
    drive, _ = _drive("brownout-reset")
    core, state, log = drive.core, LbaState(0, 64), CycleLog()

    def data(gens: np.ndarray) -> np.ndarray:
        return media.build(media.WriteRecord(7, 5, gens.astype(np.uint64), 0, 1, 1), 4096)

    v1_gens = state.next_generations(5, 1)
    core.write(5, data(v1_gens), fua=False)
    core.acknowledge(5, 1, data(v1_gens))  # the drive acknowledged V1 ...
    core.begin_flush()  # ... before the flush reached it
    core.complete_flush()
    log.add_write(0, 1, 5, v1_gens, 10, 30, 0, False)  # host: V1 seen complete at 30 ...
    log.add_flush(1, 20, 40, 0)  # ... after it issued the flush at 20
    v2_gens = state.next_generations(5, 1)
    core.write(5, data(v2_gens), fua=False)
    core.acknowledge(5, 1, data(v2_gens))
    log.add_write(0, 2, 5, v2_gens, 50, 60, 0, False)  # acknowledged, no flush after it
    drive.brownout("reset")
    (event,) = core.events(1, [faultcore.LOST_FLUSHED])
    assert (event.lba, event.detail["tag"]) == (5, 0)  # the drive dropped a flushed version
    durability = log.durability(100, 0)
    assert not durability.durable.any()  # the host never saw V1 durable
    result = verify.check(
        7, state, log, durability, np.array([], np.int64), lambda lba, n: core.read(lba, n), 4096
    )
    assert [f.cls for f in result.findings if f.failure] == []
    assert [f.cls for f in result.findings] == [verify.ALLOWED_LOSS] * 2
