"""Cut kinds: what a cut does to a drive's rail (`[cut] kind`, docs/campaign.md "Cut kinds").

- off: power goes off until the rig puts it back (every backend);
- glitch: power goes off for `duration_ms` and the switch itself restores it;
- sag: the rail drops to `depth_v` (or `depth_pct` of the supply's nominal voltage) for
  `duration_ms`, then returns to nominal; edges at `slew_v_per_ms` (absent: as fast as the
  supply can);
- ramp: the rail falls from nominal at `slew_v_per_ms` down to the depth (0 V if none is
  given), a slow power-down; it stays there until the rig restores power.

Each range is drawn uniformly per cut, like `delay_ms`. The campaign file's [cut] keys of the
kind are read here (`settings`); a station kind lists the kinds its switch can make
(rig/station/backends.py) and a campaign asking for another is refused before any write.
A switch that makes sags and ramps offers `ShapedSwitch`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rig.config.tables import Table
from rig.errors import UserError
from rig.power.base import (
    ArmedCut,
    ArmsAfterCompletion,
    PendingCut,
    PowerSwitch,
    PreparedCut,
    PreparesCuts,
)

CUT_KINDS = ("off", "sag", "ramp", "glitch")
RANGE_KEYS = ("depth_v", "depth_pct", "duration_ms", "slew_v_per_ms")
# the keys each kind takes; ("depth", either unit) and which it needs
TAKES = {
    "off": (),
    "glitch": ("duration_ms",),
    "sag": ("depth", "duration_ms", "slew_v_per_ms"),
    "ramp": ("depth", "slew_v_per_ms"),
}
NEEDS = {
    "off": (),
    "glitch": ("duration_ms",),
    "sag": ("depth", "duration_ms"),
    "ramp": ("slew_v_per_ms",),
}

Range = tuple[float, float]


@dataclass(frozen=True)
class ShapeSpec:
    """The [cut] keys of the cut's kind: ranges drawn per cut (None: not given)."""

    kind: str = "off"
    depth_v: Range | None = None  # rail voltage during a sag / at a ramp's foot
    depth_pct: Range | None = None  # or that voltage in percent of the supply's nominal
    duration_ms: Range | None = None  # a sag's or glitch's length at depth
    slew_v_per_ms: Range | None = None  # edge rate of a sag, fall rate of a ramp


@dataclass(frozen=True)
class Shape:
    """One cut's drawn shape."""

    kind: str
    depth: float = 0.0  # volts, or percent of nominal (`unit`)
    unit: str = "V"  # "V" | "%"
    duration_s: float = 0.0
    slew_v_per_s: float = 0.0  # 0: as fast as the switch can

    def volts(self, nominal_v: float) -> float:
        """The depth in volts against the supply's nominal voltage."""
        return self.depth if self.unit == "V" else nominal_v * self.depth / 100

    def detail(self) -> dict[str, object]:
        """The shape as a cycle event's detail (`cut_shape`), for the store and the report."""
        return {
            "kind": self.kind,
            "depth": round(self.depth, 6),
            "unit": self.unit,
            "duration_ms": round(self.duration_s * 1000, 6),
            "slew_v_per_ms": round(self.slew_v_per_s / 1000, 6),
        }


OFF = Shape("off")


def settings(cut_t: Table) -> ShapeSpec:
    """`kind` and the range keys of [cut]; a key the kind does not take is refused."""
    kind = cut_t.get("kind", str, "off")
    if kind not in CUT_KINDS:
        raise UserError(f"campaign: [cut].kind must be one of {', '.join(CUT_KINDS)}")
    ranges = {key: _range(cut_t, key) for key in RANGE_KEYS if key in cut_t.data}
    if "depth_v" in ranges and "depth_pct" in ranges:
        raise UserError("campaign: [cut] gives both depth_v and depth_pct (one unit)")
    given = {"depth" if key.startswith("depth") else key for key in ranges}
    for key in sorted(given - set(TAKES[kind])):
        name = next(k for k in ranges if k.startswith(key))
        raise UserError(f'campaign: [cut].{name} does not apply to kind = "{kind}"')
    for key in NEEDS[kind]:
        if key not in given:
            name = "depth_v or depth_pct" if key == "depth" else key
            raise UserError(f'campaign: [cut] kind = "{kind}" needs {name}')
    pct = ranges.get("depth_pct")
    if pct is not None and pct[1] > 100:
        raise UserError("campaign: [cut].depth_pct must lie in 0..100 (percent of nominal)")
    slew = ranges.get("slew_v_per_ms")
    if slew is not None and slew[0] <= 0:
        raise UserError("campaign: [cut].slew_v_per_ms must be above 0")
    return ShapeSpec(
        kind, ranges.get("depth_v"), pct, ranges.get("duration_ms"), ranges.get("slew_v_per_ms")
    )


def _range(table: Table, key: str) -> Range:
    value = table.get(key, (list, int, float))
    pair = value if isinstance(value, list) else [value, value]
    if (
        len(pair) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in pair)
        or not 0 <= pair[0] <= pair[1] <= 3_600_000
    ):
        raise UserError(
            f"campaign: {table.where}.{key} must be a number or [low, high], low <= high"
        )
    return float(pair[0]), float(pair[1])


def draw(spec: ShapeSpec, rng: random.Random) -> Shape:
    """One cut's shape; `off` draws nothing (so campaigns without kinds draw as before)."""
    if spec.kind == "off":
        return OFF
    depth, unit = 0.0, "V"
    if spec.depth_v is not None:
        depth = rng.uniform(*spec.depth_v)
    elif spec.depth_pct is not None:
        depth, unit = rng.uniform(*spec.depth_pct), "%"
    duration = rng.uniform(*spec.duration_ms) / 1000 if spec.duration_ms else 0.0
    slew = rng.uniform(*spec.slew_v_per_ms) * 1000 if spec.slew_v_per_ms else 0.0
    return Shape(spec.kind, depth, unit, duration, slew)


def extremes(spec: ShapeSpec) -> list[Shape]:
    """The corners of the spec's ranges (deepest and shallowest, fastest and slowest): what a
    switch checks against its limits before the campaign writes anything."""
    if spec.kind == "off":
        return [OFF]
    depths = spec.depth_v or spec.depth_pct or (0.0, 0.0)
    unit = "%" if spec.depth_pct is not None and spec.depth_v is None else "V"
    durations = spec.duration_ms or (0.0, 0.0)
    slews = spec.slew_v_per_ms or (0.0, 0.0)
    return [
        Shape(spec.kind, d, unit, t / 1000, s * 1000)
        for d in set(depths)
        for t in set(durations)
        for s in set(slews)
    ]


class ShapedCuts:
    """What the cut strategies call (`cut`): the cycle's shape on the station's switch."""

    def __init__(self, power: PowerSwitch, shape: Shape) -> None:
        self.power, self.shape = power, shape

    def cut(self, channel: int, delay_s: float) -> PendingCut:
        shape = self.shape
        if shape.kind == "off":
            return self.power.cut(channel, delay_s)
        if shape.kind == "glitch":  # restored by the switch itself, on its own clock
            return self.power.cut(channel, delay_s, off_s=shape.duration_s)
        if not isinstance(self.power, ShapedSwitch):  # refused at start; never reached
            raise UserError(f"this station's switch cannot make a {shape.kind}")
        return self.power.shaped_cut(channel, delay_s, shape)

    def arm_after_completion(self, channel: int, delay_s: float) -> ArmedCut | None:
        """The cut `delay_s` after a completion the rig's request will fire (its trigger), where
        the switch takes one (rig/power/base.py `ArmsAfterCompletion`); None: cut as before."""
        shape, power = self.shape, self.power
        if shape.kind not in ("off", "glitch") or not isinstance(power, ArmsAfterCompletion):
            return None
        off_s = shape.duration_s if shape.kind == "glitch" else None
        return power.arm_after_completion(channel, delay_s, off_s)

    def prepare_cut(self, channel: int, delay_s: float) -> PreparedCut | None:
        """The cut `delay_s` after an event yet to come, made ready on the switch where it
        takes one (rig/power/base.py `PreparesCuts`); None: cut as before."""
        shape, power = self.shape, self.power
        if shape.kind not in ("off", "glitch") or not isinstance(power, PreparesCuts):
            return None
        off_s = shape.duration_s if shape.kind == "glitch" else None
        return power.prepare_cut(channel, delay_s, off_s)


@runtime_checkable
class ShapedSwitch(Protocol):
    """A switch that makes sags and ramps (a programmable supply), besides `PowerSwitch`."""

    def check_shape(self, channel: int, shape: Shape) -> None:
        """Raise UserError (one line) when the switch cannot make `shape` on the channel."""
        ...

    def shaped_cut(self, channel: int, delay_s: float, shape: Shape) -> PendingCut:
        """Schedule the shape's start `delay_s` from now; the pending cut's edge is where the
        rail leaves nominal."""
        ...
