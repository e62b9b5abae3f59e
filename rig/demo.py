"""`rig demo`: the demo campaign (fixtures/demo.toml) as its command line adjusts it. It runs like
any campaign (rig/runner.py); its simulated station is the `simulated` row of rig/backends.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rig import config
from rig.config import Campaign
from rig.kinds.simulated import SimulatedSpec

DEMO_CAMPAIGN = Path(__file__).resolve().parent.parent / "fixtures" / "demo.toml"


def campaign(cycles: int = 0, in_process: bool = False) -> Campaign:
    """`cycles`: cuts per drive instead of the file's (0: the file's); `in_process`: in-process
    virtual drives instead of the full-system twin."""
    demo = config.load(str(DEMO_CAMPAIGN))
    if cycles:
        demo = dataclasses.replace(demo, cycles=cycles)
    spec = demo.station
    assert isinstance(spec, SimulatedSpec)
    if in_process:
        demo = dataclasses.replace(demo, station=dataclasses.replace(spec, twin="in-process"))
    return demo


def headline(demo: Campaign) -> str:
    spec = demo.station
    assert isinstance(spec, SimulatedSpec)
    return (
        f"rig demo: {len(demo.drives)} simulated drives ({spec.describe()}),"
        f" {demo.cycles} cuts each"
    )
