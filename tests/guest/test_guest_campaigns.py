"""The rig, unchanged, against real kernel drivers: `rig run` inside a QEMU guest (stock Debian
kernel) with a hot-plug NVMe, an NVMe in a slot that cannot hot-plug, a SCSI disk on virtio-scsi
and a SATA disk on AHCI, each served over NBD by the fault core, their power cut by the real
firmware in simavr, reached as a USB serial adapter (FTDI) found by its USB identity.

Findings are scored against the fault core's ground truth per class and per LBA, as tests/sim
scores the loop-device twin. CI runs two cuts per drive (`RIG_GUEST_CUTS`); `-m slow`
runs 100 per drive. Timings are printed per transport (docs/simulator.md quotes them).
One guest serves the whole tier (tests/guest/conftest.py).
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
from pathlib import Path

import pytest

from fixtures.guest.machine import VENV_BIN
from fixtures.guest.station import BOARD_SERIAL, GuestStation
from rig.check import verify
from rig.store import Store
from tests import scoring
from tests.guest.conftest import STATION_DRIVES
from tests.guest.guest_helpers import (
    GuestRun,
    campaign_text,
    cut_counts,
    event_rows,
    run_campaign,
    timings,
)

CUTS = int(os.environ.get("RIG_GUEST_CUTS", "2"))
CHANNELS = [d.channel for d in STATION_DRIVES]
PROFILES = {d.channel: d.profile for d in STATION_DRIVES}
FIXED = {d.channel for d in STATION_DRIVES if d.slot.endswith("-fixed")}
HONEST = {"honest", "plp"}


def hold_open(station: GuestStation, serial: str) -> tuple[str, str]:
    """A process in the guest that keeps the drive's node open (read-only), as a monitoring
    tool might: the drive then returns under another name (nvme0n1 -> nvme0n2). Its pid and
    the node it holds."""
    assert station.guest is not None
    node = station.guest.sh(f"readlink -f /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_{serial}").stdout
    node = node.strip()
    assert node.startswith("/dev/nvme"), node
    holder = f"setsid sleep 100000 < {node} > /dev/null 2>&1 & echo $!"
    pid = station.guest.sh(holder).stdout.strip()
    assert pid.isdigit(), pid
    return pid, node


def check_campaign(run: GuestRun, channel: int, cuts: int) -> None:
    """All the drive's cuts judged, its findings exactly the truth's, honest drives clean."""
    result = run.run
    assert result.returncode in (0, 1), result.stderr[-3000:]
    station = result.rows("SELECT station FROM campaign")
    assert station == [(f"relay-board {BOARD_SERIAL}",)]  # the board found by its USB identity
    profile = PROFILES[channel]
    cycles = result.cycles(channel)
    statuses = [status for _, status, *_ in cycles]
    assert len(cycles) == cuts and statuses == ["ok"] * cuts, (
        result.rows("SELECT c.seq, c.status, c.error FROM cycle c WHERE c.status != 'ok'"),
        result.stderr[-2000:],
    )
    store = Store(str(run.db))
    try:
        truth = run.drive_truth(channel, profile)
        score = scoring.score_drive(store, channel, truth, allow_errors=False)
    finally:
        store.close()
    print(f"\nch{channel} {profile}:\n{score.table()}")
    assert score.cuts == cuts
    assert score.perfect, f"{profile}:\n{score.table()}\n" + "\n".join(score.examples)
    failures = result.rows(
        "SELECT f.class, COUNT(*) FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE f.failure = 1 AND d.channel = ?"
        " GROUP BY f.class",
        channel,
    )
    if profile in HONEST:
        assert failures == [], (profile, failures)
    assert verify.COUNTER_ANOMALY not in dict(failures), (profile, failures)
    # health was read from the real tools, and what QEMU does not count is said, not judged
    if station_bus(channel) != "scsi":  # (the SCSI disk has no SMART at all)
        health = result.rows(
            "SELECT COUNT(*) FROM health h JOIN drive d ON d.id = h.drive_id WHERE d.channel = ?",
            channel,
        )
        assert health[0][0] == cuts + 1
        said = event_rows(result, channel, "health_not_reported")
        assert said and "power_cycles" in said[0][1]["fields"], said


def station_bus(channel: int) -> str:
    return next(d.slot for d in STATION_DRIVES if d.channel == channel).split("-")[0]


def check_bus(run: GuestRun, channel: int) -> None:
    """Fixed slots: each cut left a stale node, and recovery (remove, rescan) brought the drive
    back; hot-plug slots: the kernel's own removal and return, no recovery."""
    stale = event_rows(run.run, channel, "bus_stale")
    recover = event_rows(run.run, channel, "bus_recover")
    steps = [d["step"] for _, d in recover]
    cuts = len(run.run.cycles(channel))
    if channel in FIXED:
        assert len(stale) == cuts, stale
        assert steps.count("rescan") == cuts and steps.count("remove") == cuts, steps
        assert all(d["ok"] for _, d in recover), recover
    else:
        assert not stale and not steps, (stale, steps)


def print_timings(run: GuestRun, station: GuestStation, channel: int, cuts: int) -> None:
    gone, back = timings(run.run, channel)

    def stats(values: list[float]) -> str:
        if not values:
            return "-"
        low, high = min(values), max(values)
        return f"median {statistics.median(values):.2f} s (min {low:.2f}, max {high:.2f})"

    slot = station.drives[channel].spec.slot
    print(
        f"\n{slot}: campaign {run.seconds:.0f} s in the guest ({cuts} cuts);"
        f" departure {stats(gone)}; return after power-on {stats(back)}"
    )


# Recovery waits per transport: a fixed slot's drive never returns by itself (recover it soon);
# a hot-plug one gets the time it needs with four drives at once on a loaded machine (one was
# recovered needlessly after 3 s). The NVMe wait is shared by both NVMe slots.
WAITS = "{ nvme = 20, scsi = 20, sata = 3 }"


def test_four_drives_at_once_in_the_guest_match_the_ground_truth(
    guest_station: GuestStation, guest_workdir: Path
) -> None:
    """One short campaign on all four channels at once, as a real station runs them. Four at
    once used to stall the board's USB serial link in the guest past the driver's 1 s write
    timeout, and the tier ran them one after another; now a stall costs resends, never the port
    (docs/decisions.md, "A stalled serial link costs resends, never the port")."""
    holder, held = hold_open(guest_station, "GHN0001")
    name = "guest-all"
    text = campaign_text(name, guest_station, CHANNELS, CUTS, recover_wait_s=WAITS)
    try:
        run = run_campaign(guest_station, guest_workdir, name, text)
    finally:
        assert guest_station.guest is not None
        guest_station.guest.sh(f"kill {holder}")
    for channel in CHANNELS:
        print_timings(run, guest_station, channel, CUTS)
        check_campaign(run, channel, CUTS)
        check_bus(run, channel)
    # the hot-plug NVMe came back under another name while the old one was held open, and the
    # rig followed it by identity
    nodes = {d["devnode"] for _, d in event_rows(run.run, 0, "bus_back")}
    assert nodes and held not in nodes, (held, nodes)
    assert not guest_station.errors()


@pytest.mark.slow  # 53 s of CI time; tests/sim/test_twin_station_check.py runs it in CI
def test_station_check_in_the_guest(guest_station: GuestStation, guest_workdir: Path) -> None:
    """`rig station check` inside the guest on its campaign: the board found by its USB
    identity, each channel's cut takes exactly its drive off the bus (hot-plug: the kernel
    removes it; fixed slot: it stops answering and is recovered) and brings it back."""
    assert guest_station.guest is not None
    name = "guest-check"
    path = guest_workdir / f"{name}.toml"
    path.write_text(campaign_text(name, guest_station, CHANNELS, 1, recover_wait_s=WAITS))
    before = cut_counts(guest_station)
    rig = shlex.quote(str(VENV_BIN / "rig"))
    result = guest_station.guest.sh(
        f"cd /tmp && {rig} station check {shlex.quote(str(path))} --json", 1800
    )
    assert result.rc == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["station"] == f"relay-board {BOARD_SERIAL}"
    assert report["board"]["board"] == "nano328p" and report["board"]["protocol"] == 3
    for check in report["channels"]:
        assert check["ok"] and len(check["left"]) == 1, check
        assert check["departure_s"] is not None and check["return_s"] is not None, check
    after = cut_counts(guest_station)
    # one cut per channel (two where another disk left meanwhile), and the check wrote nothing
    assert all(after[ch] - before[ch] in (1, 2) for ch in CHANNELS), (before, after)
    print("\n" + "\n".join(f"ch{c['channel']}: gone {c['departure_s']} s, back"
                             f" {c['return_s']} s" for c in report["channels"]))  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("channel", CHANNELS, ids=[d.slot for d in STATION_DRIVES])
def test_100_cuts_in_the_guest_match_the_ground_truth(
    guest_station: GuestStation, guest_workdir: Path, channel: int
) -> None:
    name = f"guest-ch{channel}-100"
    wait_s = 3.0 if channel in FIXED else 60.0
    text = campaign_text(name, guest_station, [channel], 100, seed=17, recover_wait_s=wait_s)
    run = run_campaign(guest_station, guest_workdir, name, text, timeout_s=4 * 3600)
    print_timings(run, guest_station, channel, 100)
    check_campaign(run, channel, 100)
    check_bus(run, channel)
    if PROFILES[channel] == "torn":
        truth = run.drive_truth(channel, "torn")
        assert any(e.kind == "torn" for events in truth.events.values() for e in events)


@pytest.mark.slow  # 48 s of CI time; the twin's dead-device tests run in CI
def test_a_drive_that_needs_a_rescan_is_dead_without_recovery(
    guest_station: GuestStation, guest_workdir: Path
) -> None:
    """The fixed-slot NVMe after a cut: with recover = "none" nothing brings it back and it is
    reported dead; the scored campaign above brought the same drive back by rescan every time."""
    assert guest_station.guest is not None
    text = campaign_text(
        "guest-no-recovery", guest_station, [1], 1, recover="none", return_timeout_s=20
    )
    try:
        run = run_campaign(guest_station, guest_workdir, "guest-no-recovery", text)
        cycles = run.run.cycles(1)
        assert [status for _, status, *_ in cycles] == ["dead"], (cycles, run.run.stderr[-2000:])
        assert run.run.rows("SELECT status FROM drive") == [("dead",)]
        assert len(event_rows(run.run, 1, "bus_stale")) == 1
        assert event_rows(run.run, 1, "bus_recover") == []
        dead = run.run.findings(1, verify.DEAD)
        assert dead == set() or all(seq == 1 for seq, _ in dead)
        assert run.run.returncode == 1  # a dead drive fails the run
    finally:  # bring it back by hand for whoever uses the station next
        serial = guest_station.drives[1].spec.serial
        guest_station.guest.sh(
            f"fn=$(readlink -f /sys/block/$(basename $(readlink -f"
            f" /dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_{serial}))/device/device);"
            " echo 1 > $fn/remove; echo 1 > /sys/bus/pci/rescan"
        )


def node_by_serial(station: GuestStation, serial: str) -> str:
    """The guest's node of the drive with this serial (as lsblk shows it)."""
    assert station.guest is not None
    awk = f"awk '$2 == \"{serial}\" {{print $1}}'"
    node = station.guest.sh(f"lsblk -dnpo NAME,SERIAL | {awk}").stdout.strip()
    assert node.startswith("/dev/"), (serial, node)
    return node


def python_in_guest(
    station: GuestStation, workdir: Path, name: str, script: str, args: list[str]
) -> str:
    """Run `script` with the project's venv in the guest; its stdout (it must exit 0)."""
    assert station.guest is not None
    path = workdir / f"{name}.py"
    path.write_text(script)
    python = shlex.quote(str(VENV_BIN / "python"))
    result = station.guest.sh(f"{python} {path} {' '.join(args)}", 600)
    assert result.rc == 0, result.stderr[-2000:]
    return result.stdout


# how a storage engineer discards on each transport (rig/io/discard.py)
DISCARD_KIND = {"nvme-hotplug": "nvme", "nvme-fixed": "nvme", "scsi-hotplug": "sg_unmap",
                "sata-fixed": "blkdiscard"}  # fmt: skip
# in-guest helpers of the scripts below: 0xA5 in 64 blocks of a node from block BASE, and
# reading them back; BASE lies past every campaign region of this file (region_mib = 2), so
# the bytes the probes leave are never read as a campaign's never-written blocks
PATTERN = """
import os, sys
from rig.io import blockio, discard, media
BASE = 32768  # blocks: 128 MiB into the 4096-byte drives, 16 MiB into the 512-byte one


def write_pattern(node):
    block = blockio.queue_bytes(node, "logical_block_size")
    fd = os.open(node, os.O_RDWR | os.O_DIRECT)
    data = media.aligned_buffer(64 * block)
    data[:] = 0xA5
    assert os.pwritev(fd, [data.data], BASE * block) == len(data)
    os.fsync(fd)
    return fd, block


def read_pattern(fd, block):
    back = media.aligned_buffer(64 * block)
    assert os.preadv(fd, [back.data], BASE * block) == len(back)
    return back
"""
DISCARD_SCRIPT = (
    PATTERN
    + """
for node, kind in zip(sys.argv[1::2], sys.argv[2::2]):
    fd, block = write_pattern(node)
    limit = discard.device_limit_blocks(node, block)
    discard.discard(kind, node, fd, BASE + 16, 16, block, limit)
    back = read_pattern(fd, block)
    os.close(fd)
    blocks = back.reshape(64, block)
    zero = [i for i in range(64) if not blocks[i].any()]
    kept = sum(bool((blocks[i] == 0xA5).all()) for i in range(64))
    print(node, kind, zero == list(range(16, 32)), kept)
"""
)


def test_the_rigs_discard_reaches_the_drives_through_real_drivers(
    guest_station: GuestStation, guest_workdir: Path
) -> None:
    """`nvme dsm` on QEMU's NVMe, `sg_unmap` on a virtio-scsi disk, BLKDISCARD on an AHCI
    disk: the real tools and kernel drivers, ranges cut to what the device says it takes; each
    drive (the fault core behind NBD) deallocates exactly the blocks discarded."""
    args = []
    for channel in CHANNELS:
        spec = guest_station.drives[channel].spec
        args += [node_by_serial(guest_station, spec.serial), DISCARD_KIND[spec.slot]]
    out = python_in_guest(guest_station, guest_workdir, "discard_probe", DISCARD_SCRIPT, args)
    lines = out.strip().splitlines()
    # every drive: exactly the 16 blocks discarded read zero, the other 48 kept what was written
    assert [line.split()[2:] for line in lines] == [["True", "48"]] * len(CHANNELS), lines


PURGE_SCRIPT = (
    PATTERN
    + """
from rig.health.tools import ToolRunner
from rig.station import purge
node = sys.argv[1]
fd, block = write_pattern(node)
os.close(fd)
runner = ToolRunner(timeout_s=600)
caps = purge.probe(node, "nvme", runner, purge.sysfs_discard_max_bytes(node))
method = purge.choose("auto", caps)
purge.run(method, node, runner)
fd = os.open(node, os.O_RDONLY | os.O_DIRECT)
print(method, not read_pattern(fd, block).any())
"""
)


def test_a_purge_by_format_through_nvme_cli(
    guest_station: GuestStation, guest_workdir: Path
) -> None:
    """The PTS purge as the rig runs it on a real NVMe driver: `nvme id-ctrl` says Format NVM
    is supported and sanitize is not (QEMU's controller), so `auto` formats with `nvme format
    --ses=1 --force`, and the data written before reads zero after."""
    node = node_by_serial(guest_station, guest_station.drives[0].spec.serial)  # hot-plug NVMe
    assert node.startswith("/dev/nvme"), node
    out = python_in_guest(guest_station, guest_workdir, "purge_probe", PURGE_SCRIPT, [node])
    assert out.split() == ["nvme_format", "True"], out


def test_discards_and_cuts_during_them_through_real_nvme_and_scsi_drivers(
    guest_station: GuestStation, guest_workdir: Path
) -> None:
    """A campaign that discards a quarter of its operations, cut the moment a discard is in
    flight, on the hot-plug NVMe and the SCSI disk: the rig's BLKDISCARD goes out as NVMe
    Dataset Management deallocate and SCSI UNMAP through the guest's real drivers, QEMU turns
    them into NBD_CMD_TRIM, and the fault core behind NBD deallocates; every cycle's findings
    match its ground truth (docs/checker.md, "Discards")."""
    name = "guest-discard"
    channels = [0, 2]
    text = campaign_text(name, guest_station, channels, CUTS, recover_wait_s=WAITS)
    text = text.replace("flush_every = 2\n", "flush_every = 2\ndiscard_share = 0.25\n")
    text = text.replace("[cut]\n", '[cut]\nstrategy = "during_discard"\n')
    run = run_campaign(guest_station, guest_workdir, name, text)
    for channel in channels:
        check_campaign(run, channel, CUTS)
        triggers = [d["trigger"] for _, d in event_rows(run.run, channel, "cut_scheduled")]
        assert triggers == ["discard_in_flight"] * CUTS, triggers
        ledgers = run.run.rows(
            "SELECT l.writes FROM ledger l JOIN cycle c ON c.id = l.cycle_id JOIN drive d"
            " ON d.id = c.drive_id WHERE d.channel = ?",
            channel,
        )
        issued = sum(int(scoring._ledger(blob).column("discard").sum()) for (blob,) in ledgers)
        edges = event_rows(run.run, channel, "cut_context")
        in_flight = [d["discards_in_flight"] for _, d in edges]
        print(f"\nch{channel}: {issued} discards; in flight at the edges: {in_flight}")
        assert issued > 0
    assert not guest_station.errors()
