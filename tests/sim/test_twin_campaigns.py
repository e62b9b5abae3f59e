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
from rig import verify
from tests.cli_runner import rig
from tests.sim.twin_helpers import TwinRun, campaign_text, event_details, leftovers, run_twin

CUTS = int(os.environ.get("RIG_TWIN_CUTS", "50"))


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


def judged_before_first_error(run: TwinRun, channel: int, blocks: set[tuple[int, int]]) -> set:
    """A rig ERROR leaves that cycle's writes unjudged; compare only the cycles before it."""
    first = run.first_error(channel)
    return {(seq, lba) for seq, lba in blocks if seq < first}


def test_data_path_profiles_match_the_ground_truth(tmp_path: Path, twin: None) -> None:
    data_path_profiles(tmp_path, CUTS)


@pytest.mark.slow
def test_data_path_profiles_200_cuts(tmp_path: Path, twin: None) -> None:
    data_path_profiles(tmp_path, 200)


def data_path_profiles(tmp_path: Path, cuts: int) -> None:
    profiles = ["plp", "honest", "torn", "lying-flush"]
    run = run_twin(tmp_path, campaign_text("data", profiles, cuts))
    assert run.returncode == 1, run.stderr  # drives failed (torn, lying flush)
    for channel in range(4):
        cycles = run.cycles(channel)
        assert len(cycles) == cuts
        errors = [seq for seq, status, *_ in cycles if status != "ok"]
        assert len(errors) <= cuts // 10, (channel, errors)  # rig errors stay rare
        check_bus_seen_every_cut(run, channel)
        # every cut the rig made is an edge the simulator saw on the drive's relay pin
        offs = pin_offs(run, channel)
        cuts_ns = [cut for _, _, cut, _, _ in cycles if cut is not None]
        assert len(offs) == len(cuts_ns)
        assert all(abs(a - b) < 200_000_000 for a, b in zip(offs, cuts_ns, strict=True))
    # honest and PLP drives: no failure at all, though the honest cache lost unflushed writes
    assert no_failures(run, 0) == [] and no_failures(run, 1) == []
    assert any(e["kind"] == "destaged_on_power_loss" for e in run.truth if e["channel"] == 0)
    assert any(e["kind"] == "lost_unflushed" for e in run.truth if e["channel"] == 1)
    # torn: every torn block is found as a shorn write, at its LBA in its cycle, and no other
    torn = judged_before_first_error(run, 2, run.truth_blocks(2, "torn"))
    shorn = judged_before_first_error(run, 2, run.findings(2, verify.SHORN))
    assert torn and shorn == torn
    failing = {cls for _, cls in no_failures(run, 2) if _ < run.first_error(2)}
    assert failing == {verify.SHORN}
    # lying flush: every lost durable block is one the model lost after a flush
    lost = judged_before_first_error(run, 3, run.findings(3, verify.LOST_DURABLE))
    flushed = run.truth_blocks(3, "lost_flushed")
    assert lost and lost <= flushed
    assert not (run.findings(3, verify.SHORN) | run.findings(3, verify.CORRUPTION))


def test_lifecycle_profiles(tmp_path: Path, twin: None) -> None:
    profiles = ["brick", "renumber", "slow-return", "lying-smart"]
    cycles = max(12, CUTS // 3)
    run = run_twin(tmp_path, campaign_text("life", profiles, cycles))
    assert run.returncode == 1, run.stderr
    # brick: dies at its 3rd cut; reported as a dead device; only its channel stops
    died = [e for e in run.truth if e["channel"] == 0 and e["kind"] == "died"]
    assert [e["cut"] for e in died] == [3]
    brick = run.cycles(0)
    assert brick[-1][0] == 3 and brick[-1][1] == "dead"
    assert run.rows("SELECT status FROM drive WHERE channel = 0") == [("dead",)]
    assert (3, verify.DEAD) in no_failures(run, 0)
    for channel in (1, 2, 3):
        assert len(run.cycles(channel)) == cycles
    # renumber: back under another node after every cut, found by identity, nothing wrong
    nodes = [d["devnode"] for _, d in sorted(event_details(run, 1, "bus_back"))]
    assert len(nodes) >= cycles - 2 and all(a != b for a, b in itertools.pairwise(nodes))
    assert no_failures(run, 1) == []
    check_bus_seen_every_cut(run, 1)
    # slow return: every 3rd power-on takes 1.5 s more; the rig waits for it by events
    slow = {e["cut"] for e in run.truth if e["channel"] == 2 and e["kind"] == "slow_return"}
    judged = [c for c in run.cycles(2) if c[1] != "error"]  # a rig ERROR (simavr lag) says nothing
    assert len(judged) >= cycles - 2 and all(status == "ok" for _, status, _, _, _ in judged)
    for seq, _, cut, _, back in judged:
        assert cut is not None and back is not None
        assert (back - cut > 1_500_000_000) == (seq in slow), seq
    assert no_failures(run, 2) == []
    # lying SMART: its unsafe-shutdown counter never moves (a counter anomaly); honest ones do
    anomalies = {seq for seq, cls in no_failures(run, 3) if cls == verify.COUNTER_ANOMALY}
    assert anomalies
    assert not any(
        cls == verify.COUNTER_ANOMALY for ch in (1, 2) for _, cls in no_failures(run, ch)
    )


def test_weak_plp_and_read_only_return(tmp_path: Path, twin: None) -> None:
    profiles = ["weak-plp", "read-only"]
    run = run_twin(tmp_path, campaign_text("weak", profiles, 10, health_every=0))
    # weak PLP: its hold-up energy ran out with flushed data in the cache: lost durable writes,
    # each one a block the model lost after a flush
    lost = judged_before_first_error(run, 0, run.findings(0, verify.LOST_DURABLE))
    assert lost and lost <= run.truth_blocks(0, "lost_flushed"), (run.cycles(0), run.stderr[-2000:])
    assert any(e["kind"] == "destaged_on_power_loss" for e in run.truth if e["channel"] == 0)
    # read-only from its 4th cut: it comes back (found by identity, same node) write-protected,
    # reported once as metadata loss, and takes no write any more
    assert [e["cut"] for e in run.truth if e["kind"] == "read_only"] == [4]
    protected = run.rows(
        "SELECT c.seq, f.detail FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE d.channel = 1 AND f.class = 'read_error'"
    )
    assert [(seq, json.loads(detail)["kind"]) for seq, detail in protected] == [(4, "read_only")]
    acked = run.rows(
        "SELECT c.seq, c.writes, c.writes_acked FROM cycle c JOIN drive d ON d.id = c.drive_id"
        " WHERE d.channel = 1 AND c.status = 'ok' ORDER BY c.seq"
    )
    assert [seq for seq, _, _ in acked] == list(range(1, 11))
    assert sum(a for seq, _, a in acked if seq <= 4) > 0
    assert all(w > 0 and a == 0 for seq, w, a in acked if seq > 4)


def test_clean_sim_after_kill_9_of_a_twin_run(tmp_path: Path, twin: None) -> None:
    # The demo's drive profiles with this process's own identities: two demos at once (another
    # session's) refuse each other's drives and end at once, leaving nothing to kill.
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(campaign_text("kill9", ["plp", "lying-flush", "torn"], 50))
    output = tmp_path / "rig.out"
    with output.open("wb") as sink:
        run = subprocess.Popen(
            [sys.executable, "-m", "rig.cli", "run", str(campaign), "--db", str(tmp_path / "db")],
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
    assert not any(runtime.alive(pid) for pid in pids)
