"""Campaigns through the guest station (fixtures/guest): `rig run` inside the guest, the store
copied out to the host, and the fault core's ground truth of that campaign's cuts, numbered from
1 like its cycles (one station serves several campaigns: its drives' cut counts run on)."""

from __future__ import annotations

import json
import shlex
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixtures.guest.drive import GuestDriveSpec
from fixtures.guest.machine import VENV_BIN
from fixtures.guest.station import BOARD_SERIAL, GuestStation
from fixtures.simssd.twin import read_truth
from tests import scoring
from tests.sim.twin_helpers import TwinRun

GUEST_TMP = "/tmp/rig-guest-tier"  # in the guest: its own tmpfs (SQLite wants a local disk)
# The board's host-silence watchdog: under TCG on a loaded machine (loads of 20-25) the guest's
# USB serial link has stalled for more than the default 5 s with four drives at once; the driver
# rides a stall out for longer than the watchdog (docs/decisions.md, "A stalled serial link
# costs resends, never the port"), and a tripped watchdog makes
# the cycle a rig error. 30 s still bounds how long a drive stays as it is if the rig dies.
WATCHDOG_MS = 30_000


def drive_stanza(spec: GuestDriveSpec, station: GuestStation) -> str:
    """Names the drive as `rig drives --stanza` would: SCSI and SATA by WWN, QEMU's NVMe (no
    EUI-64) by serial and model."""
    drive = station.drives[spec.channel]
    if drive.wwn:
        return f'[[drive]]\nchannel = {spec.channel}\nwwn = "{drive.wwn}"\n'
    return (
        f'[[drive]]\nchannel = {spec.channel}\nmodel = "{drive.identity.model}"\n'
        f'serial = "{spec.serial}"\n'
    )


def campaign_text(
    name: str,
    station: GuestStation,
    channels: list[int],
    cycles: int,
    *,
    recover: str = "rescan",
    recover_wait_s: float | str = 3.0,  # seconds, or a TOML table per transport
    seed: int = 5,
    return_timeout_s: float = 90.0,
    health_every: int = 1,
) -> str:
    """A small region scanned in full after every cut (every injected fault is observable),
    timeouts sized for a TCG guest on a loaded 2-core machine."""
    drives = "".join(drive_stanza(station.drives[ch].spec, station) for ch in channels)
    return f"""
[campaign]
name = "{name}"
cycles = {cycles}
seed = {seed}
region_mib = 2
[station]
kind = "relay-board"
usb_serial = "{BOARD_SERIAL}"
watchdog_ms = {WATCHDOG_MS}
recover = "{recover}"
recover_wait_s = {recover_wait_s}
[workload]
workers = 3
write_blocks = [1, 2, 4]
flush_every = 2
[cut]
delay_ms = [20, 250]
off_ms = 200
gone_timeout_s = 60
return_timeout_s = {return_timeout_s}
sample_blocks = 0
full_scan_every = 1
read_timeout_s = 60
[health]
every = {health_every}
{drives}"""


@dataclass
class GuestRun:
    """One campaign's results on the host: the store (`run`, a TwinRun of the loop-twin tests),
    the truth of its cuts per channel, and the guest's clock offset."""

    run: TwinRun
    db: Path
    truth: list[dict[str, Any]]
    persisted: dict[str, Any]
    offset_ns: int  # guest CLOCK_MONOTONIC - host CLOCK_MONOTONIC
    seconds: float

    def drive_truth(self, channel: int, profile: str) -> scoring.DriveTruth:
        """The campaign's truth of one channel, each event paired with the rig's cycle by its
        edge on the host clock (the rig's cut instants are on the guest's clock)."""
        edges = {
            seq: cut - self.offset_ns
            for seq, _, cut, _, _ in self.run.cycles(channel)
            if cut is not None
        }
        return scoring.DriveTruth.of_twin(profile, channel, self.truth, self.persisted, edges)


def cut_counts(station: GuestStation) -> dict[int, int]:
    """Power losses of each channel's drive so far, by its truth interface."""
    return {channel: drive.model.cuts() for channel, drive in station.drives.items()}


def run_campaign(
    station: GuestStation, workdir: Path, name: str, text: str, timeout_s: float = 1800
) -> GuestRun:
    """`rig run` in the guest, unchanged (relay-board station, board found by USB identity)."""
    assert station.guest is not None
    before = cut_counts(station)
    truth_start = len(read_truth(station.truth_path))
    (workdir / f"{name}.toml").write_text(text)
    offset, _ = station.guest.clock_offset()
    started = time.monotonic()
    db = f"{GUEST_TMP}/{name}.sqlite"
    rig = shlex.quote(str(VENV_BIN / "rig"))
    script = (
        f"mkdir -p {GUEST_TMP} && cd {GUEST_TMP} && "
        f"{rig} run {shlex.quote(str(workdir / f'{name}.toml'))} --db {db} --quiet; rc=$?; "
        f"cp {db} {GUEST_TMP}/{name}.log.jsonl {shlex.quote(str(workdir))}/ ; exit $rc"
    )
    result = station.guest.sh(script, timeout_s)
    seconds = time.monotonic() - started
    (workdir / f"{name}.stderr").write_text(result.stderr)  # beside the store, for a failure
    for drive in station.drives.values():
        drive.write_truth()
    local = workdir / f"{name}.sqlite"
    assert local.exists(), f"rig run in the guest left no store: {result.stderr[-3000:]}"
    truth = renumber(read_truth(station.truth_path)[truth_start:], before)
    persisted = {
        str(ch): {
            str(int(cut) - before[ch]): blocks
            for cut, blocks in drive.persisted().items()
            if int(cut) > before[ch]
        }
        for ch, drive in station.drives.items()
    }
    run = TwinRun(
        sqlite3.connect(local), truth, station.pins(), result.rc, result.stdout, result.stderr
    )
    return GuestRun(run, local, truth, persisted, offset, seconds)


def renumber(truth: list[dict[str, Any]], before: dict[int, int]) -> list[dict[str, Any]]:
    """Truth events of cuts after `before` (per channel), renumbered from 1."""
    out = []
    for row in truth:
        first = before.get(row["channel"], 0)
        if row["cut"] > first:
            out.append({**row, "cut": row["cut"] - first})
    return out


def event_rows(run: TwinRun, channel: int, kind: str) -> list[tuple[int, dict[str, Any]]]:
    rows = run.rows(
        "SELECT c.seq, e.detail FROM event e JOIN cycle c ON c.id = e.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE d.channel = ? AND e.kind = ? ORDER BY e.id",
        channel,
        kind,
    )
    return [(seq, json.loads(detail)) for seq, detail in rows]


def timings(run: TwinRun, channel: int) -> tuple[list[float], list[float]]:
    """Per cycle judged, in the guest: seconds from the cut to the drive seen gone, and from
    power-on to the drive back on the bus."""
    gone, back = [], []
    cycles = run.rows(
        "SELECT c.id, c.cut_ns, c.gone_ns, c.back_ns FROM cycle c JOIN drive d"
        " ON d.id = c.drive_id WHERE d.channel = ? AND c.status = 'ok'",
        channel,
    )
    for cycle_id, cut_ns, gone_ns, back_ns in cycles:
        on = run.rows(
            "SELECT host_ns FROM event WHERE cycle_id = ? AND kind = 'power_on'", cycle_id
        )
        if cut_ns and gone_ns:
            gone.append((gone_ns - cut_ns) / 1e9)
        if on and back_ns:
            back.append((back_ns - on[0][0]) / 1e9)
    return gone, back
