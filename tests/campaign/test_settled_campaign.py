"""Sequential verdicts in a running campaign: `[criteria.sequential]` and `[stop] when =
"settled"` on the demo's three in-process drives (each its own model), the refusals of bad
plans, and a resume that replays the plan instead of starting it afresh."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fixtures import sim_station
from reports import export
from reports.render import html
from rig.campaign import recording, settle
from rig.campaign.observer import Lines, Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign as campaign_spec
from rig.config import campaign_file
from rig.interface import demo
from rig.store import Store
from rig.verdict.sequential import CONTINUE, FAIL, Plan
from tests.cli_runner import rig
from tests.interface.test_cli_refusals import assert_one_line_refusal

PLAN = Plan(0.01, 0.1, 0.05, 0.1, 100)


def settled_demo(cycles: int, when: str = "settled") -> campaign_spec.Campaign:
    """The demo's campaign file with a plan (and the stop rule), on in-process drives."""
    text = demo.DEMO_CAMPAIGN.read_text() + (
        f"[criteria.sequential]\np0 = {PLAN.p0}\np1 = {PLAN.p1}\nalpha = {PLAN.alpha}\n"
        f"beta = {PLAN.beta}\nmax_cuts = {PLAN.max_cuts}\n[stop]\nwhen = '{when}'\n"
    )
    campaign = campaign_file.parse(text)
    spec = demo.campaign(in_process=True).station
    assert campaign.criteria.sequential == PLAN and campaign.stop.when == when
    return dataclasses.replace(campaign, cycles=cycles, station=spec)


def model_of(label: str) -> str:
    return label.split(" s/n")[0]


def passed_on_the_plans_cuts(event: dict[str, object]) -> bool:
    """Every class of a PASS passed on exactly the plan's count of cuts exposed to it (its plan
    stops counting once it decides), the others were not exercised."""
    classes = event["classes"]
    assert isinstance(classes, dict)
    decisions = {c["decision"] for c in classes.values()}
    passed = [c["exposed"] for c in classes.values() if c["decision"] == "PASS"]
    return decisions <= {"PASS", "NOT EXERCISED"} and set(passed) == {PLAN.cuts_to_pass()}


def settled_events(store: Store) -> dict[str, dict[str, object]]:
    rows = store.query("SELECT detail FROM event WHERE kind = 'settled'")
    return {str(d["key"]): d for d in (json.loads(r["detail"]) for r in rows)}


def test_settled_stops_failing_models_early_and_runs_the_plp_drive_to_its_pass(
    tmp_path: Path,
) -> None:
    campaign = settled_demo(cycles=150)
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "demo.sqlite"))
    summaries = {model_of(s.label): s for s in run_campaign(campaign, station, store, Lines())}
    plp, liar, torn = (
        summaries["RIGSIM Enterprise PLP"],
        summaries["RIGSIM Lying Flush"],
        summaries["RIGSIM Torn Writer"],
    )
    events = settled_events(store)
    # each failing drive stops at the cut its plan decides on: a failing one (zero tolerance
    # for the liar's lost durable writes; for the torn writer, shorn writes on the second
    # failing exposed cut, the plan's FAIL that the cut before had not reached)
    for s in (liar, torn):
        model = model_of(s.label)
        event = events[model]
        assert event["decision"] == "FAIL"
        assert s.cycles == event["cuts"]
        assert s.stopped_by == f"plan settled: FAIL after {s.cycles} cuts"
        last = store.query(
            "SELECT c.failures FROM cycle c JOIN drive d ON d.id = c.drive_id"
            " WHERE d.model = ? AND c.seq = ?",
            (model, s.cycles),
        )
        assert last[0]["failures"] > 0
        classes = event["classes"]
        assert isinstance(classes, dict)
        for cls in (c for c, v in classes.items() if v["decision"] == FAIL):
            n, k = classes[cls]["exposed"], classes[cls]["failing"]
            assert PLAN.decide(n, k) == FAIL and PLAN.decide(n - 1, k - 1) == CONTINUE, cls
        # and early: before any failure-free run could have passed it. Each of their cuts
        # fails with p > 0.5 here (the torn writer's shorn writes: 16 failing of 22 exposed
        # cuts in 8 campaigns beside two busy loops), so a FAIL later than this has a chance
        # below 25 / 2**24 = 1.5e-6 per campaign (fewer than 2 failing in 24 cuts)
        assert s.cycles < PLAN.cuts_to_pass()
    # the PLP drive goes on until its plan passes it: every failure-free cut up to the boundary
    # ... each judged class on its own exposed cuts (rig/check/exposure.py): at least the
    # plan's PASS count of cuts exposed to every class it judged
    passed = events["RIGSIM Enterprise PLP"]
    assert {k: passed[k] for k in ("scope", "key", "decision", "failing", "plan")} == {
        "scope": "model",
        "key": "RIGSIM Enterprise PLP",
        "decision": "PASS",
        "failing": 0,
        "plan": PLAN.as_json(),
    }
    assert passed["seq"] == passed["cuts"] >= PLAN.cuts_to_pass()
    per_class = passed["classes"]
    assert isinstance(per_class, dict)
    assert per_class["lost_durable_write"]["exposed"] >= PLAN.cuts_to_pass()
    assert per_class["counter_anomaly"]["decision"] == "NOT EXERCISED"  # no health in-process
    assert plp.cycles == passed["cuts"] < 150
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


CYCLES = 10


def test_without_settled_the_plan_decides_but_stops_nothing(tmp_path: Path) -> None:
    """...and the report pools the plan over two stations' stores. (The torn writer needs two
    torn cuts to decide FAIL; a loaded host tears fewer writes in flight, so each store runs 10
    cycles, still short of the 24 clean cuts that decide PASS for the PLP drive.)"""
    stores = []
    for name in ("alpha", "beta"):
        campaign = settled_demo(cycles=CYCLES, when="cycles")
        campaign = dataclasses.replace(campaign, seed=campaign.seed + len(stores))
        station, _ = sim_station.build(campaign)
        stores.append(str(tmp_path / f"{name}.sqlite"))
        store = Store(stores[-1])
        summaries = run_campaign(campaign, station, store, Observer())
        assert [s.cycles for s in summaries] == [CYCLES] * 3
        assert {k: e["decision"] for k, e in settled_events(store).items()} == {
            "RIGSIM Lying Flush": "FAIL",
            "RIGSIM Torn Writer": "FAIL",
        }
        store.close()
    export.write_report(stores, str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    seq = {m["model"]: m["sequential"] for m in report["models"]}
    plp = seq["RIGSIM Enterprise PLP"]
    assert plp["model"] == {
        "decision": "continuing",
        "cuts": 2 * CYCLES,
        "failing": 0,
        "cuts_seen": 2 * CYCLES,
    }
    assert [d["decision"]["cuts_seen"] for d in plp["drives"]] == [
        2 * CYCLES
    ]  # one drive, two stores
    assert not plp["stopped_when_settled"]
    liar = seq["RIGSIM Lying Flush"]["model"]
    assert liar["decision"] == "FAIL" and liar["cuts"] < liar["cuts_seen"] == 2 * CYCLES


def test_a_resumed_plan_continues_from_the_recorded_cuts(tmp_path: Path) -> None:
    """What a resume builds (rig/campaign/parallel.py): the recorded cycles replayed in record
    order put each plan where it was; a campaign without a plan has none."""
    campaign = settled_demo(cycles=10, when="cycles")
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "demo.sqlite"))
    run_campaign(campaign, station, store, Observer())
    replayed = settle.for_campaign(campaign, recording.cut_outcomes(store, 1))
    assert replayed is not None
    plp = replayed.tallies["RIGSIM Enterprise PLP"]
    recorded = store.query(  # the cuts the store says were exposed to a lost durable write
        "SELECT COUNT(*) AS n FROM cycle c JOIN drive d ON d.id = c.drive_id"
        " WHERE d.model = 'RIGSIM Enterprise PLP' AND ',' || c.exposed || ',' LIKE ?",
        ("%,lost_durable_write,%",),
    )[0]["n"]
    assert 0 < recorded <= 10
    assert (plp.cuts, plp.failing, plp.exposed["lost_durable_write"]) == (10, 0, recorded)
    decided = {k: (d.decision, d.cuts) for k, d in replayed.decided.items()}
    events = settled_events(store)
    assert decided == {k: (e["decision"], e["cuts"]) for k, e in events.items()}
    # the liar fails in its first cuts; the torn writer decides only once a tear falls on a
    # cut, which 10 cycles do not always hold (its decision, when there is one, is compared above)
    assert "RIGSIM Lying Flush" in decided
    assert set(decided) <= {"RIGSIM Lying Flush", "RIGSIM Torn Writer"}
    unplanned = dataclasses.replace(campaign, criteria=campaign_spec.Criteria())
    assert settle.for_campaign(unplanned, recording.cut_outcomes(store, 1)) is None
    store.close()


MIXED = """
[campaign]
name = "mixed"
cycles = 60
seed = 11
region_mib = 4
[station]
kind = "simulated"
[workload]
workers = 4
write_blocks = [1, 2, 4]
flush_every = 2
[cut]
delay_ms = [2, 20]
off_ms = 1
sample_blocks = 64
[criteria.sequential]
p0 = 0.01
p1 = 0.1
max_cuts = 100
scope = "{scope}"
[stop]
when = "settled"
[[drive]]
channel = 0
model = "M1"
serial = "LIAR"
profile = "lying-flush"
[[drive]]
channel = 1
model = "M1"
serial = "GOOD"
profile = "plp"
[[drive]]
channel = 2
model = "M2"
serial = "OTHER"
profile = "plp"
"""


def test_a_model_plan_stops_all_its_drives_and_a_drive_plan_only_that_drive(
    tmp_path: Path,
) -> None:
    """Model M1 has a lying drive and a good one, M2 a good one. Pooled per model, M1's plan
    FAILs on the liar's cuts and stops both M1 drives; M2 goes on to its own PASS. Per drive,
    only the liar stops early; the good M1 drive runs to its PASS."""
    runs, events = {}, {}
    for scope in ("model", "drive"):
        campaign = campaign_file.parse(MIXED.format(scope=scope))
        station, _ = sim_station.build(campaign)
        store = Store(str(tmp_path / f"{scope}.sqlite"))
        runs[scope] = {s.channel: s for s in run_campaign(campaign, station, store, Lines())}
        events[scope] = settled_events(store)
        store.close()
    pooled, alone = runs["model"], runs["drive"]
    to_pass = PLAN.cuts_to_pass()
    assert pooled[0].stopped_by.startswith("plan settled: FAIL")
    assert pooled[1].stopped_by == pooled[0].stopped_by  # the good M1 drive stops with it
    assert pooled[1].cycles < to_pass and pooled[1].failures == {}
    # a PASS needs `to_pass` cuts exposed to every judged class (each class's plan stops
    # counting once it decided): more cuts where some cuts exposed a class to nothing
    assert pooled[2].stopped_by == f"plan settled: PASS after {pooled[2].cycles} cuts"
    assert pooled[2].cycles >= to_pass and passed_on_the_plans_cuts(events["model"]["M2"])
    assert set(events["model"]) == {"M1", "M2"}
    assert alone[0].stopped_by.startswith("plan settled: FAIL")
    for channel in (1, 2):
        done = alone[channel].cycles
        assert alone[channel].stopped_by == f"plan settled: PASS after {done} cuts"
        assert done >= to_pass and passed_on_the_plans_cuts(events["drive"][f"ch{channel}"])
    assert set(events["drive"]) == {"ch0", "ch1", "ch2"}


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
        (
            "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nmax_cuts = 100\n[stop]\nwhen = 'settled'\n"
            "[endurance]\nintervals = 2",
            ("is for cut campaigns, not [endurance]",),
        ),
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
    campaign = campaign_file.parse(text)
    assert campaign.criteria.sequential == Plan(0.01, 0.1, 0.05, 0.1, 200)
    assert campaign.criteria.scope == "drive" and campaign.stop.when == "settled"
    assert campaign_file.parse(BASE).criteria.as_json() == campaign_spec.Criteria().as_json()
    assert "sequential" not in campaign_file.parse(BASE).criteria.as_json()


def test_rig_run_prints_one_verdict_per_drive_the_plans(tmp_path: Path) -> None:
    """The end table of `rig run` names the plan's decision for a settled drive, never the
    fixed-sample NOT YET DEMONSTRATED beside a plan's PASS."""
    text = demo.DEMO_CAMPAIGN.read_text().replace('twin = "simavr"', 'twin = "in-process"')
    text += (
        f"[criteria.sequential]\np0 = {PLAN.p0}\np1 = {PLAN.p1}\nalpha = {PLAN.alpha}\n"
        f"beta = {PLAN.beta}\nmax_cuts = {PLAN.max_cuts}\n[stop]\nwhen = 'settled'\n"
    )
    (tmp_path / "c.toml").write_text(text)
    done = rig("run", "c.toml", "--db", "s.sqlite", "--quiet", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # (two drives fail)
    table = [line for line in done.stdout.splitlines() if line.startswith(" 0  RIGSIM")]
    assert len(table) == 1, done.stdout  # the PLP drive's row of the end table
    assert "PASS (sequential plan, after" in table[0] and "NOT YET" not in table[0], table
