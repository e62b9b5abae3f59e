"""A burst of recovery cuts on the full-system twin ([cut.recovery]): the production relay driver,
udev presence and readiness probe between cuts that fall while a loop device is gone, coming back or
back. (The twin's drives have no recovery time of their own: docs/simulator.md, "Recovery and
maintenance"; the in-process twin scores that, tests/campaign/test_recovery_cuts.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.sim.twin_helpers import campaign_text, run_twin


def test_a_burst_on_the_twin_records_every_power_on_and_invents_nothing(
    tmp_path: Path, twin: None
) -> None:
    text = campaign_text("burst", ["plp"], 3)
    head, drives = text.split("[[drive]]", 1)
    text = head + "[cut.recovery]\nburst = 2\non_ms = [20, 800]\n[[drive]]" + drives
    run = run_twin(tmp_path, text)
    assert run.returncode == 0, run.stderr
    statuses = [r[0] for r in run.db.execute("SELECT status FROM cycle")]
    assert statuses == ["ok"] * 3, run.db.execute("SELECT error FROM cycle").fetchall()
    rows = run.db.execute("SELECT n, on_ns, back_ns, cut_ns, state_at_cut FROM power_on").fetchall()
    assert len(rows) == 3 * 3
    for n, on_ns, back_ns, cut_ns, state in rows:
        if n < 2:
            assert cut_ns > on_ns and state in ("booting", "not_ready", "ready")
            assert (state == "booting") == (back_ns is None or back_ns > cut_ns)
        else:
            assert cut_ns is None and back_ns > on_ns
    assert not run.db.execute("SELECT class FROM finding WHERE failure = 1").fetchall()


def test_a_fragile_recovery_on_the_twin_is_scored_exactly(tmp_path: Path, twin: None) -> None:
    """The in-process twin's fault core behind the FUSE loop device: reads fail while it
    recovers (the production readiness probe waits), and every block a cut during recovery
    damaged is found, nothing else (tests/scoring.py against the twin's truth files)."""
    from tests.sim.test_twin_scoring import score_twin, scoring_campaign

    # (a 1.5 s recovery and on-times up to 0.5 s: under load the simulated MCU's edges trail
    # the plan by up to ~0.6 s, more where simavr runs slower than real time, and a cut of a
    # drive already ready would be a cut of its own in the truth log)
    profiles = ["fragile-recovery+long-recovery", "slow-recovery+long-recovery"]
    head, drives = scoring_campaign("fragile", profiles, 6).split("[[drive]]", 1)
    text = head + "[cut.recovery]\nburst = 2\non_ms = [5, 500]\n[[drive]]" + drives
    run = run_twin(tmp_path, text)
    assert run.returncode in (0, 1), run.stderr
    scores = score_twin(tmp_path, run, profiles)
    fragile, honest = (scores[p] for p in profiles)
    print(fragile.table(), honest.table(), sep="\n")
    assert fragile.perfect and honest.perfect, fragile.table() + "\n" + "\n".join(fragile.examples)
    assert fragile.tp["collateral_damage"] > 0 and not sum(honest.fp.values())
    kinds = {row["kind"] for row in run.truth}
    assert "recovery_cut" in kinds


def test_a_maintenance_campaign_on_the_twin_is_refused_before_any_write(
    tmp_path: Path, twin: None
) -> None:
    """The twin's station has the real tools' maintenance interface; on a loop device they
    cannot tell what it supports: one line, exit 2, no store."""
    head, drives = campaign_text("maint", ["plp"], 2, region_mib=4).split("[[drive]]", 1)
    text = head + '[cut.maintenance]\noperation = "format"\n[[drive]]' + drives
    run = run_twin(tmp_path, text)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "maintenance operations" in lines[0], run.stderr
    assert not (tmp_path / "twin.sqlite").exists()
