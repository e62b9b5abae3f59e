"""Stop rules and stored pass criteria, through the production campaign code on the simulated
rig (lying-flush drives fail often, so the rules have something to act on)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.campaign.test_sim_campaign import campaign_text, run


def test_max_failures_stops_only_that_drive(tmp_path: Path) -> None:
    text = campaign_text(["lying-flush", "plp"], cycles=12, flush_every=2)
    text = text.replace("[cut]", "[stop]\nmax_failures = 2\n[cut]")
    summaries, _, store = run(tmp_path, text)
    liar, good = summaries
    assert liar.stopped_by == "2 cycles with failures" and liar.cycles < 12
    assert good.stopped_by == "" and good.cycles == 12
    statuses = store.query("SELECT channel, status FROM drive ORDER BY channel")
    assert [(r["channel"], r["status"]) for r in statuses] == [(0, "stopped"), (1, "active")]
    failing = store.query(
        "SELECT COUNT(*) AS n FROM cycle c JOIN drive d ON d.id = c.drive_id"
        " WHERE d.channel = 0 AND c.failures > 0"
    )
    assert failing[0]["n"] == 2
    store.close()


def test_duration_budget_stops_early(tmp_path: Path) -> None:
    text = campaign_text(["plp"], cycles=100_000).replace("seed = 5", "seed = 5\nduration_s = 1")
    summaries, _, store = run(tmp_path, text)
    assert summaries[0].stopped_by == "duration of 1 s reached"
    assert 0 < summaries[0].cycles < 100_000
    store.close()


def test_criteria_are_stored_with_the_campaign(tmp_path: Path) -> None:
    text = campaign_text(["plp"], cycles=2).replace(
        "[cut]",
        "[criteria]\nmax_failure_probability = 0.01\nconfidence = 0.9\n"
        'classes = ["lost_durable_write"]\n[cut]',
    )
    _, _, store = run(tmp_path, text)
    stored = json.loads(store.query("SELECT criteria FROM campaign")[0]["criteria"])
    assert stored == {
        "max_failure_probability": 0.01,
        "confidence": 0.9,
        "classes": ["lost_durable_write"],
        "min_cycles": 0,
        "zero_tolerance": ["lost_durable_write", "flying_write", "bit_corruption", "dead_device"],
    }
    store.close()
