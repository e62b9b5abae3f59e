"""`rig status` gives each drive the report's own per-drive verdict, under the campaign's stored
criteria: failure-free cuts are PASS only once they demonstrate the claim, and only the
criteria's classes fail a drive."""

from __future__ import annotations

import json
from pathlib import Path

from reports import export
from reports.load import summary
from rig.store import Store
from tests.reports.storebuilder import DriveSpec, build

CRITERIA = json.dumps(
    {
        "max_failure_probability": 0.05,
        "confidence": 0.95,
        "classes": ["lost_durable_write"],
        "min_cycles": 0,
    }
)

CONFIG = """[campaign]
name = "qual"
[criteria]
max_failure_probability = 0.05
classes = ["lost_durable_write"]
"""


def test_status_verdicts_are_the_reports(tmp_path: Path) -> None:
    db = build(
        tmp_path / "s.sqlite",
        [
            DriveSpec("Enough", "E1", ["ok"] * 59, channel=0),  # 59: p < 0.05 at 95 %
            DriveSpec("Short", "S1", ["ok"] * 58, channel=1),
            # any failure fails the drive itself; the criteria's classes count for the model
            DriveSpec("Uncounted", "U1", ["ok"] * 80 + ["shorn_write"], channel=2),
            DriveSpec("Lost", "L1", ["ok"] * 80 + ["lost_durable_write"], channel=3),
        ],
        config=CONFIG,
        criteria_column=CRITERIA,
    )
    store = Store(str(db))
    try:
        status = {d.model: d.verdict for d in summary.load(store).drives}
    finally:
        store.close()
    assert status == {
        "Enough": "PASS",
        "Short": "NOT YET DEMONSTRATED",
        "Uncounted": "FAIL",
        "Lost": "FAIL",
    }
    export.write_report([str(db)], str(tmp_path / "out"))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    in_report = {d["model"]: d["verdict"] for m in report["models"] for d in m["drives"]}
    assert in_report == status
