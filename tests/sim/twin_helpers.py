"""Running campaigns on the full-system twin through the production CLI, and scoring them
against the simulator's ground-truth log."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyudev

from fixtures import loopctl
from fixtures.simssd import runtime, writelog
from fixtures.simssd.bus import read_bus_log
from fixtures.simssd.cleanup import unbound_nodes
from fixtures.simssd.twin import read_truth
from tests.cli_runner import rig

DRIVE = """
[[drive]]
channel = {channel}
model = "{model}"
serial = "TW{channel}{profile_tag}{run}"
wwn = "0x5000c5{run:06x}{channel:04x}"
profile = "{profile}"
"""


def campaign_text(
    name: str,
    profiles: list[str],
    cycles: int,
    health_every: int = 1,
    *,
    label: str = "twin",
    seed: int = 11,
    region_mib: int = 4,
    flush_every: int = 1,
    delay_ms: tuple[float, float] = (3, 25),
    check: str = "sample_blocks = 64",
    health: str | None = None,
    station: str = "",
    stop: str = "",
) -> str:
    """Identities unique to this test process and `label`: other test sessions on the machine may
    run simulators at the same time, and two drives answering to one identity are refused.
    `check`: the [cut] keys that set what the checker reads after each cut. `health`: the
    [health] table's body (None: `every = health_every`; "": no [health] table at all).
    `station`, `stop`: more keys of [station], the body of [stop]."""
    tag = "" if label == "twin" else label[:1].upper()
    drives = "".join(
        DRIVE.format(
            run=os.getpid() % 1_000_000,
            channel=i,
            profile=p,
            model=f"RIGSIM {label} {p}",
            profile_tag=(tag + p.upper().replace("-", "").replace("+", ""))[:8],
        )
        for i, p in enumerate(profiles)
    )
    health = f"every = {health_every}" if health is None else health
    health_table = f"[health]\n{health}\n" if health else ""
    stop_table = f"[stop]\n{stop}\n" if stop else ""
    return f"""
[campaign]
name = "{name}"
cycles = {cycles}
seed = {seed}
region_mib = {region_mib}
[station]
kind = "simulated"
twin = "simavr"
{station}
[workload]
workers = 3
write_blocks = [1, 2, 4]
flush_every = {flush_every}
[cut]
delay_ms = [{delay_ms[0]}, {delay_ms[1]}]
off_ms = 5
gone_timeout_s = 10
return_timeout_s = 15  # udev has taken over 4 s to show a return on this loaded 2-core VM
{check}
{health_table}{stop_table}{drives}"""


@dataclass
class TwinRun:
    db: sqlite3.Connection
    truth: list[dict[str, Any]]
    pins: list[str]
    returncode: int
    stdout: str
    stderr: str
    udev: list[tuple[int, str, str]] = field(default_factory=list)  # (mono ns, action, node)

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, args).fetchall()

    def cycles(self, channel: int) -> list[tuple[int, str, int | None, int | None, int | None]]:
        """(seq, status, cut_ns, gone_ns, back_ns) of one channel's cycles."""
        return self.rows(
            "SELECT c.seq, c.status, c.cut_ns, c.gone_ns, c.back_ns FROM cycle c"
            " JOIN drive d ON d.id = c.drive_id WHERE d.channel = ? ORDER BY c.seq",
            channel,
        )

    def findings(self, channel: int, cls: str) -> set[tuple[int, int]]:
        rows = self.rows(
            "SELECT c.seq, f.lba_first, f.lba_count FROM finding f JOIN cycle c"
            " ON c.id = f.cycle_id JOIN drive d ON d.id = c.drive_id"
            " WHERE d.channel = ? AND f.class = ? AND c.status = 'ok'",
            channel,
            cls,
        )
        return {(seq, first + i) for seq, first, count in rows for i in range(count)}

    def cut_to_cycle(self, channel: int) -> dict[int, int]:
        """The simulator's cut number -> the rig's cycle, paired by the edge time: the pin
        edge the simulator saw lies within 200 ms of the cut instant the rig measured."""
        cycles = [(seq, cut) for seq, _, cut, _, _ in self.cycles(channel) if cut is not None]
        pairs: dict[int, int] = {}
        for event in self.truth:
            if not cycles or event["channel"] != channel or event["cut"] in pairs:
                continue
            seq, cut = min(cycles, key=lambda c: abs(c[1] - event["edge_ns"]))
            if abs(cut - event["edge_ns"]) < 200_000_000:
                pairs[event["cut"]] = seq
        return pairs

    def truth_blocks(self, channel: int, kind: str) -> set[tuple[int, int]]:
        """(cycle, lba) of every block the model did `kind` to, in cycles the rig judged."""
        pairs = self.cut_to_cycle(channel)
        ok = {seq for seq, status, *_ in self.cycles(channel) if status == "ok"}
        return {
            (pairs[e["cut"]], e["lba"])
            for e in self.truth
            if e["channel"] == channel
            and e["kind"] == kind
            and e["cut"] in pairs
            and pairs[e["cut"]] in ok
        }

    def first_error(self, channel: int) -> int:
        """The first cycle that was not judged (a rig ERROR), or a number past the last."""
        cycles = self.cycles(channel)
        bad = [seq for seq, status, *_ in cycles if status == "error"]
        return min(bad) if bad else len(cycles) + 1


class UdevLog:
    """Every block-device uevent udevd sends while the campaign runs, on our own monitor."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str, str]] = []
        self._monitor = pyudev.Monitor.from_netlink(pyudev.Context())
        self._monitor.filter_by("block")
        self._monitor.start()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            device = self._monitor.poll(timeout=0.2)
            if device is not None:
                self.events.append((time.monotonic_ns(), device.action, device.device_node or ""))

    def stop(self) -> list[tuple[int, str, str]]:
        self._stop.set()
        self._thread.join(5)
        return self.events


def run_twin(
    tmp_path: Path, text: str, env: dict[str, str] | None = None, quiet: bool = True
) -> TwinRun:
    path = tmp_path / "twin.toml"
    path.write_text(text)
    db = tmp_path / "twin.sqlite"
    log = UdevLog()
    args = ["run", str(path), "--db", str(db), *(["--quiet"] if quiet else [])]
    try:
        result = rig(*args, cwd=tmp_path, timeout_s=1200, env=env)
    finally:
        events = log.stop()
    # a refused start leaves no store (docs/campaign.md, "What a refusal leaves"): an empty one
    # in memory stands in for it
    assert db.exists() or result.returncode == 2, result.stderr
    return TwinRun(
        sqlite3.connect(db if db.exists() else ":memory:"),
        read_truth(db.with_suffix(".truth.jsonl")),
        (db.with_suffix(".truth.pins.log")).read_text().splitlines()
        if db.with_suffix(".truth.pins.log").exists()
        else [],
        result.returncode,
        result.stdout,
        result.stderr,
        events,
    )


def leftovers(directory: Path) -> list[str]:
    """What one simulator made that still exists: its runtime dir, loops, mount, rule file.
    (Other simulators may be running on this machine: only this one's things count.)"""
    found = [str(directory)] if directory.exists() else []
    for index in loopctl.indices():
        if loopctl.backing_file(index).startswith(f"{directory}/"):
            found.append(f"/dev/loop{index}")
    with open("/proc/self/mounts") as handle:
        found += [line.split()[1] for line in handle if line.split()[1].startswith(str(directory))]
    if runtime.rules_path(directory).exists():
        found.append(str(runtime.rules_path(directory)))
    if not runtime.others_running(directory):  # (else unbound nodes may be another's)
        found += [f"/dev/loop{index} (unbound)" for index in unbound_nodes()]
    return found


def event_details(run: TwinRun, channel: int, kind: str) -> list[tuple[int, dict[str, Any]]]:
    rows = run.rows(
        "SELECT c.seq, e.detail FROM event e JOIN cycle c ON c.id = e.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE d.channel = ? AND e.kind = ?",
        channel,
        kind,
    )
    return [(seq, json.loads(detail)) for seq, detail in rows]


def image_writes(tmp_path: Path) -> dict[str, list[writelog.ReceivedWrite]]:
    """Every write each image of the twin received, from the simulator's own log."""
    return writelog.logs(tmp_path / "twin.truth.writes")


def bus_events(tmp_path: Path) -> list[dict[str, Any]]:
    """What the twin did to the bus (fixtures/simssd/bus.py)."""
    return read_bus_log(tmp_path / "twin.truth.bus.jsonl")


def ledger_keys(run: TwinRun, channel: int) -> set[tuple[int, int]]:
    """(first LBA, issue ns) of every write the rig's ledger holds for a channel's drive."""
    keys: set[tuple[int, int]] = set()
    for (blob,) in run.rows(
        "SELECT l.writes FROM ledger l JOIN cycle c ON c.id = l.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE d.channel = ?",
        channel,
    ):
        with np.load(io.BytesIO(blob)) as npz:
            keys |= set(zip(npz["first_lba"].tolist(), npz["issue_ns"].tolist(), strict=True))
    return keys


def misdirected_writes(run: TwinRun, tmp_path: Path) -> dict[str, int]:
    """Per image, the writes it received that are not its own drive's: any write at all to an
    image the campaign did not name (a foreign disk), and writes to a campaign drive's image that
    its own channel's ledger does not hold (first LBA and issue time, from the record headers)
    or that carry another campaign id. Empty when every byte went where the rig meant it to."""
    (media_id,) = run.rows("SELECT media_id FROM campaign")[0]
    channels = {f"{serial}.img": ch for ch, serial in run.rows("SELECT channel, serial FROM drive")}
    wrong: dict[str, int] = {}
    for image, writes in image_writes(tmp_path).items():
        if image not in channels:
            count = len(writes)
        else:
            keys = ledger_keys(run, channels[image])
            count = sum(
                1 for w in writes if w.campaign != media_id or (w.first_lba, w.issue_ns) not in keys
            )
        if count:
            wrong[image] = count
    return wrong


def wrong_adoptions(run: TwinRun, tmp_path: Path) -> list[tuple[int, int, str, str]]:
    """Every node a channel adopted (`bus_back`, `reacquired`) that did not hold that channel's
    drive at that moment, by the simulator's own record of which drive was attached where
    (`attached` / `detached` in its bus log, same clock): (channel, cycle, node, holder)."""
    history: dict[int, list[tuple[int, str]]] = {}
    for event in bus_events(tmp_path):
        if event["kind"] in ("attached", "detached"):
            held = f"ch{event['channel']}" if event["kind"] == "attached" else "nobody"
            history.setdefault(int(event["node"]), []).append((int(event["mono_ns"]), held))
    wrong = []
    for channel, seq, host_ns, detail in run.rows(
        "SELECT d.channel, c.seq, e.host_ns, e.detail FROM event e JOIN cycle c"
        " ON c.id = e.cycle_id JOIN drive d ON d.id = c.drive_id"
        " WHERE e.kind IN ('bus_back', 'reacquired')"
    ):
        devnode = json.loads(detail)["devnode"]
        node = int(devnode.removeprefix("/dev/loop"))
        before = [held for at, held in history.get(node, []) if at <= host_ns]
        holder = before[-1] if before else "nobody"
        if holder != f"ch{channel}":
            wrong.append((channel, seq, devnode, holder))
    return wrong
