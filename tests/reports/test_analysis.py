"""Report figures from real stores with known outcomes: merge, units, bounds, verdicts, survival."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from reports.analysis import reliability as analysis
from reports.load import dataset
from reports.render import html
from rig.errors import UserError
from rig.verdict import stats
from tests.reports.storebuilder import DriveSpec, build

CRITERIA = """[campaign]
name = "qual"
[criteria]
max_failure_probability = 0.001
confidence = 0.95
classes = ["lost_durable_write"]
"""


def _model(report: analysis.Report, name: str) -> analysis.ModelReport:
    return next(m for m in report.models if m.model == name)


def test_two_stations_merge_into_one_report(tmp_path: Path) -> None:
    a = build(
        tmp_path / "a.sqlite",
        [
            DriveSpec("Model X", "X1", ["ok"] * 8 + ["lost_durable_write"] * 2, channel=0),
            DriveSpec("Model Y", "Y1", ["ok"] * 5, channel=1, firmware="Y7"),
        ],
        station="station-a",
    )
    b = build(
        tmp_path / "b.sqlite",
        [
            # the same physical drive X1 moved to the other station, plus a new one
            DriveSpec("Model X", "X1", ["ok", "shorn_write+lost_durable_write", "error"]),
            DriveSpec("Model X", "X2", ["ok"] * 4, firmware="FW2", channel=3),
        ],
        name="qual-b",
        station="station-b",
    )
    report = analysis.analyse(dataset.load([str(a), str(b)]))
    assert [m.model for m in report.models] == ["Model X", "Model Y"]
    x = _model(report, "Model X")
    assert x.cuts == 10 + 2 + 4  # the rig error is not a cut
    assert x.rig_errors == 1
    assert x.any_failure.failed == 3
    assert {d.serial: d.cuts.trials for d in x.drives} == {"X1": 12, "X2": 4}
    # each lost durable write's time since its ack and flush, from the finding's detail
    assert x.lost_after_ack_ms == [3.0] * 3 and x.lost_after_flush_ms == [2.0] * 3
    x1 = next(d for d in x.drives if d.serial == "X1")
    assert x1.blocks_checked == 12 * 64 and x1.full_scans == 1  # cycle 10 of station a
    assert x1.bytes_written == 13 * 3 * 4096  # the rig error's writes count as written
    assert {d.serial: d.stations for d in x.drives}["X1"] == ["station-a", "station-b"]
    assert set(x.firmware) == {"FW1", "FW2"}
    assert x.firmware["FW1"].failed == 3 and x.firmware["FW1"].trials == 12
    classes = {c.cls: c for c in x.classes}
    assert classes["lost_durable_write"].cuts.failed == 3
    assert classes["lost_durable_write"].findings == 3
    assert classes["shorn_write"].cuts.failed == 1
    assert classes["lost_durable_write"].blocks == 6
    assert x.any_failure.upper == pytest.approx(stats.clopper_pearson_upper(3, 16))
    assert x.drive_level.failed == 1 and x.drive_level.trials == 2
    assert [c.name for c in dataset.load([str(a), str(b)]).campaigns] == ["qual", "qual-b"]
    # model vs model: any failure and each class seen, Holm over all of them
    tests = {c.outcome: c for c in report.comparisons}
    assert set(tests) == {"any failure", "lost_durable_write", "shorn_write"}
    assert tests["any failure"].p_value == pytest.approx(stats.fisher_exact(3, 13, 0, 5))
    assert tests["shorn_write"].p_value == pytest.approx(stats.fisher_exact(1, 15, 0, 5))
    raw = [c.p_value for c in report.comparisons]
    assert [c.p_holm for c in report.comparisons] == pytest.approx(stats.holm(raw))


def test_the_same_campaign_twice_is_refused(tmp_path: Path) -> None:
    a = build(tmp_path / "a.sqlite", [DriveSpec("M", "S", ["ok"])])
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(a.read_bytes())
    with pytest.raises(UserError, match="also in"):
        dataset.load([str(a), str(copy)])


def test_a_store_is_never_changed_by_a_report(tmp_path: Path) -> None:
    a = build(tmp_path / "a.sqlite", [DriveSpec("M", "S", ["ok", "ok"])])
    before = a.read_bytes()
    dataset.load([str(a)])
    assert a.read_bytes() == before


@pytest.mark.parametrize(
    ("cuts", "label"),
    [(2995, "PASS"), (2994, "NOT YET DEMONSTRATED")],
)
def test_verdict_follows_the_success_run_theorem(tmp_path: Path, cuts: int, label: str) -> None:
    # zero lost durable writes in 2,995 cuts demonstrates p < 1e-3 at 95%; 2,994 does not.
    # Shorn writes do not count: the criteria name lost durable writes only.
    outcomes = ["ok"] * (cuts - 1) + ["shorn_write"]
    db = build(tmp_path / "q.sqlite", [DriveSpec("M", "S", outcomes)], config=CRITERIA)
    model = analysis.analyse(dataset.load([str(db)])).models[0]
    assert model.criteria.stated and model.criteria.classes == ("lost_durable_write",)
    assert model.criteria_failure.failed == 0 and model.criteria_failure.trials == cuts
    assert model.any_failure.failed == 1
    assert model.cuts_needed == 2995
    assert model.verdict.label == label, model.verdict.reasons
    if label != "PASS":
        assert "not demonstrated" in model.verdict.reasons[0]
        assert model.verdict.cuts_needed == 1  # one more failure-free cut reaches the claim
    # the drive has no lost durable write but a shorn one: its own row says FAIL
    assert model.drives[0].verdict == "FAIL"


def test_default_criteria_are_said_to_be_the_default(tmp_path: Path) -> None:
    db = build(tmp_path / "q.sqlite", [DriveSpec("M", "S", ["ok"] * 3)])
    model = analysis.analyse(dataset.load([str(db)])).models[0]
    assert not model.criteria.stated
    assert "states no pass criteria" in model.criteria_note
    assert model.verdict.label == "NOT YET DEMONSTRATED"
    assert model.verdict.cuts_needed == 2995 - 3


def test_dead_drives_are_survival_events_and_fail_the_verdict(tmp_path: Path) -> None:
    db = build(
        tmp_path / "d.sqlite",
        [
            DriveSpec("M", "A", ["ok"] * 4 + ["dead"], channel=0),
            DriveSpec("M", "B", ["ok"] * 9 + ["dead"], channel=1),
            DriveSpec("M", "C", ["ok"] * 7, channel=2),
            DriveSpec("M", "D", ["ok"] * 12, channel=3),
        ],
    )
    model = analysis.analyse(dataset.load([str(db)])).models[0]
    assert model.drives_dead == 2
    assert sorted(model.survival.subjects) == [(5, True), (7, False), (10, True), (12, False)]
    assert [(s.time, s.at_risk, s.survival) for s in model.survival.steps] == [
        (5, 4, pytest.approx(0.75)),
        (10, 2, pytest.approx(0.375)),
    ]
    assert model.verdict.label == "FAIL"
    assert any("dead drive" in r for r in model.verdict.reasons)
    dead_at = {d.serial: d.dead_at_cut for d in model.drives}
    assert dead_at == {"A": 5, "B": 10, "C": None, "D": None}


@pytest.mark.parametrize("in_row", [True, False], ids=["v8-cycle-row", "older-ledger-only"])
def test_time_since_last_ack_and_flush_comes_from_the_write_log(
    tmp_path: Path, in_row: bool
) -> None:
    """The rig records the delays in the cycle row (v8); a store of an older rig has them only
    in the ledger blobs, which the report then reads: the same figures either way."""
    db = build(
        tmp_path / "t.sqlite",
        [
            DriveSpec(
                "M",
                "S",
                ["ok", "lost_durable_write", "ok"],
                delays_ms=[(0.5, 3.0), (2.0, 250.0), (40.0, 2000.0)],
                return_ms=123.0,
            )
        ],
        delays_in_row=in_row,
    )
    data = dataset.load([str(db)])
    cuts = data.runs[0].cuts
    assert [(c.ack_to_cut_ms, c.flush_to_cut_ms) for c in cuts] == [
        (0.5, 3.0),
        (2.0, 250.0),
        (40.0, 2000.0),
    ]
    assert all(c.return_ms == pytest.approx(123.0) for c in cuts)
    model = analysis.analyse(data).models[0]
    flush_bins = {b.low_ms: (b.cuts.failed, b.cuts.trials) for b in model.flush_bins}
    assert flush_bins == {0.0: (0, 0), 1.0: (0, 1), 10.0: (0, 0), 100.0: (1, 1), 1000.0: (0, 1)}
    assert model.return_quantiles["p50"] == pytest.approx(123.0)


def test_bad_stores_get_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such store"):
        dataset.load([str(tmp_path / "missing.sqlite")])
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not sqlite at all, just text " * 100)
    with pytest.raises(UserError, match="not a rig store"):
        dataset.load([str(junk)])
    newer = build(tmp_path / "n.sqlite", [DriveSpec("M", "S", ["ok"])])
    db = sqlite3.connect(newer)
    db.execute("PRAGMA user_version = 999")
    db.close()
    with pytest.raises(UserError, match="newer than this rig"):
        dataset.load([str(newer)])
    with pytest.raises(UserError, match="no store"):
        dataset.load([])


def test_strictest_of_differing_criteria_applies(tmp_path: Path) -> None:
    loose = CRITERIA.replace("0.001", "0.01")
    a = build(tmp_path / "a.sqlite", [DriveSpec("M", "S", ["ok"] * 400)], config=loose)
    b = build(tmp_path / "b.sqlite", [DriveSpec("M", "T", ["ok"] * 10)], name="b", config=CRITERIA)
    model = analysis.analyse(dataset.load([str(a), str(b)])).models[0]
    assert model.criteria.max_failure_rate == 0.001
    assert "strictest" in model.criteria_note
    # 410 clean cuts show p < 0.0073, not < 0.001: 2,995 are needed
    assert model.verdict.label == "NOT YET DEMONSTRATED"
    assert model.verdict.cuts_needed == 2995 - 410


def test_health_deltas_and_counter_anomalies(tmp_path: Path) -> None:
    honest = [
        (s, {"unsafe_shutdowns": 7 + s, "power_cycles": 40 + s, "media_errors": 0})
        for s in range(0, 4)
    ]
    liar = [
        (s, {"unsafe_shutdowns": 7, "power_cycles": 40 + s, "media_errors": s}) for s in range(0, 4)
    ]
    db = build(
        tmp_path / "h.sqlite",
        [
            DriveSpec("M", "HONEST", ["ok"] * 3, health=honest, channel=0),
            DriveSpec("M", "LIAR", ["counter_anomaly"] * 3, health=liar, channel=1),
            DriveSpec("M", "NONE", ["ok"] * 3, channel=2),
        ],
    )
    model = analysis.analyse(dataset.load([str(db)])).models[0]
    health = {h.drive: h for h in model.health}
    assert set(health) == {"HONEST", "LIAR"}  # a drive without snapshots has no health row
    assert health["HONEST"].unsafe_rise == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0)]
    assert health["LIAR"].unsafe_rise == [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0)]
    deltas = {d.field: d.delta for d in health["LIAR"].deltas}
    assert deltas == {"unsafe_shutdowns": 0, "power_cycles": 3, "media_errors": 3}
    assert health["LIAR"].cuts == 3 and health["LIAR"].snapshots == 4
    assert health["LIAR"].anomalies == {"unsafe_shutdowns": 3}
    assert [(a["drive"], a["seq"]) for a in model.anomalies] == [("LIAR", s) for s in (1, 2, 3)]
    assert {c.cls: c.cuts.failed for c in model.classes} == {"counter_anomaly": 3}


def test_min_cycles_per_drive_and_dead_drives_under_class_criteria(tmp_path: Path) -> None:
    text = CRITERIA.replace("0.001", "0.2") + "min_cycles = 20\n"
    db = build(
        tmp_path / "m.sqlite",
        [
            DriveSpec("M", "LONG", ["ok"] * 30, channel=0),
            DriveSpec("M", "SHORT", ["ok"] * 9 + ["dead"], channel=1),
        ],
        config=text,
    )
    model = analysis.analyse(dataset.load([str(db)])).models[0]
    assert model.criteria.min_cycles == 20
    # 0 lost durable writes in 40 cuts shows p < 0.072 < 0.2; dead_device is not a counted class
    assert model.criteria_failure.upper is not None and model.criteria_failure.upper < 0.2
    assert not any("dead" in r for r in model.verdict.reasons)
    assert model.verdict.label == "NOT YET DEMONSTRATED"  # SHORT needs 10 more cuts
    assert model.verdict.cuts_needed == 10
    assert any("SHORT (10)" in r for r in model.verdict.reasons)


def _rail(hi: int, lo: int | None, end: str = "fell") -> dict[str, object]:
    return {
        "hi_us": hi,
        "lo_us": lo,
        "end": end,
        "dt_us": 100,
        "samples": [800, 600, 300, 100, 20],
        "hi_threshold": 500,
        "lo_threshold": 50,
    }


def test_rail_fall_times_from_the_rail_sense_table(tmp_path: Path) -> None:
    db = build(
        tmp_path / "r.sqlite",
        [
            DriveSpec("M", "A", ["ok"] * 3, channel=0, rail=[_rail(150, 380), _rail(170, 390)]),
            DriveSpec(
                "M",
                "B",
                ["ok"] * 3,
                channel=1,
                rail=[_rail(900, None, "timeout"), _rail(200, 400), _rail(210, 420)],
            ),
            DriveSpec("M", "C", ["ok"], channel=2),
        ],
    )
    model = analysis.analyse(dataset.load([str(db)])).models[0]
    rail = {r.drive: r for r in model.rail}
    assert set(rail) == {"A", "B"}
    assert rail["A"].measured == 2 and rail["A"].ends == {"fell": 2}
    assert rail["A"].hi_us["p50"] == 150 and rail["A"].hi_us["max"] == 170
    assert rail["B"].ends == {"timeout": 1, "fell": 2}
    assert rail["B"].lo_us["max"] == 420 and rail["B"].lo_us["min"] == 400
    assert rail["B"].curves[0] == (100.0, [800, 600, 300, 100, 20])
    assert (rail["B"].hi_threshold, rail["B"].lo_threshold) == (500, 50)


@pytest.mark.parametrize("writes", [0, 1, 1000])
def test_ledger_columns_read_directly_equal_np_load(writes: int) -> None:
    import io

    import numpy as np

    from rig.io.ledger import CycleLog

    log = CycleLog()
    rng = np.random.default_rng(writes)
    for i in range(writes):
        gens = np.ones(int(rng.integers(1, 4)), dtype=np.uint32)
        done = int(rng.integers(-1, 10**12))
        log.add_write(i % 8, i, i * 4, gens, i, done, int(rng.integers(0, 2)), bool(i % 3))
        log.add_flush(i % 8, i, done, 0)
    blob = log.to_bytes()
    direct = dataset._npz_columns(blob, dataset.LEDGER_COLUMNS)
    reference = np.load(io.BytesIO(blob))
    for name in dataset.LEDGER_COLUMNS:
        assert direct[name].dtype == reference[name].dtype
        assert np.array_equal(direct[name], reference[name])


def test_criteria_column_is_what_the_rig_validated(tmp_path: Path) -> None:
    column = (
        '{"classes": ["lost_durable_write"], "confidence": 0.9,'
        ' "max_failure_probability": 0.05, "min_cycles": 0}'
    )
    stated = build(
        tmp_path / "s.sqlite",
        [DriveSpec("M", "S", ["ok"] * 30)],
        config=CRITERIA,
        criteria_column=column,
    )
    model = analysis.analyse(dataset.load([str(stated)])).models[0]
    assert (model.criteria.max_failure_rate, model.criteria.confidence) == (0.05, 0.9)
    assert model.criteria.stated
    # 0 in 30 cuts: p < 0.0739 at 90%, not below 0.05; 0 in 45 would be
    assert model.cuts_needed == 45 and model.verdict.label == "NOT YET DEMONSTRATED"
    assert model.verdict.cuts_needed == 15
    # the rig fills the column with its defaults when the file has no [criteria]
    defaults = column.replace("0.05", "0.001").replace("0.9", "0.95")
    unstated = build(tmp_path / "u.sqlite", [DriveSpec("M", "S", ["ok"])], criteria_column=defaults)
    model = analysis.analyse(dataset.load([str(unstated)])).models[0]
    assert not model.criteria.stated and "states no pass criteria" in model.criteria_note


def test_the_campaign_records_the_delays_its_ledger_gives(tmp_path: Path) -> None:
    """A real campaign fills the v8 delay columns; they equal what the report would read from
    the cycle's ledger blob."""
    from tests import scoring

    _, _, store = scoring.run(
        tmp_path / "delays.sqlite",
        # cut 2-12 ms after the arm, so some flush has completed before the cut even under load
        scoring.campaign_text(["honest", "lying-flush"], 8, delay_ms=(2, 12)),
    )
    rows = store.query(
        "SELECT c.cut_ns, c.last_ack_to_cut_ns, c.last_flush_to_cut_ns, l.writes FROM cycle c"
        " JOIN ledger l ON l.cycle_id = c.id"
    )
    assert len(rows) == 16
    for row in rows:
        assert row["last_ack_to_cut_ns"] is not None and row["last_flush_to_cut_ns"] is not None
        from_row = tuple(  # (-1: nothing before the cut)
            ns / 1e6 if ns >= 0 else None
            for ns in (row["last_ack_to_cut_ns"], row["last_flush_to_cut_ns"])
        )
        assert from_row == dataset._last_ack_and_flush(row["writes"], row["cut_ns"])
    assert any(row["last_flush_to_cut_ns"] > 0 for row in rows)


def test_verdict_three_states_and_drive_rows_agree(tmp_path: Path) -> None:
    """0 failures in 60 cuts against a 1e-3 claim is not a FAIL but NOT YET
    DEMONSTRATED, with the cuts still needed; the drive's own row says the same (it said PASS
    while the model's badge was a red FAIL). A drive that loses data every time is a FAIL."""
    clean = build(tmp_path / "c.sqlite", [DriveSpec("GOOD", "G1", ["ok"] * 60)], config=CRITERIA)
    model = analysis.analyse(dataset.load([str(clean)])).models[0]
    assert model.verdict.label == "NOT YET DEMONSTRATED" and not model.verdict.passed
    assert model.verdict.cuts_needed == 2995 - 60
    assert [d.verdict for d in model.drives] == ["NOT YET DEMONSTRATED"]
    page = html.render(analysis.analyse(dataset.load([str(clean)])))
    assert 'class="verdict NOT-YET-DEMONSTRATED"' in page
    assert 'class="verdict FAIL"' not in page and ">PASS<" not in page
    assert "2935 more failure-free cuts" in page

    lossy = ["lost_durable_write"] * 20
    bad = build(tmp_path / "b.sqlite", [DriveSpec("BAD", "B1", lossy)], name="b", config=CRITERIA)
    model = analysis.analyse(dataset.load([str(bad)])).models[0]
    assert model.verdict.label == "FAIL" and model.verdict.cuts_needed == 0
    # one verdict line naming the rule: lost durable writes are zero-tolerance (the pooled
    # bound, above the claim too, follows)
    assert model.verdict.rule == model.verdict.reasons[0]
    assert model.verdict.rule == "zero tolerance: lost_durable_write in 20 cut(s)"
    assert any("above 0.001" in r for r in model.verdict.reasons[1:])
    assert [d.verdict for d in model.drives] == ["FAIL"]

    # one loss in 100 cuts does not show p > 1e-3 (lower bound 5e-4) nor p < 1e-3: not yet,
    # where lost durable writes are not zero-tolerance (by default one FAILs at once)
    once = ["ok"] * 99 + ["lost_durable_write"]
    tolerant = CRITERIA + "zero_tolerance = []\n"
    one = build(tmp_path / "o.sqlite", [DriveSpec("ONE", "O1", once)], name="o", config=tolerant)
    model = analysis.analyse(dataset.load([str(one)])).models[0]
    assert model.verdict.label == "NOT YET DEMONSTRATED"
    assert model.verdict.cuts_needed == stats.trials_to_demonstrate(1, 1e-3, 0.95) - 100
