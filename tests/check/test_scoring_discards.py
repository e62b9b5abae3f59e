"""Discards scored against the simulated drive's ground truth (docs/checker.md, "Discards"):
every resurrected discard and every write a discard destroyed is found, and nothing is
invented on honest drives that take discards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.export import write_report
from rig.check import verify
from rig.config import campaign_file
from rig.errors import UserError
from tests import scoring
from tests.cli_runner import rig

# each discard profile, the failure classes its faults must produce, and the cuts a sample
# needs to show them (a discard followed by a durable write of the same block in one cycle is
# rarer than a discard alone)
DISCARD_PROFILES = {
    "trim-resurrect": ({verify.RESURRECTED}, 25),
    "trim-eats-writes": ({verify.LOST_DURABLE}, 80),
}
# cut 2-20 ms after the arm: a discard shows a fault only where it meets data written before it,
# and the twin cuts at the stated instant, so cycles of 0.3-6 ms left the region nearly bare:
# 4-16 operations a cycle, and 25 cuts of trim-resurrect injected nothing
DELAY_MS = (2.0, 20.0)


def score(tmp_path: Path, profiles: list[str], cycles: int) -> scoring.Score:
    text = scoring.campaign_text(profiles, cycles, discard_share=0.25, delay_ms=DELAY_MS)
    summaries, drives, store = scoring.run(tmp_path / "score.sqlite", text, health=True)
    assert all(s.errors == 0 and s.cycles == cycles for s in summaries)
    result = scoring.score_campaign(store, drives)
    print(result.table())
    return result


@pytest.mark.parametrize("profile", sorted(DISCARD_PROFILES))
def test_each_discard_fault_is_found_exactly(tmp_path: Path, profile: str) -> None:
    classes, cuts = DISCARD_PROFILES[profile]
    result = score(tmp_path, [profile], cuts)
    assert result.perfect, "\n".join(result.examples)
    for cls in classes:
        assert result.tp[cls] > 0, f"{profile} produced no {cls}: the sample proves nothing"


def test_honest_drives_that_discard_have_no_failure(tmp_path: Path) -> None:
    result = score(tmp_path, ["honest", "plp", "write-through"], 40)
    assert result.perfect and result.injected == 0, "\n".join(result.examples)


def test_cuts_aimed_at_a_discard_in_flight_judge_it_either_way(tmp_path: Path) -> None:
    """`during_discard` sends the cut the moment a discard is in flight: that discard may be
    applied or not, and the score stays perfect (the resurrecting drive's faults of earlier,
    flushed discards are still found)."""
    text = scoring.campaign_text(["trim-resurrect", "honest"], 20, discard_share=0.25)
    text = text.replace("[cut]\n", '[cut]\nstrategy = "during_discard"\n')
    summaries, drives, store = scoring.run(tmp_path / "aim.sqlite", text, health=True)
    assert all(s.errors == 0 and s.cycles == 20 for s in summaries)
    result = scoring.score_campaign(store, drives)
    assert result.perfect, "\n".join(result.examples)
    rows = store.query(
        "SELECT kind, detail FROM event WHERE kind IN ('cut_scheduled', 'cut_context')"
    )
    triggers = [json.loads(r["detail"])["trigger"] for r in rows if r["kind"] == "cut_scheduled"]
    assert triggers == ["discard_in_flight"] * 40
    in_flight = [
        json.loads(r["detail"])["discards_in_flight"] for r in rows if r["kind"] == "cut_context"
    ]
    assert any(in_flight), "no edge fell with a discard in flight"
    print(f"edges with a discard in flight: {sum(map(bool, in_flight))} of {len(in_flight)}")


def test_a_discard_share_outside_0_to_1_is_refused_before_any_write(tmp_path: Path) -> None:
    for bad in ("1.5", "-0.1", "true", '"half"'):
        text = scoring.campaign_text(["honest"], 2).replace(
            "flush_every = 2\n", f"flush_every = 2\ndiscard_share = {bad}\n"
        )
        with pytest.raises(UserError, match=r"discard_share"):
            campaign_file.parse(text)
    text = scoring.campaign_text(["honest"], 2).replace(
        "[cut]\n", '[cut]\nstrategy = "during_discard"\n'
    )
    with pytest.raises(UserError, match="during_discard needs"):
        campaign_file.parse(text)


def test_rig_run_refuses_a_bad_discard_share_in_one_line_before_a_store(tmp_path: Path) -> None:
    campaign = tmp_path / "c.toml"
    campaign.write_text(
        scoring.campaign_text(["honest"], 2).replace(
            "flush_every = 2\n", "flush_every = 2\ndiscard_share = 1.5\n"
        )
    )
    store = tmp_path / "s.sqlite"
    result = rig("run", str(campaign), "--db", str(store), cwd=Path(__file__).parents[2])
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "discard_share" in line and "0 to 1" in line
    assert not store.exists()


@pytest.mark.slow
def test_long_discard_scoring(tmp_path: Path) -> None:
    """The discard profiles and the honest ones with discards, 200 cuts each, two seeds."""
    total = scoring.Score()
    for seed in (21, 22):
        profiles = [*DISCARD_PROFILES, "honest", "plp", "write-through"]
        text = scoring.campaign_text(
            profiles, 200, seed=seed, discard_share=0.25, delay_ms=DELAY_MS
        )
        summaries, drives, store = scoring.run(tmp_path / f"l{seed}.sqlite", text, health=True)
        assert all(s.errors == 0 for s in summaries)
        total.add(scoring.score_campaign(store, drives))
        store.close()
    print(total.table())
    assert total.perfect, "\n".join(total.examples)
    assert total.tp[verify.RESURRECTED] >= 50 and total.tp[verify.LOST_DURABLE] >= 50


def test_the_report_names_resurrected_discards_with_their_evidence(tmp_path: Path) -> None:
    text = scoring.campaign_text(["trim-resurrect"], 15, discard_share=0.25, delay_ms=DELAY_MS)
    _, _, store = scoring.run(tmp_path / "r.sqlite", text, health=True)
    store.close()
    index = Path(write_report([str(tmp_path / "r.sqlite")], str(tmp_path / "out"))).read_text()
    assert "resurrected_discard" in index  # in the class table
    page = (tmp_path / "out" / "model-SIM-trim-resurrect.html").read_text()
    # the model's failure findings, each with its evidence: the discard it had to read as
    assert "resurrected_discard" in page and "discard gen: " in page
    body = json.loads((tmp_path / "out" / "report.json").read_text())
    assert "resurrected_discard" in json.dumps(body)
