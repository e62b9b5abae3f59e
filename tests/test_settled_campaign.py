"""Sequential verdicts in a running campaign: `[criteria.sequential]` and `[stop] when =
"settled"` on the demo's three in-process drives (each its own model), the refusals of bad
plans, and a resume that replays the plan instead of starting it afresh."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fixtures import sim_station
from reports import export, html
from rig import config, demo
from rig.campaign.parallel import run_campaign
from rig.campaign.settle import Settlement
from rig.sequential import Plan
from rig.store import Store
from tests.cli_runner import rig
from tests.test_cli_refusals import assert_one_line_refusal

PLAN = Plan(0.01, 0.1, 0.05, 0.1, 100)


def settled_demo(cycles: int, when: str = "settled") -> config.Campaign:
    """The demo's campaign file with a plan (and the stop rule), on in-process drives."""
    text = demo.DEMO_CAMPAIGN.read_text() + (
        f"[criteria.sequential]\np0 = {PLAN.p0}\np1 = {PLAN.p1}\nalpha = {PLAN.alpha}\n"
        f"beta = {PLAN.beta}\nmax_cuts = {PLAN.max_cuts}\n[stop]\nwhen = '{when}'\n"
    )
    campaign = config.parse(text)
    spec = demo.campaign(in_process=True).station
    assert campaign.criteria.sequential == PLAN and campaign.stop.when == when
    return dataclasses.replace(campaign, cycles=cycles, station=spec)


def model_of(label: str) -> str:
    return label.split(" s/n")[0]


def settled_events(store: Store) -> dict[str, dict[str, object]]:
    rows = store.query("SELECT detail FROM event WHERE kind = 'settled'")
    return {str(d["key"]): d for d in (json.loads(r["detail"]) for r in rows)}


def test_settled_stops_failing_models_early_and_runs_the_plp_drive_to_its_pass(
    tmp_path: Path,
) -> None:
    campaign = settled_demo(cycles=150)
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "demo.sqlite"))
    summaries = {model_of(s.label): s for s in run_campaign(campaign, station, store, print)}
    plp, liar, torn = (
        summaries["RIGSIM Enterprise PLP"],
        summaries["RIGSIM Lying Flush"],
        summaries["RIGSIM Torn Writer"],
    )
    events = settled_events(store)
    # each failing drive stops after the few cuts its plan needs, at the plan's decision
    for s in (liar, torn):
        model = model_of(s.label)
        assert events[model]["decision"] == "FAIL"
        assert s.cycles == events[model]["cuts"] <= 5
        assert s.stopped_by == f"plan settled: FAIL after {s.cycles} cuts"
    # the PLP drive goes on until its plan passes it: every failure-free cut up to the boundary
    assert events["RIGSIM Enterprise PLP"] == {
        "scope": "model",
        "key": "RIGSIM Enterprise PLP",
        "decision": "PASS",
        "cuts": PLAN.cuts_to_pass(),
        "failing": 0,
        "seq": PLAN.cuts_to_pass(),
        "plan": PLAN.as_json(),
    }
    assert plp.cycles == PLAN.cuts_to_pass() < 150
    stored = json.loads(store.query("SELECT criteria FROM campaign")[0]["criteria"])
    assert stored["sequential"] == {**PLAN.as_json(), "scope": "model"}
    store.close()
    # the report states each model's decision and the cuts it used, as the rig decided them
    export.write_report([str(tmp_path / "demo.sqlite")], str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    for m in report["models"]:
        seq = m["sequential"]
        assert (seq["model"]["decision"], seq["model"]["cuts"]) == (
            events[m["model"]]["decision"],
            events[m["model"]]["cuts"],
        )
        assert seq["stopped_when_settled"] and seq["exact_fail_at_p0"] <= PLAN.alpha
        page = (tmp_path / "out" / html.model_page(m["model"])).read_text()
        assert "<h3>Sequential verdict</h3>" in page
        assert f"{seq['model']['decision']}</span> by the sequential plan" in page
        assert f"decided after {seq['model']['cuts']} cuts" in page


def test_without_settled_the_plan_decides_but_stops_nothing(tmp_path: Path) -> None:
    """...and the report pools the plan over two stations' stores."""
    stores = []
    for name in ("alpha", "beta"):
        campaign = settled_demo(cycles=6, when="cycles")
        campaign = dataclasses.replace(campaign, seed=campaign.seed + len(stores))
        station, _ = sim_station.build(campaign)
        stores.append(str(tmp_path / f"{name}.sqlite"))
        store = Store(stores[-1])
        summaries = run_campaign(campaign, station, store, lambda line: None)
        assert [s.cycles for s in summaries] == [6, 6, 6]
        assert {k: e["decision"] for k, e in settled_events(store).items()} == {
            "RIGSIM Lying Flush": "FAIL",
            "RIGSIM Torn Writer": "FAIL",
        }
        store.close()
    export.write_report(stores, str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    seq = {m["model"]: m["sequential"] for m in report["models"]}
    plp = seq["RIGSIM Enterprise PLP"]
    assert plp["model"] == {"decision": "continuing", "cuts": 12, "failing": 0, "cuts_seen": 12}
    assert [d["decision"]["cuts_seen"] for d in plp["drives"]] == [12]  # one drive, two stores
    assert not plp["stopped_when_settled"]
    liar = seq["RIGSIM Lying Flush"]["model"]
    assert liar["decision"] == "FAIL" and liar["cuts"] < liar["cuts_seen"] == 12


def test_a_resumed_plan_continues_from_the_recorded_cuts(tmp_path: Path) -> None:
    """The recorded cycles are replayed in record order: the resumed plan is where it was."""
    campaign = settled_demo(cycles=10, when="cycles")
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "demo.sqlite"))
    run_campaign(campaign, station, store, lambda line: None)
    replayed = Settlement(campaign.criteria)
    for row in store.cut_outcomes(1):
        classes = [c for c in (row["failure_classes"] or "").split(",") if c]
        replayed.add(replayed.key(row["model"], int(row["channel"])), row["status"], classes)
    assert replayed.tallies["RIGSIM Enterprise PLP"] == (10, 0)
    assert replayed.decided["RIGSIM Lying Flush"].decision == "FAIL"
    assert "RIGSIM Enterprise PLP" not in replayed.decided
    store.close()


BASE = """
[campaign]
name = "bad-plan"
cycles = 3
[station]
kind = "simulated"
[[drive]]
channel = 0
model = "m"
serial = "s"
profile = "plp"
"""


@pytest.mark.parametrize(
    "tables, words",
    [
        ("[criteria.sequential]\np0 = 0.1\np1 = 0.1\nmax_cuts = 100", ("p0 = 0.1 must be below",)),
        ("[criteria.sequential]\np0 = 0.2\np1 = 0.1\nmax_cuts = 100", ("must be below p1",)),
        ("[criteria.sequential]\np0 = 0\np1 = 0.1\nmax_cuts = 100", ("strictly between 0 and 1",)),
        ("[criteria.sequential]\np0 = 0.01\np1 = 1\nmax_cuts = 100", ("strictly between 0 and 1",)),
        (
            "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nalpha = 0.5\nmax_cuts = 100",
            ("alpha and beta must lie strictly between 0 and 0.5",),
        ),
        (
            "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nbeta = 0\nmax_cuts = 100",
            ("alpha and beta must lie strictly between 0 and 0.5",),
        ),
        (
            "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nmax_cuts = 20",
            ("max_cuts = 20 cannot reach a decision: PASS needs at least 25",),
        ),
        (
            "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nmax_cuts = 30",
            ("max_cuts = 30 truncates the plan too early",),
        ),
        (
            "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nmax_cuts = 100\nscope = 'station'",
            ("scope must be one of model, drive",),
        ),
        ("[stop]\nwhen = 'settled'", ('when = "settled" needs a [criteria.sequential] plan',)),
        ("[stop]\nwhen = 'decided'", ("[stop].when must be one of cycles, settled",)),
    ],
)
def test_bad_plans_are_refused_with_one_line_before_any_write(
    tmp_path: Path, tables: str, words: tuple[str, ...]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(BASE + tables + "\n")
    result = rig("run", str(path), "--db", str(tmp_path / "c.sqlite"), cwd=tmp_path)
    assert_one_line_refusal(result, *words)
    assert not (tmp_path / "c.sqlite").exists()


def test_a_plan_and_its_keys_parse() -> None:
    text = BASE + (
        "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nalpha = 0.05\nbeta = 0.1\nmax_cuts = 200\n"
        "scope = 'drive'\n[stop]\nwhen = 'settled'\n"
    )
    campaign = config.parse(text)
    assert campaign.criteria.sequential == Plan(0.01, 0.1, 0.05, 0.1, 200)
    assert campaign.criteria.scope == "drive" and campaign.stop.when == "settled"
    assert config.parse(BASE).criteria.as_json() == config.Criteria().as_json()
    assert "sequential" not in config.parse(BASE).criteria.as_json()
