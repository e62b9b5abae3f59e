"""The brownout map reads each cut's shape from the dataset (the station loader carries it on the
drive's run, reports/load/cut_shapes.py), never by opening the stores again; a source whose loader
carries no shapes (the central database) is named in the section as not mapped yet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from reports.load import dataset
from reports.render import brownout
from rig.check import failures
from tests.reports.storebuilder import DriveSpec, build

SAG_CONFIG = '[campaign]\nname = "sag qual"\n[cut]\nkind = "sag"\n'


def sag(depth: float, duration_ms: float, kind: str = "sag") -> dict[str, object]:
    return {
        "kind": kind,
        "depth": depth,
        "unit": "%",
        "duration_ms": duration_ms,
        "slew_v_per_ms": 0.0,
    }


def sag_store(tmp_path: Path) -> Path:
    sagged = DriveSpec(
        "Model SAG",
        "S1",
        ["ok", failures.LOST_DURABLE, "ok", "ok", failures.SHORN, "error"],
        channel=0,
        shapes=[
            sag(55, 5),  # depth bin 5 (50-60 %), duration bin 3 (3-10 ms)
            sag(55, 20),  # (5, 4): failing
            sag(12.5, 0.5),  # (1, 1)
            sag(30, 2, kind="ramp"),  # not a sag: not on the map
            sag(58, 9.5),  # (5, 3): failing
            sag(55, 5),  # a rig error: no cut, not on the map
        ],
    )
    plain = DriveSpec("Model OFF", "O1", ["ok"] * 3, channel=1)
    return build(tmp_path / "sags.sqlite", [sagged, plain], name="sag qual", config=SAG_CONFIG)


def test_the_map_is_drawn_from_the_shapes_the_station_loader_carries(tmp_path: Path) -> None:
    store = sag_store(tmp_path)
    data = dataset.load([str(store)])
    store.rename(tmp_path / "gone.sqlite")  # the map must not need the store again
    shapes = {r.model: r.shapes for r in data.runs}
    assert shapes["Model SAG"] is not None and len(shapes["Model SAG"]) == 6
    assert shapes["Model OFF"] is not None and len(shapes["Model OFF"]) == 0
    maps = brownout.analyse(data)
    assert [(m.model, m.unit) for m in maps] == [("Model SAG", "%")]
    cells = {k: (c.cuts, c.failing, dict(c.classes)) for k, c in maps[0].cells.items()}
    assert cells == {
        (5, 3): (2, 1, {failures.SHORN: 1}),
        (5, 4): (1, 1, {failures.LOST_DURABLE: 1}),
        (1, 1): (1, 0, {}),
    }
    assert brownout.not_mapped(data) == []
    page = brownout.section(maps, brownout.not_mapped(data))
    assert "<h2>Brownout map</h2>" in page and "not on --central yet" not in page.lower()


def test_sags_of_a_source_without_shapes_are_named_as_not_mapped_yet(tmp_path: Path) -> None:
    data = dataset.load([str(sag_store(tmp_path))])
    # the central loader (reports/load/central.py) builds its runs without shapes
    data.runs = [dataclasses.replace(r, shapes=None) for r in data.runs]
    maps = brownout.analyse(data)
    assert maps == []
    assert brownout.not_mapped(data) == ["sag qual"]
    page = brownout.section(maps, brownout.not_mapped(data))
    assert "<h2>Brownout map</h2>" in page
    assert "Not on --central yet: the sags of sag qual are not mapped here" in page
    assert brownout.section([], []) == ""  # no sag campaign anywhere: no section
