"""Safety and truth on a bus the rig did not build, through `rig run` on the
full-system twin with its adversarial bus behaviours (fixtures/simssd/bus.py): nodes reused by
other drives, drives swapping nodes, foreign disks and clones at a drive's old node, stale,
duplicated and late udev events, a smartctl that cannot type the device, faults of the rig
itself at every phase, and drives with scattered bad blocks.

Which image every byte went to is proven from the simulator's own per-image write log: every
write an image received must be in its own drive's ledger (its first LBA and issue time, from
the record headers), and a foreign disk must receive none (`misdirected_writes`).

Each of the four defects once found on such a bus has its test here (the node reuse, the channel
left off after a rig fault, the refused drive whose health cannot be read, the invented read
errors); each fails on the rig before the fix (commit 75f4c29). The safety soak drives the twin
through thousands of adversarial bus events (`-m slow`; a short run in CI).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from fixtures import faultcore as fc
from fixtures import rig_faults
from rig.check import verify
from tests.cli_runner import rig
from tests.sim.twin_helpers import (
    TwinRun,
    bus_events,
    campaign_text,
    event_details,
    image_writes,
    misdirected_writes,
    run_twin,
    wrong_adoptions,
)

CUTS = int(os.environ.get("RIG_SAFETY_CUTS", "8"))
CHAOS = "+other-node+event-burst+late-events+untypable"  # every drive: see fixtures/profiles.toml
DOUBT = re.compile(r"backed by|devices answer to|changed (between|after)|disagree|refusing")


def failures(run: TwinRun) -> list[tuple[int, int, str]]:
    return run.rows(
        "SELECT d.channel, c.seq, f.class FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " JOIN drive d ON d.id = c.drive_id WHERE f.failure = 1"
    )


def not_ok(run: TwinRun) -> list[tuple[int, int, str, str]]:
    return run.rows(
        "SELECT d.channel, c.seq, c.status, c.error FROM cycle c JOIN drive d"
        " ON d.id = c.drive_id WHERE c.status != 'ok' ORDER BY d.channel, c.seq"
    )


def bus_counts(tmp_path: Path) -> Counter[str]:
    """Adversarial bus events by kind (a burst counts each event it sent)."""
    counts: Counter[str] = Counter()
    for event in bus_events(tmp_path):
        counts[event["kind"]] += int(event.get("count", 1))
    return counts


def stops(tmp_path: Path) -> dict[int, str]:
    """channel -> reason, for every channel the run stopped early (from its run log)."""
    found = {}
    for line in (tmp_path / "twin.log.jsonl").read_text().splitlines():
        entry = json.loads(line)
        match = re.match(r"ch(\d+): stopped: (.*)", entry.get("text", ""))
        if entry.get("kind") == "message" and match:
            found[int(match.group(1))] = match.group(2)
    return found


def test_reused_nodes_swaps_and_stale_events_never_lead_a_channel_to_another_drive(
    tmp_path: Path, twin: None
) -> None:
    """Defect 1. Two honest drives come back at the node the other just freed (they swap), with
    bursts of change events queued while the node was still the other's and every event held
    back by udev, and smartctl cannot type them (so only the rig's own proof stands between a
    channel and the other drive). Before the fix a channel read a queued event that still named
    its drive at a node the other drive had taken, and wrote to that drive."""
    chaos = "+other-node+stale-events+untypable"
    profiles = [f"honest{chaos}", f"write-through{chaos}"]
    # no health read: the untypable drives would otherwise meet defect 3 first
    text = campaign_text("reuse", profiles, CUTS, label="reuse", health="every = 0")
    run = run_twin(tmp_path, text)
    counts = bus_counts(tmp_path)
    assert counts["node_reused"] >= CUTS // 2, counts  # the adversity really happened
    assert counts["change_events"] and counts["event_replayed"] and counts["event_delayed"], counts
    assert wrong_adoptions(run, tmp_path) == [], "a channel took another drive's node"
    assert misdirected_writes(run, tmp_path) == {}, "a write reached another drive"
    assert failures(run) == [], "false findings on honest drives"
    assert run.returncode == 0, run.stderr[-2000:]
    for channel in (0, 1):
        assert len(run.cycles(channel)) == CUTS
    assert len(not_ok(run)) <= max(1, CUTS // 10), not_ok(run)  # (a loaded host's rig ERRORs)
    # each return was proven on a new attachment (its disk sequence number) of its own file
    backs = [d for ch in (0, 1) for _, d in event_details(run, ch, "bus_back")]
    assert backs and all(d["diskseq"] > 0 and d["backing"].startswith("dev ") for d in backs)


@pytest.mark.parametrize("health", ["", "every = 1"], ids=["no-health", "health"])
def test_a_drive_smartctl_cannot_type_runs_without_health_unless_asked(
    tmp_path: Path, twin: None, health: str
) -> None:
    """Defect 3. Real smartctl exits 1 ("Unable to detect device type") on a loop device.
    Without [health] the drive runs without health: one warning line, one store event. With
    [health] it is refused with the reason, before anything is written."""
    text = campaign_text("untypable", ["honest+untypable"], 3, label="untyp", health=health)
    run = run_twin(tmp_path, text, quiet=False)
    if health:
        assert run.returncode == 2, run.stdout[-2000:]
        errors = [line for line in run.stderr.splitlines() if line.startswith("rig: error:")]
        assert len(errors) == 1 and "health: smartctl" in errors[0], run.stderr
        assert "Unable to detect device type" in errors[0]
        assert sum(len(w) for w in image_writes(tmp_path).values()) == 0
        assert not (tmp_path / "twin.sqlite").exists()  # and no store is left
        return
    assert run.returncode == 0, run.stderr[-2000:]
    warnings = [line for line in run.stdout.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "running without health" in warnings[0], run.stdout
    assert "Unable to detect device type" in warnings[0]
    assert [s for _, s, *_ in run.cycles(0)] == ["ok"] * 3
    events = run.rows("SELECT detail FROM event WHERE kind = 'health_unavailable'")
    assert len(events) == 1
    assert run.rows("SELECT COUNT(*) FROM health") == [(0,)]


def test_a_rig_fault_at_every_phase_leaves_no_channel_off(tmp_path: Path, twin: None) -> None:
    """Defect 2. A fault of the rig is injected in turn at every phase from the cut's scheduling
    to identify (fixtures/rig_faults.py: a lost reply of the board, a lost edge report, a udev
    monitor that dies, a switch that does not answer the restore, a failing interlock probe).
    Each such cycle is a rig ERROR, power goes back before the next cycle, and the next cycle
    runs. (Every phase including arm, health, verify and a writer thread's crash, on two
    channels, runs on the in-process twin: tests/campaign/test_teardown.py; the native engine writes
    without the target's Python methods, so a writer crash cannot be injected here.)"""
    after = ("write", "cut", "observe_loss", "restore", "observe_return", "identify")
    points = [p for p in rig_faults.POINTS if p in after]
    at = {point: 2 * i + 2 for i, point in enumerate(points)}
    cycles = 2 * len(points) + 1
    plan = "0:" + ",".join(f"{p}@{c}" for p, c in at.items())
    text = campaign_text(
        "faults",
        ["honest"],
        cycles,
        label="faults",
        health="",
        stop="max_consecutive_errors = 2",
    )
    run = run_twin(tmp_path, text, env={rig_faults.ENV: plan})
    assert run.returncode == 0, run.stderr[-2000:]
    ch0 = {seq: (status, error) for seq, status, error in run.rows(
        "SELECT c.seq, c.status, c.error FROM cycle c JOIN drive d ON d.id = c.drive_id"
        " WHERE d.channel = 0"
    )}  # fmt: skip
    assert sorted(ch0) == list(range(1, cycles + 1)), "every cycle ran"
    for point, seq in at.items():
        status, error = ch0[seq]
        assert status == "error" and f"injected fault at {point}" in error, (point, ch0[seq])
        assert ch0[seq + 1][0] == "ok", (point, ch0[seq + 1])
    assert not any("is off at the start" in error for _, error in ch0.values())
    assert stops(tmp_path) == {} and failures(run) == []
    assert misdirected_writes(run, tmp_path) == {}
    # and the board's pin follows: every cut of channel 0 was followed by power back on
    edges = [line for line in run.pins if line.startswith("pin ") and " ch=0 " in line]
    assert edges and edges[-1].split(" on=")[1].startswith("1"), edges[-3:]


SPARSE = [
    # (profile, region MiB, [cut] keys beyond the full scan): CI spends a small budget; the slow
    # one spends the default budget of 2048 reads on 2048-block ranges (and runs on any rig)
    pytest.param("sparse-bad", 4, "read_budget = 256", id="budget-256"),
    pytest.param("sparse-bad-wide", 16, "", id="default-budget", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("drive", "region_mib", "budget"), SPARSE)
def test_read_errors_are_exact_per_block_and_unchecked_blocks_are_counted(
    tmp_path: Path, twin: None, drive: str, region_mib: int, budget: str
) -> None:
    """Defect 4. Every cut leaves a wide range with a third of its blocks unreadable, scattered;
    each cut's check reads the whole region, and locating the bad blocks spends its read budget.
    Scored per block against the twin's truth: every read error is a block the drive failed
    (precision 1.0), every failed block that was read is a read error (recall 1.0); the blocks
    the budget left unread are unchecked, counted in the store and shown in the report. Before
    the fix the rest of each failing range was reported with the range's failure."""
    check = f"sample_blocks = 0\nfull_scan_every = 1\nread_timeout_s = 5\n{budget}"
    text = campaign_text(
        "sparse", [drive], 5, label="sparse", health="every = 0", region_mib=region_mib,
        delay_ms=(2, 8), check=check,
    )  # fmt: skip
    run = run_twin(tmp_path, text)
    assert run.returncode == 1, run.stderr[-2000:]  # 1: the drive has failures (read errors)
    pairs = run.cut_to_cycle(0)
    truth: dict[int, set[int]] = {}
    for event in run.truth:
        if event["kind"] in (fc.READ_FAIL, fc.READ_HANG) and event["cut"] in pairs:
            truth.setdefault(pairs[event["cut"]], set()).add(event["lba"])
    observed: dict[int, set[int]] = {}
    for seq, first, count, detail in run.rows(
        "SELECT c.seq, f.lba_first, f.lba_count, f.detail FROM finding f JOIN cycle c"
        " ON c.id = f.cycle_id WHERE f.class = ? AND c.status = 'ok'",
        verify.READ_ERROR,
    ):
        if json.loads(detail)["kind"] != "unmapped":
            observed.setdefault(seq, set()).update(range(first, first + count))
    ok = {seq for seq, status, *_ in run.cycles(0) if status == "ok"}
    found = sum(len(b) for b in observed.values())
    true_positives = sum(len(observed.get(s, set()) & truth.get(s, set())) for s in ok)
    assert found and true_positives == found, "read errors on blocks that read fine"
    unchecked = unchecked_blocks(run)
    missed = sum(
        len(truth.get(s, set()) - observed.get(s, set()) - unchecked.get(s, set())) for s in ok
    )
    assert missed == 0, "a failed block that was read is not reported"
    # the budget was spent: some blocks were left unread, and the store and report say so
    stored = run.rows("SELECT SUM(c.blocks_unchecked) FROM cycle c")[0][0]
    assert stored == sum(len(b) for b in unchecked.values()) > 0
    others = [f for f in failures(run) if f[2] != verify.READ_ERROR]
    assert others == [], others
    status = rig("status", str(tmp_path / "twin.sqlite"), cwd=tmp_path)
    assert f"blocks unchecked {stored};" in status.stdout, status.stdout
    report = rig(
        "report", str(tmp_path / "twin.sqlite"), "--out", str(tmp_path / "r"), cwd=tmp_path
    )
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r" / "report.html").read_text()
    # the per-drive table's "blocks unchecked" column (reports/render/html.py drive_head /
    # drive_row)
    table = next(t for t in html.split("<table") if "<th>blocks unchecked</th>" in t)
    head = re.findall(r"<th>(.*?)</th>", table)
    row = table.split("</tr>")[1]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[head.index("blocks unchecked")] == str(stored), (head, cells)


def unchecked_blocks(run: TwinRun) -> dict[int, set[int]]:
    """cycle -> the blocks its check left unread, from its `unchecked` event."""
    found: dict[int, set[int]] = {}
    for seq, detail in event_details(run, 0, "unchecked"):
        assert detail["ranges_total"] == len(detail["ranges"])  # all of them kept here
        for first, count, _ in detail["ranges"]:
            found.setdefault(seq, set()).update(range(first, first + count))
    return found


# -- the safety soak ----------------------------------------------------------------------------
# Campaigns on stations whose every drive has the bus behaviours of `bus-chaos` (a shared pool of
# nodes taken lowest first, returns held back until another drive frees a node, foreign disks
# at freed nodes, bursts of change events, late events, an untypable smartctl), and one drive
# with a clone. Counted from the simulator's own bus log.
SOAK = [
    ("chaos", ["honest", "plp", "write-through"], 11),
    ("clone", ["honest+foreign-clone+event-burst+late-events", "plp+bus-chaos"], 29),
]


def soak(tmp_path: Path, cycles: int, seed_offset: int = 0) -> Counter[str]:
    """Runs the soak's campaigns; returns the bus events by kind and, under `outcome:` keys, what
    was counted against them (printed per campaign, so a run's figures can be quoted)."""
    total: Counter[str] = Counter()
    for name, profiles, base_seed in SOAK:
        seed = base_seed + seed_offset
        where = tmp_path / name
        where.mkdir()
        station = "" if name == "clone" else 'bus = "bus-chaos"'
        text = campaign_text(
            name, profiles, cycles, label=name, seed=seed, health="", station=station,
            stop="max_consecutive_errors = 3",
        )  # fmt: skip
        run = run_twin(where, text)
        counts = bus_counts(where)
        total.update(counts)
        writes = image_writes(where)
        foreign = [n for n in writes if n.endswith("-foreign.img")]
        named = {f"{serial}.img" for (serial,) in run.rows("SELECT serial FROM drive")}
        unnamed = sum(len(w) for n, w in writes.items() if n not in named)
        outcome = Counter(
            {
                "writes_logged": sum(len(w) for w in writes.values()),
                "writes_to_unnamed_images": unnamed,
                "misdirected_writes": sum(misdirected_writes(run, where).values()),
                "wrong_adoptions": len(wrong_adoptions(run, where)),
                "failure_findings": len(failures(run)),
                "cycles": len(run.rows("SELECT id FROM cycle")),
            }
        )
        stopped = stops(where)
        print(
            f"safety soak: {name} seed {seed}: {adversarial(counts)} adversarial bus events;"
            f" {dict(outcome)}; stopped: {stopped or 'none'}"
        )
        total.update({f"outcome:{k}": v for k, v in outcome.items()})
        assert foreign and counts["foreign_attached"], (name, counts)  # foreign disks came
        assert outcome["wrong_adoptions"] == 0, name
        assert outcome["writes_to_unnamed_images"] == 0, name  # 0 writes to an image not named
        assert outcome["misdirected_writes"] == 0, name  # nor to another drive's image
        assert outcome["failure_findings"] == 0, name  # every drive here is honest
        assert all("\n" not in reason for reason in stopped.values()), stopped
        clones = [i for i, p in enumerate(profiles) if "foreign-clone" in p]
        for channel in clones:  # the channel that meets a clone stops, with its reason
            assert DOUBT.search(stopped.get(channel, "")), (name, channel, stopped)
            total["outcome:stopped_for_doubt"] += 1
        for channel, reason in stopped.items():
            if channel not in clones:  # never a false doubt; a rig fault of the station may
                assert not DOUBT.search(reason), (name, channel, reason)  # stop it (printed)
                print(f"safety soak: {name} ch{channel} stopped by a rig fault: {reason}")
        dead = run.rows("SELECT channel FROM drive WHERE status = 'dead'")
        assert dead == [], (name, dead)
        errors = [r for r in not_ok(run) if r[0] not in clones and r[0] not in stopped]
        assert len(errors) <= max(1, cycles * len(profiles) // 20), (name, errors)
    print(f"safety soak: {adversarial(total)} adversarial bus events: {dict(total)}")
    return total


def outcomes(counts: Counter[str]) -> dict[str, int]:
    return {k.removeprefix("outcome:"): v for k, v in counts.items() if k.startswith("outcome:")}


def adversarial(counts: Counter[str]) -> int:
    """Bus events that could mislead a rig: a node taken over (by another drive or a foreign
    disk), a return at a new node, a synthetic change event, an event held back by udev, a
    stale event delivered again after its node changed hands."""
    kinds = ("node_reused", "new_node", "foreign_attached", "change_events", "event_delayed")
    kinds += ("event_replayed",)
    return sum(counts[k] for k in kinds)


def test_safety_soak(tmp_path: Path, twin: None) -> None:
    """The short run of CI (`RIG_SOAK_CUTS` cuts per campaign)."""
    counts = soak(tmp_path, int(os.environ.get("RIG_SOAK_CUTS", "6")))
    assert counts["node_reused"] > 0 and counts["foreign_attached"] > 0, counts
    assert adversarial(counts) >= 200, counts


@pytest.mark.slow
def test_safety_soak_thousands_of_bus_events(tmp_path: Path, twin: None) -> None:
    """`-m slow`: two rounds of the soak's campaigns of 30 cuts, each round with other seeds."""
    total: Counter[str] = Counter()
    for round_ in range(2):
        where = tmp_path / f"round{round_}"
        where.mkdir()
        total.update(soak(where, 30, seed_offset=100 * round_))
    print(f"safety soak, all rounds: {adversarial(total)} adversarial bus events: {dict(total)}")
    print(f"safety soak, all rounds: {outcomes(total)}")
    assert total["node_reused"] >= 50 and total["foreign_attached"] >= 10, total
    assert adversarial(total) >= 1000, total
