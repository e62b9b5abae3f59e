"""Campaigns through the production CLI on the full-system twin (firmware in simavr, FUSE-served
loop devices, real udev events), scored against the simulator's ground-truth log."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.simssd import runtime
from rig.check import verify
from tests.cli_runner import rig
from tests.sim.twin_helpers import TwinRun, campaign_text, event_details, leftovers, run_twin

# 30 cuts in CI: past every profile's event (a brick at 3, every 3rd return slow); 200 with -m slow
CUTS = int(os.environ.get("RIG_TWIN_CUTS", "30"))


def check_bus_seen_every_cut(run: TwinRun, channel: int) -> None:
    """Each judged cycle: the rig recorded the drive leaving and returning, and a udev monitor
    saw a real `remove` of one of its nodes after the cut and an `add` of the node it came back
    under before the rig found it again."""
    backs = dict(
        (seq, d["devnode"]) for seq, d in event_details(run, channel, "bus_back")
    )  # fmt: skip
    # its nodes: those it came back under, and the one it had at the start (which the rig's own
    # udev event log names)
    nodes = set(backs.values()) | {d["devnode"] for _, d in event_details(run, channel, "udev")}
    for seq, status, cut, gone, back in run.cycles(channel):
        if status != "ok":
            continue
        assert cut is not None and gone is not None and back is not None, seq
        assert cut - 50_000_000 < gone < back, seq
        window = [e for e in run.udev if cut - 50_000_000 < e[0] < back + 500_000_000]
        assert any(a == "remove" and n in nodes for _, a, n in window), seq
        assert any(a == "add" and n == backs[seq] for _, a, n in window), seq


def pin_offs(run: TwinRun, channel: int) -> list[int]:
    """mono_ns of every power-off edge of a channel's relay pin, from the bridge."""
    found = []
    for line in run.pins:
        fields = dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)
        if line.startswith("pin ") and fields["ch"] == str(channel) and fields["on"] == "0":
            found.append(int(fields["mono_ns"]))
    return found


def no_failures(run: TwinRun, channel: int) -> list[tuple[int, str]]:
    return run.rows(
        "SELECT c.seq, f.class FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE d.channel = ? AND f.failure = 1",
        channel,
    )


def cuts_are_cycles(run: TwinRun, channel: int) -> None:
    """Every cycle cut power once, and the simulator saw exactly those edges: its cut k is the
    rig's cycle k (so truth events pair with cycles by their cut number)."""
    offs = pin_offs(run, channel)
    cuts = run.rows(
        "SELECT c.cut_ns, c.cut_error_ns FROM cycle c JOIN drive d ON d.id = c.drive_id"
        " WHERE d.channel = ? ORDER BY c.seq",
        channel,
    )
    assert len(offs) == len(cuts), (channel, len(offs), len(cuts))
    # Within the rig's `cut_error_ns` plus 100 ms: under load the drive's edge falls outside that
    # interval now and then, either side (12 of 1277 cuts, up to 45 ms beyond it: docs/simulator.md,
    # known limits); zero rig ERRORs is asserted separately.
    for seq, (off, (cut, error)) in enumerate(zip(offs, cuts, strict=True), 1):
        assert abs(off - cut) <= error + 100_000_000, (channel, seq, off - cut, error)
    assert {e["edge_ns"] for e in run.truth if e["channel"] == channel} <= set(offs), channel


def truth_cuts(run: TwinRun, channel: int, kind: str) -> list[int]:
    return sorted(e["cut"] for e in run.truth if e["channel"] == channel and e["kind"] == kind)


def statuses(run: TwinRun, channel: int) -> list[tuple[int, str, str]]:
    return run.rows(
        "SELECT c.seq, c.status, c.error FROM cycle c JOIN drive d ON d.id = c.drive_id"
        " WHERE d.channel = ? ORDER BY c.seq",
        channel,
    )


# The one rig ERROR the twin is known to cause: on a loaded host the simulated MCU's clock lags
# the wall clock, its edge falls after the rig's mapped cut, and writes succeed after "the cut"
# (docs/simulator.md, known limits; docs/known-issues.md, "The simavr twin lags under heavy
# load"). The rig rightly refuses to judge such a cut.
TWIN_CLOCK_LAG = "a write issued after the cut succeeded"


def all_ok(run: TwinRun, channel: int, cuts: int) -> set[int]:
    """Every cycle of the channel judged, but for at most one in 20 rig ERRORs of the known
    twin cause; returns those cycles."""
    rows = statuses(run, channel)
    bad = [row for row in rows if row[1] != "ok"]
    assert len(rows) == cuts, (channel, len(rows), run.stderr[-3000:])
    assert len(bad) <= max(1, cuts // 20), (channel, bad)
    assert all(row[1] == "error" and TWIN_CLOCK_LAG in row[2] for row in bad), (channel, bad)
    return {row[0] for row in bad}


def test_lifecycle_profiles(tmp_path: Path, twin: None) -> None:
    lifecycle_profiles(tmp_path, CUTS)


@pytest.mark.slow
def test_lifecycle_profiles_200_cuts(tmp_path: Path, twin: None) -> None:
    lifecycle_profiles(tmp_path, 200)


def lifecycle_profiles(tmp_path: Path, cuts: int) -> None:
    profiles = ["brick", "renumber", "slow-return", "lying-smart"]
    run = run_twin(tmp_path, campaign_text("life", profiles, cuts))
    assert run.returncode == 1, run.stderr  # a dead device, counter anomalies
    # brick: dies at its 3rd cut exactly; reported as a dead device there; only its channel stops
    assert truth_cuts(run, 0, "died") == [3]
    assert statuses(run, 0) == [
        (1, "ok", ""),
        (2, "ok", ""),
        (3, "dead", "observe_return: did not return within 15 s of power-on"),
    ]
    assert run.rows("SELECT status FROM drive WHERE channel = 0") == [("dead",)]
    assert no_failures(run, 0) == [(3, verify.DEAD)]
    cuts_are_cycles(run, 0)
    errors = {}
    for channel in (1, 2, 3):
        errors[channel] = all_ok(run, channel, cuts)
        cuts_are_cycles(run, channel)
        check_bus_seen_every_cut(run, channel)
    # renumber: back under another node after every cut, found by identity, nothing wrong
    nodes = [d["devnode"] for _, d in sorted(event_details(run, 1, "bus_back"))]
    assert len(nodes) == cuts and all(a != b for a, b in itertools.pairwise(nodes))
    assert no_failures(run, 1) == []
    # slow return: exactly every 3rd power-on is slow (truth); the rig, waiting by events, saw
    # each of those back no sooner than the model's delay after the power-on edge
    slow = {e["cut"]: e["detail"] for e in run.truth if e["channel"] == 2}
    slow = {cut: d for cut, d in slow.items() if "delay_ms" in d}
    assert sorted(slow) == list(range(3, cuts + 1, 3))
    powered = dict(
        (seq, ns)
        for seq, ns in run.rows(
            "SELECT c.seq, e.host_ns FROM event e JOIN cycle c ON c.id = e.cycle_id"
            " JOIN drive d ON d.id = c.drive_id WHERE d.channel = 2 AND e.kind = 'power_on'"
        )
    )  # fmt: skip
    for seq, _, _, _, back in run.cycles(2):
        assert back is not None and back - powered[seq] > 0, seq
        if seq in slow:
            assert abs(powered[seq] - slow[seq]["power_on_ns"]) < 200_000_000, seq
            assert back - slow[seq]["power_on_ns"] >= slow[seq]["delay_ms"] * 1_000_000, seq
    assert no_failures(run, 2) == []
    # lying SMART: a counter anomaly in exactly the cycles whose cut the model did not count
    # (every one), naming that counter; none on the honest drives. A rig ERROR cycle judges no
    # counter, and the reading after it is a new baseline (docs/campaign.md): neither has one.
    lied = truth_cuts(run, 3, "smart_lied")
    assert lied == list(range(1, cuts + 1))
    lied = [cut for cut in lied if not {cut, cut - 1} & errors[3]]
    anomalies = [
        (seq, json.loads(detail)["field"])
        for seq, detail in run.rows(
            "SELECT c.seq, f.detail FROM finding f JOIN cycle c ON c.id = f.cycle_id"
            " JOIN drive d ON d.id = c.drive_id WHERE d.channel = 3 AND f.failure = 1"
            " ORDER BY c.seq"
        )
    ]
    assert anomalies == [(cut, "unsafe_shutdowns") for cut in lied]
    assert {cls for _, cls in no_failures(run, 3)} == {verify.COUNTER_ANOMALY}
    assert not any(e["kind"] == "smart_lied" for e in run.truth if e["channel"] != 3)


def test_shrinks_and_read_only(tmp_path: Path, twin: None) -> None:
    shrinks_and_read_only(tmp_path, CUTS)


@pytest.mark.slow
def test_shrinks_and_read_only_200_cuts(tmp_path: Path, twin: None) -> None:
    shrinks_and_read_only(tmp_path, 200)


def shrinks_and_read_only(tmp_path: Path, cuts: int) -> None:
    run = run_twin(tmp_path, campaign_text("shrink", ["shrinks", "read-only"], cuts))
    assert run.returncode == 1, run.stderr  # each change of the drive is a read_error finding
    changes = {}
    for channel in (0, 1):
        all_ok(run, channel, cuts)
        cuts_are_cycles(run, channel)
        check_bus_seen_every_cut(run, channel)
        failures = run.rows(
            "SELECT c.seq, f.class, f.detail FROM finding f JOIN cycle c ON c.id = f.cycle_id"
            " JOIN drive d ON d.id = c.drive_id WHERE d.channel = ? AND f.failure = 1",
            channel,
        )
        changes[channel] = [(seq, cls, json.loads(detail)) for seq, cls, detail in failures]
    acked = {
        channel: run.rows(
            "SELECT c.seq, c.writes, c.writes_acked FROM cycle c JOIN drive d"
            " ON d.id = c.drive_id WHERE d.channel = ? ORDER BY c.seq",
            channel,
        )
        for channel in (0, 1)
    }
    # shrinks: half its capacity from its 3rd cut, reported once, in that cycle, with both
    # sizes, by the bus (identify) and by the health answer; the test region (4 MiB at 0) lies
    # inside what is left, so the drive goes on taking writes and nothing is lost
    assert truth_cuts(run, 0, "capacity_changed") == [3]
    (truth,) = [e["detail"] for e in run.truth if e["kind"] == "capacity_changed"]
    before, after = truth["from_blocks"] * 4096, truth["to_blocks"] * 4096
    assert sorted((seq, cls, d.get("kind") or d["field"]) for seq, cls, d in changes[0]) == [
        (3, verify.COUNTER_ANOMALY, "capacity_bytes"),
        (3, verify.READ_ERROR, "capacity_changed"),
    ]
    for _, _, detail in changes[0]:
        assert (
            detail.get("bytes_before", detail.get("before")),
            detail.get("bytes_after", detail.get("after")),
        ) == (before, after)
    assert all(w > 0 for _, w, _ in acked[0])  # (a cut can fall before the first ack)
    assert sum(a for seq, _, a in acked[0] if seq > 3) > cuts - 3  # about 5 a cycle
    # read-only from its 4th cut: it comes back (found by identity, same node) write-protected,
    # reported once by the bus and by its health answer (critical warning bit 3, SMART failed),
    # and takes no write any more (failed writes are not acknowledged: no loss)
    assert truth_cuts(run, 1, "read_only") == [4]
    assert sorted((seq, cls, d.get("kind") or d["field"]) for seq, cls, d in changes[1]) == [
        (4, verify.COUNTER_ANOMALY, "critical_warning"),
        (4, verify.COUNTER_ANOMALY, "smart_passed"),
        (4, verify.READ_ERROR, "read_only"),
    ]
    assert sum(a for seq, _, a in acked[1] if seq <= 4) > 0
    assert all(w > 0 and a == 0 for seq, w, a in acked[1] if seq > 4)


def test_clean_sim_after_kill_9_of_a_twin_run(tmp_path: Path, twin: None) -> None:
    # The demo's drive profiles with this process's own identities: two demos at once (another
    # session's) refuse each other's drives and end at once, leaving nothing to kill.
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(campaign_text("kill9", ["plp", "lying-flush", "torn"], 50))
    output = tmp_path / "rig.out"
    with output.open("wb") as sink:
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rig.interface.cli",
                "run",
                str(campaign),
                "--db",
                str(tmp_path / "db"),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: rig, simulator daemon, simavr bridge
        )
    try:
        deadline = time.monotonic() + 60
        mine: list[Path] = []
        while time.monotonic() < deadline and not mine and run.poll() is None:
            mine = [
                d
                for d in runtime.directories()
                if runtime.read_pid(d / "owner.pid") == run.pid and (d / "ready.json").exists()
            ]
            time.sleep(0.1)
        assert mine, (
            f"the rig's simulator did not start (rig exit status {run.poll()}): "
            f"{output.read_text()[-3000:]}"
        )
        time.sleep(1)  # the campaign under way: drives being cut and returning
        pids = [runtime.read_pid(mine[0] / n) for n in ("daemon.pid", "bridge.pid")]
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert leftovers(mine[0]), "a SIGKILL of everything must leave the simulator's things behind"
    result = rig("clean-sim", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"removed {mine[0]}" in result.stdout
    assert leftovers(mine[0]) == []
    # every thread gone: a daemon thread stuck on its own FUSE mount keeps the process (and its
    # /dev/fuse) alive after its main thread died, which `alive` alone does not see
    assert all(runtime.exited(pid) for pid in pids)
