"""Verdicts count only the cuts that could have failed (docs/checker.md, "Exposure"): the
worked example's plan (docs/campaign.md: p0 0.01, p1 0.1, alpha 0.05, beta 0.1, max_cuts 100,
one plan per drive, stop when settled) on in-process drives with the documented workload
defaults (no [workload] table), over many seeds: a drive that loses durable data, tears writes
or misdirects them never settles PASS; the PLP drive's PASS rests on at least the plan's PASS
count of cuts exposed to a lost durable write; and a workload that never flushes reports lost
durable writes "not exercised" instead of passing them.

On main the plan stepped on every cut: the lying-flush drive settled PASS when its cuts held
no durable write (issue's measurement: three runs of four), and the PLP drive passed on cuts
that held none either. The CI variant runs a few seeds; `-m slow` runs twenty."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fixtures import sim_station
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.store import Store
from rig.verdict.sequential import Plan
from tests.cli_runner import rig
from tests.interface.test_cli_refusals import assert_one_line_refusal
from tests.json_schemas import validate

PLAN = Plan(0.01, 0.1, 0.05, 0.1, 100)
DRIVES = {0: "plp", 1: "lying-flush", 2: "torn", 3: "misdirecting"}


def campaign_text(seed: int, workload: str = "") -> str:
    """The documented defaults: no [workload] and no [cut] table but the region and the plan."""
    drives = "".join(
        f'[[drive]]\nchannel = {ch}\nmodel = "M{ch}"\nserial = "S{seed}X{ch}"\n'
        f'profile = "{profile}"\n'
        for ch, profile in DRIVES.items()
    )
    return (
        f'[campaign]\nname = "exposure"\ncycles = 150\nseed = {seed}\nregion_mib = 16\n'
        '[station]\nkind = "simulated"\ntwin = "in-process"\n'
        f"{workload}"
        "[criteria.sequential]\np0 = 0.01\np1 = 0.1\nalpha = 0.05\nbeta = 0.1\nmax_cuts = 100\n"
        'scope = "drive"\n[stop]\nwhen = "settled"\n'
        f"{drives}"
    )


def run(tmp_path: Path, seed: int) -> tuple[dict[str, dict[str, object]], dict[int, int]]:
    """The settled events by key, and per channel the cuts up to its plan's decision whose
    ledger holds a durable write (the store's own `writes_durable`, not the exposure rule)."""
    campaign = campaign_file.parse(campaign_text(seed))
    assert campaign.criteria.sequential == PLAN
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / f"s{seed}.sqlite"))
    try:
        run_campaign(campaign, station, store, Observer())
        rows = store.query("SELECT detail FROM event WHERE kind = 'settled'")
        events = {str(d["key"]): d for d in (json.loads(r["detail"]) for r in rows)}
        durable = {}
        for ch in DRIVES:
            upto = int(str(events.get(f"ch{ch}", {}).get("seq", 10**9)))
            durable[ch] = store.query(
                "SELECT COUNT(*) AS n FROM cycle c JOIN drive d ON d.id = c.drive_id"
                " WHERE d.channel = ? AND c.seq <= ? AND c.status = 'ok'"
                " AND c.writes_durable > 0",
                (ch, upto),
            )[0]["n"]
    finally:
        store.close()
    return events, durable


def assert_exposed_verdicts(
    events: dict[str, dict[str, object]], durable: dict[int, int], seed: int
) -> None:
    for ch in (1, 2, 3):  # lying-flush, torn, misdirecting: never PASS
        settled = events.get(f"ch{ch}")
        assert settled is None or settled["decision"] == "FAIL", (seed, DRIVES[ch], settled)
    plp = events.get("ch0")
    assert plp is not None and plp["decision"] == "PASS", (seed, plp)  # a clean drive passes
    # ... on at least the plan's PASS count of cuts that held a durable write
    assert durable[0] >= PLAN.cuts_to_pass(), (seed, durable[0], plp)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_few_seeds_no_failing_drive_passes_and_the_plp_pass_is_exposed(
    tmp_path: Path, seed: int
) -> None:
    assert_exposed_verdicts(*run(tmp_path, seed), seed)


@pytest.mark.slow
def test_twenty_seeds_no_failing_drive_passes_and_the_plp_pass_is_exposed(
    tmp_path: Path,
) -> None:
    for seed in range(100, 120):
        assert_exposed_verdicts(*run(tmp_path, seed), seed)


def test_a_workload_that_never_flushes_reports_lost_durable_writes_not_exercised(
    tmp_path: Path,
) -> None:
    text = campaign_text(7, "[workload]\nflush_every = 0\n").replace("cycles = 150", "cycles = 40")
    campaign = campaign_file.parse(text)
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "noflush.sqlite"))
    notes: list[str] = []

    class Notes(Observer):
        def message(self, line: str) -> None:
            notes.append(line)

    try:
        run_campaign(campaign, station, store, Notes())
        # one line at the start says what cannot be judged
        said = [n for n in notes if "cannot be judged" in n]
        assert len(said) == 1 and "lost_durable_write" in said[0]
        rows = store.query("SELECT detail FROM event WHERE kind = 'settled'")
        exposed = [r["exposed"] for r in store.query("SELECT exposed FROM cycle")]
    finally:
        store.close()
    assert all("lost_durable_write" not in (e or "") for e in exposed)
    events = {str(d["key"]): d for d in (json.loads(r["detail"]) for r in rows)}
    plp = events["ch0"]  # passed on the classes it could judge, lost durable writes named
    assert plp["classes"]["lost_durable_write"] == {  # type: ignore[index]
        "exposed": 0,
        "failing": 0,
        "decision": "NOT EXERCISED",
    }
    assert "not exercised: lost_durable_write" in str(plp["rule"])
    # rig status --json says per class what the cuts were exposed to (schema: docs/json/)
    done = rig("status", str(tmp_path / "noflush.sqlite"), "--json", cwd=tmp_path)
    doc = json.loads(done.stdout)
    validate(doc)
    plp_row = next(d for d in doc["drives"] if d["channel"] == 0)
    assert "lost_durable_write" not in plp_row["exposure"]
    shorn = plp_row["exposure"]["shorn_write"]
    assert (shorn["exposed"], shorn["failing"]) == (plp_row["cuts"], 0)
    assert shorn["upper_bound"] == pytest.approx(-math.expm1(math.log(0.05) / plp_row["cuts"]))


def test_an_unknown_zero_tolerance_class_is_refused_in_one_line_before_any_write(
    tmp_path: Path,
) -> None:
    table = '[criteria]\nzero_tolerance = ["lost_write"]\n'
    text = campaign_text(3).replace("[criteria.sequential]", table + "[criteria.sequential]")
    (tmp_path / "c.toml").write_text(text)
    done = rig("run", "c.toml", "--db", "s.sqlite", cwd=tmp_path)
    assert_one_line_refusal(done, "[criteria].zero_tolerance", "'lost_write'")
    assert not (tmp_path / "s.sqlite").exists()  # nothing written
