"""Each shaped cut's drawn shape, as the station loader (reports/load/dataset.py) carries it on a
drive's run: a cycle's `cut_shape` event (rig/power/shapes.py: kind, depth, unit, duration_ms,
slew_v_per_ms) read once per store and kept as columns by seq, a few bytes a shaped cut (a plain
`off` cut has no event and costs nothing). The brownout map (reports/render/brownout.py) reads
them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rig.store import StoreReader


@dataclass
class CutShapes:
    """One drive's shaped cuts in seq order: `kind` and `unit` are codes into `kinds` and
    `units`; a value the event did not give is NaN."""

    seq: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    kind: npt.NDArray[np.int16] = field(default_factory=lambda: np.empty(0, np.int16))
    unit: npt.NDArray[np.int16] = field(default_factory=lambda: np.empty(0, np.int16))
    depth: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
    duration_ms: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
    slew_v_per_ms: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty(0))
    kinds: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.seq)

    def of_kind(self, kind: str) -> dict[int, tuple[float, float, str]]:
        """seq -> (depth, duration_ms, unit) of the cuts of `kind`."""
        if kind not in self.kinds:
            return {}
        rows = np.flatnonzero(self.kind == self.kinds.index(kind))
        return {
            int(self.seq[i]): (
                float(self.depth[i]),
                float(self.duration_ms[i]),
                self.units[int(self.unit[i])],
            )
            for i in rows
        }


class _Builder:
    """One drive's shapes as lists while its events are read, then columns."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, str, float, float, float]] = []

    def add(self, seq: int, detail: Any) -> None:
        if not isinstance(detail, dict):
            return  # an event this report cannot read: that cut has no shape here

        def number(key: str) -> float:
            value = detail.get(key)
            return float(value) if isinstance(value, (int, float)) else math.nan

        kind, unit = str(detail.get("kind", "")), str(detail.get("unit", ""))
        values = (number("depth"), number("duration_ms"), number("slew_v_per_ms"))
        self.rows.append((seq, kind, unit, *values))

    def done(self) -> CutShapes:
        kinds = sorted({r[1] for r in self.rows})
        units = sorted({r[2] for r in self.rows})
        columns = list(zip(*self.rows, strict=True)) or [()] * 6
        return CutShapes(
            np.array(columns[0], np.int64),
            np.array([kinds.index(k) for k in columns[1]], np.int16),
            np.array([units.index(u) for u in columns[2]], np.int16),
            np.array(columns[3], np.float64),
            np.array(columns[4], np.float64),
            np.array(columns[5], np.float64),
            kinds,
            units,
        )


def read(db: StoreReader, drive_ids: list[int]) -> dict[int, CutShapes]:
    """drive_id -> its shaped cuts, for each of `drive_ids` (a drive with none: empty). The
    events come in drive order: one drive's rows are lists at a time."""
    shapes = {d: CutShapes() for d in drive_ids}
    if "event" not in db.tables():
        return shapes
    drive, builder = -1, _Builder()  # (no drive yet)
    for row in db.cut_shapes():
        if row["drive_id"] != drive:
            if drive in shapes:
                shapes[drive] = builder.done()
            drive, builder = row["drive_id"], _Builder()
        try:
            builder.add(int(row["seq"]), json.loads(row["detail"]))
        except json.JSONDecodeError:
            continue  # an event this report cannot read: that cut has no shape here
    if drive in shapes:
        shapes[drive] = builder.done()
    return shapes
