"""Cuts during a drive's recovery and bursts of rapid cycles ([cut.recovery],
rig/campaign/cutcycle/recovery.py): scored against the fault core's ground truth on in-process
virtual drives through the production campaign code, power-ons recorded, bad input refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures import statefaults
from rig.check import verify
from tests.cli_runner import rig
from tests.interface.test_cli_refusals import assert_one_line_refusal
from tests.scoring import campaign_text, run, score_drive

# on-times inside the profiles' recovery (back on the bus after 50 ms, ready 150 ms later): the
# cut falls while the drive boots or is back but not ready
RECOVERY = "[cut.recovery]\nburst = {burst}\non_ms = [{low}, {high}]\n"


def burst_campaign(
    profiles: list[str],
    cycles: int,
    burst: int,
    low: float,
    high: float,
    delay_ms: tuple[float, float] = (0.3, 6),
) -> str:
    text = campaign_text(profiles, cycles, delay_ms=delay_ms)
    head, drives = text.split("[[drive]]", 1)
    return head + RECOVERY.format(burst=burst, low=low, high=high) + "[[drive]]" + drives


def test_a_fragile_recovery_is_found_block_by_block(tmp_path: Path) -> None:
    """Every block a cut during recovery damaged (older data, durable before the burst) is
    found as collateral damage; nothing else is reported."""
    # (cuts 2-20 ms into a cycle: a loaded writer issues little per cycle, and a recovery cut
    # damages only blocks of earlier cycles: with 0.3-6 ms, one run in CI found none to damage)
    text = burst_campaign(["fragile-recovery"], 6, 3, 5, 180, delay_ms=(2, 20))
    summaries, drives, store = run(tmp_path / "s.sqlite", text)
    assert not summaries[0].errors
    score = score_drive(store, 0, drives[0])
    recovery_hits = [
        e
        for e in drives[0].core.truth
        if e.kind in (statefaults.RECOVERY_REVERTED, statefaults.RECOVERY_CORRUPT)
    ]
    assert recovery_hits, "the profile injected nothing: the test would prove nothing"
    assert score.perfect, score.table() + "\n" + "\n".join(score.examples)
    # (the cuts of one burst are one unit of the truth log: a block two of them damaged is one
    # damaged block to find; one the cycle wrote again before the burst reads as that write's
    # bit corruption, as the scorer's truth says)
    found = score.tp[verify.COLLATERAL] + score.tp[verify.CORRUPTION]
    assert found >= len({(e.cut, e.lba) for e in recovery_hits})
    assert score.tp[verify.COLLATERAL] > 0
    cuts = [e for e in drives[0].core.truth if e.kind == statefaults.RECOVERY_CUT]
    assert len(cuts) == 6 * 3  # every cut of every burst fell during recovery
    details = [
        json.loads(r["detail"]) for r in store.query("SELECT detail FROM finding WHERE failure = 1")
    ]
    assert details and all(d["recovery_cuts"] == 3 and len(d["states"]) == 3 for d in details)


@pytest.mark.parametrize("profile", ["honest+recovering", "plp+recovering", "slow-recovery"])
def test_bursts_invent_nothing_on_honest_drives(tmp_path: Path, profile: str) -> None:
    """Honest and PLP drives that recover 150 ms after they are back: every cut of the burst
    falls inside it (the scorer pairs the fault core's cuts with cycles; a cut of a drive
    already ready that took no write since power-on would be a cut of its own there)."""
    # (on-times up to 100 ms of the 200 ms to ready: on a loaded host the cut can fall tens of
    # ms after its plan, and the rig records where it fell; the scorer needs it inside)
    text = burst_campaign([profile], 5, 4, 2, 100)
    summaries, drives, store = run(tmp_path / "s.sqlite", text)
    assert not summaries[0].errors and not summaries[0].dead
    score = score_drive(store, 0, drives[0])
    assert score.perfect, score.table()
    failing = store.query("SELECT class FROM finding WHERE failure = 1")
    assert not failing


@pytest.mark.parametrize("profile", ["honest", "plp"])
def test_bursts_past_the_recovery_invent_nothing(tmp_path: Path, profile: str) -> None:
    """On-times from inside the boot to well past it: cuts of a booting drive and of a ready,
    idle one; no failure is reported (not scored: the cuts of a ready drive are cuts of their
    own in the fault core's truth log)."""
    summaries, _, store = run(tmp_path / "s.sqlite", burst_campaign([profile], 4, 3, 2, 300))
    assert not summaries[0].errors and not summaries[0].dead
    assert not store.query("SELECT class FROM finding WHERE failure = 1")
    states = {r["state_at_cut"] for r in store.query("SELECT state_at_cut FROM power_on")}
    assert "ready" in states


def test_every_power_on_is_recorded_with_where_its_cut_fell(tmp_path: Path) -> None:
    """A burst of 3: four power-ons per cycle; the burst's end at their cuts, booting (before
    the drive is back at 50 ms) or not ready (back, still recovering); the last one back and
    ready, its times after its power-on."""
    text = burst_campaign(["slow-recovery"], 3, 3, 10, 120)
    run(tmp_path / "s.sqlite", text)
    from rig.store import Store

    store = Store(str(tmp_path / "s.sqlite"))
    rows = store.query("SELECT * FROM power_on ORDER BY cycle_id, n")
    assert len(rows) == 3 * 4
    states = set()
    for row in rows:
        if row["n"] < 3:
            assert row["cut_ns"] is not None and row["cut_ns"] > row["on_ns"]
            assert row["ready_ns"] is None  # never ready within 120 ms (it takes 200)
            states.add(row["state_at_cut"])
            back = row["back_ns"]
            assert (row["state_at_cut"] == "booting") == (back is None or back > row["cut_ns"])
        else:
            assert row["cut_ns"] is None and row["state_at_cut"] == ""
            assert row["on_ns"] < row["back_ns"] <= row["ready_ns"]
            assert (row["ready_ns"] - row["on_ns"]) / 1e6 >= 150  # it recovers 150 ms
    assert states <= {"booting", "not_ready"} and states
    offs = store.query("SELECT detail FROM event WHERE kind = 'power_off'")
    recovery = [json.loads(r["detail"]) for r in offs if "recovery" in json.loads(r["detail"])]
    assert len(recovery) == 9
    assert all(d["after_power_on_ms"] >= 10 for d in recovery)


def test_cycles_without_a_burst_record_their_one_power_on(tmp_path: Path) -> None:
    _, _, store = run(tmp_path / "s.sqlite", campaign_text(["honest"], 2))
    rows = store.query("SELECT * FROM power_on ORDER BY cycle_id, n")
    assert [r["n"] for r in rows] == [0, 0]
    assert all(r["back_ns"] > r["on_ns"] and r["ready_ns"] >= r["back_ns"] for r in rows)


@pytest.mark.parametrize(
    "table, words",
    [
        ("[cut.recovery]\nburst = 3\n", ("needs 'on_ms'",)),
        ("[cut.recovery]\nburst = 3\non_ms = [0, 0]\n", ("on_ms must be above 0",)),
        ("[cut.recovery]\non_ms = [10, 40000]\n", ("outside the cycle", "return_timeout_s")),
        ("[cut.recovery]\nburst = 0\non_ms = [10, 20]\n", ("burst = 0 is outside",)),
        ("[cut.recovery]\non_ms = [10, 20]\nspeed = 1\n", ("unknown key 'speed'",)),
    ],
)
def test_bad_recovery_settings_are_refused_before_any_write(
    tmp_path: Path, table: str, words: tuple[str, ...]
) -> None:
    text = campaign_text(["honest"], 2)
    head, drives = text.split("[[drive]]", 1)
    path = tmp_path / "c.toml"
    path.write_text(head + table + "[[drive]]" + drives)
    assert_one_line_refusal(rig("run", str(path), cwd=tmp_path), *words)
    assert not list(tmp_path.glob("*.sqlite"))


def test_an_older_store_gains_the_power_on_table(tmp_path: Path) -> None:
    """A store of v12 (before the power-on table and the later steps) is migrated on open: the
    table is there, empty, and the store is at the current version."""
    from rig.store import Store
    from rig.store.schema import SCHEMA_VERSION
    from tests.older_stores import downgrade_to_v12

    path = tmp_path / "old.sqlite"
    Store(str(path)).close()
    downgrade_to_v12(path)
    store = Store(str(path))
    columns = [r["name"] for r in store.query("PRAGMA table_info(power_on)")]
    assert columns == ["cycle_id", "n", "on_ns", "back_ns", "ready_ns", "cut_ns", "state_at_cut"]
    assert store.query("PRAGMA user_version")[0][0] == SCHEMA_VERSION
    assert store.query("SELECT COUNT(*) FROM power_on")[0][0] == 0
    store.close()
