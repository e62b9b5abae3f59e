"""A model's verdict from the central database's per-drive totals (schema v5,
reports/analysis/model_summary.py) equals the report's verdict from every cut
(reports/analysis/reliability.py) on
the same rows: per model over the fleet and per campaign, under the demo's own criteria (its
lying drive FAILs) and under criteria lax enough that the honest drives' models PASS; the model
page shows it without the per-cut report."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from fixtures.pgcluster import Cluster
from reports.analysis import reliability as analysis
from reports.analysis.model_summary import ModelSummary
from reports.render.cells import pct
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.dashboard import create_app
from rig.interface.fleet.replicator import replicate_store
from rig.interface.fleet.views import CentralView
from rig.store import open_existing
from tests.cli_runner import rig

CYCLES = 16
LAX = {"max_failure_probability": 0.5, "confidence": 0.8}  # a few failure-free cuts pass


@pytest.fixture(scope="module")
def view(pg: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CentralView]:
    out = tmp_path_factory.mktemp("demo")
    args = ("--in-process", "--cycles", str(CYCLES), "--quiet", "--out", str(out))
    done = rig("demo", *args, cwd=out)
    assert done.returncode == 0, done.stderr
    store = open_existing(str(out / "demo.sqlite"))
    try:
        with CentralStore(pg.dsn("rig_station_alpha")) as alpha:
            assert replicate_store(store, alpha, alpha.my_station(), ledgers=False) > 0
    finally:
        store.close()
    reader = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    yield reader
    reader.close()


def _facts(m: ModelSummary) -> dict[str, object]:
    return {
        "label": m.verdict.label,
        "reasons": sorted(m.verdict.reasons),
        "needed": m.verdict.cuts_needed,
        "cuts": m.cuts,
        "criteria failing": m.criteria_failure.failed,
        "any failing": m.any_failure.failed,
        "drives": sorted((d.name, d.cuts, d.failing, d.verdict) for d in m.drives),
        "rig errors": m.rig_errors,
    }


def _facts_of_cuts(data: object) -> dict[str, dict[str, object]]:
    found = {}
    for m in analysis.analyse(data).models:  # type: ignore[arg-type]
        found[m.model] = {
            "label": m.verdict.label,
            "reasons": sorted(m.verdict.reasons),
            "needed": m.verdict.cuts_needed,
            "cuts": m.cuts,
            "criteria failing": m.criteria_failure.failed,
            "any failing": m.any_failure.failed,
            "drives": sorted(
                (d.serial or d.wwn, d.cuts.trials, d.cuts.failed, d.verdict) for d in m.drives
            ),
            "rig errors": m.rig_errors,
        }
    return found


def _same_as_the_analysis(view: CentralView) -> set[str]:
    summaries = view.model_summaries()
    assert summaries
    labels = set()
    for model, m in summaries.items():
        assert {model: _facts(m)} == _facts_of_cuts(view.model_dataset(model))
        labels.add(m.verdict.label)
    for c in view.overview().campaigns:
        per_campaign = view.model_summaries(campaign=c.key)
        assert {k: _facts(m) for k, m in per_campaign.items()} == _facts_of_cuts(
            view.campaign_dataset(c.key)
        )
    return labels


def test_the_summaries_verdict_is_the_reports(pg: Cluster, view: CentralView) -> None:
    assert "FAIL" in _same_as_the_analysis(view)  # the lying drive's model
    _state(pg, LAX)  # criteria lax enough that the honest drives' models pass
    labels = _same_as_the_analysis(view)
    assert {"PASS", "FAIL"} <= labels, labels
    # criteria that count one class only: the cuts failing in it, not in any class (the lying
    # and the torn drive fail in different classes)
    found = {c for m in view.model_summaries().values() for s in m.failing_sets for c in s}
    assert len(found) > 1, found
    _state(pg, {**LAX, "classes": [sorted(found)[0]]})
    _same_as_the_analysis(view)


def _state(pg: Cluster, criteria: dict[str, object]) -> None:
    """Every campaign states `criteria` (in its file's [criteria] table and the column)."""
    table = "".join(f"\n{k} = {json.dumps(v)}" for k, v in criteria.items())
    with psycopg.connect(pg.dsn()) as db:
        db.execute(
            "UPDATE fleet.campaign SET config = regexp_replace(config, '\\n\\[criteria\\].*', '')"
            " || %s, criteria = %s",
            (f"\n[criteria]{table}\n", json.dumps(criteria)),
        )


def test_the_model_page_comes_from_the_summaries(view: CentralView) -> None:
    summaries = view.model_summaries()
    failing = next(m for m in summaries.values() if m.any_failure.failed)
    client = create_app(view).test_client()
    page = client.get(f"/fragment/model/{failing.model}").get_data(as_text=True)
    assert f'verdict {failing.verdict.css}">{failing.verdict.label}' in page
    assert all(d.name in page for d in failing.drives)
    assert "rig report --central" in page
    assert "<svg" not in page  # no per-cut chart
    assert client.get("/fragment/model/no such model").status_code == 404


def _exposure_facts(classes: object) -> list[tuple[object, ...]]:
    return [
        (e.cls, e.cuts.trials, e.cuts.failed, e.cuts.upper, e.unknown, e.zero_tolerance, e.verdict)
        for e in classes  # type: ignore[attr-defined]
    ]


def test_the_model_page_states_the_reports_exposure_per_class_and_drive(
    pg: Cluster, view: CentralView
) -> None:
    """Per model and per drive, each judged class's exposed and failing cuts and the bound over
    them (reports/analysis/exposure.py's own figures, from the replicated `fleet.cycle.exposed`)
    are the report's from every cut; the page shows them, and "not exercised" where no cut was
    exposed."""
    _state(pg, {})  # the default criteria: every class judged (another test may have set some)
    client = create_app(view).test_client()
    for model in view.model_summaries():
        m = view.model_summaries(model)[model]
        (reported,) = analysis.analyse(view.model_dataset(model)).models
        assert m.exposure and _exposure_facts(m.exposure) == _exposure_facts(reported.exposure)
        assert any(e.cuts.trials for e in m.exposure)
        per_drive = {d.serial or d.wwn: d for d in reported.drives}
        for d in m.drives:
            assert sum(e.cuts.trials for e in d.exposure) > 0
            assert {e.cls for e in d.exposure} == {e.cls for e in m.exposure}
            for e in d.exposure:  # each drive's counts add up to the model's
                assert e.cuts.trials <= next(x for x in m.exposure if x.cls == e.cls).cuts.trials
            assert d.name in per_drive
        page = client.get(f"/fragment/model/{model}").get_data(as_text=True)
        stated = f"{m.criteria.confidence * 100:.0f}% upper bound"  # (the criteria in force)
        assert "Exposure per class" in page and stated in page
        for e in m.exposure:
            assert f"<td>{e.cls}</td><td class='n'>{e.cuts.trials}</td>" in page
            if e.cuts.trials:
                shown = f"{e.cls} {e.cuts.failed}/{e.cuts.trials} &lt;= {pct(e.cuts.upper)}"
                assert shown in page or len(m.drives) > 1
            else:
                assert "NOT EXERCISED" in page and f"{e.cls} not exercised" in page
    assert any(
        not e.cuts.trials
        for model in view.model_summaries()
        for e in view.model_summaries(model)[model].exposure
    ), "the demo leaves some class not exercised (a discard-free workload)"
