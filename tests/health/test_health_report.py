"""The report's health section names a model without an unsafe-shutdown counter:
"counter not available", rather than a drive whose cuts were silently not judged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from drive_models import SAMSUNG_PM893, without_drivedb_entry
from health_paths import real_file

from reports.analysis import reliability as analysis
from reports.load import dataset
from reports.render import html
from rig.health.smart import parse_smartctl_json
from rig.health.snapshot import HealthSnapshot
from rig.health.tracker import snapshot_fields
from tests.reports.storebuilder import DriveSpec, build

MICRON_SATA = "sat-Micron_5100_Pro___52x0___5300_SSDs-Micron_5300_MTFDDAK1T9TDS-sda.json"


def _pm893_without_drivedb_entry() -> HealthSnapshot:
    return parse_smartctl_json(without_drivedb_entry(SAMSUNG_PM893, 235))


def _series(snap: HealthSnapshot, cuts: int) -> list[tuple[int, dict[str, object]]]:
    rows = []
    for seq in range(cuts + 1):
        moved = replace(
            snap,
            power_cycles=(snap.power_cycles or 0) + seq,
            unsafe_shutdowns=None if snap.unsafe_shutdowns is None else snap.unsafe_shutdowns + seq,
        )
        rows.append((seq, snapshot_fields(moved)))
    return rows


def test_model_without_unsafe_counter_is_named_in_the_report(tmp_path: Path) -> None:
    pm893 = _pm893_without_drivedb_entry()
    micron = parse_smartctl_json(real_file(MICRON_SATA).read_text())
    assert pm893.unsafe_shutdowns is None and micron.unsafe_shutdowns_source is not None
    db = build(
        tmp_path / "h.sqlite",
        [
            DriveSpec("PM893", "NOCOUNTER", ["ok"] * 3, health=_series(pm893, 3), channel=0),
            DriveSpec("M5300", "COUNTED", ["ok"] * 3, health=_series(micron, 3), channel=1),
        ],
    )
    models = {m.model: m for m in analysis.analyse(dataset.load([str(db)])).models}
    (no_counter,) = models["PM893"].health
    (counted,) = models["M5300"].health
    assert no_counter.unsafe_source is None
    assert counted.unsafe_source == micron.unsafe_shutdowns_source
    page = html.health_section(models["PM893"])
    assert html.UNSAFE_COUNTER_MISSING in page and "cuts not judged" in page
    page = html.health_section(models["M5300"])
    assert html.UNSAFE_COUNTER_MISSING not in page
    assert str(micron.unsafe_shutdowns_source) in page
