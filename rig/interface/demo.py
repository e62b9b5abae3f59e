"""`rig demo`: the demo campaign (fixtures/demo.toml) as its command line adjusts it. It runs like
any campaign (rig/campaign/runner.py); its simulated station is the `simulated` row of
rig/station/backends.py."""

from __future__ import annotations

from pathlib import Path

import tomlkit

from rig.config import campaign_file
from rig.config.campaign import Campaign
from rig.station.kinds.simulated import SimulatedSpec

DEMO_CAMPAIGN = Path(__file__).resolve().parents[2] / "fixtures" / "demo.toml"


def campaign(cycles: int = 0, in_process: bool = False) -> Campaign:
    """`cycles`: cuts per drive instead of the file's (0: the file's); `in_process`: in-process
    virtual drives instead of the full-system twin. The options edit the file's text, which is
    parsed as any campaign file: the campaign stored (its `source`) is the one that runs, so the
    dashboard's progress and a resume read the real cycle count."""
    text = DEMO_CAMPAIGN.read_text(encoding="utf-8")
    if cycles or in_process:
        document = tomlkit.parse(text)
        if cycles:
            document["campaign"]["cycles"] = cycles
        if in_process:
            document["station"]["twin"] = "in-process"
        text = tomlkit.dumps(document)
    return campaign_file.parse(text, str(DEMO_CAMPAIGN))


def headline(demo: Campaign) -> str:
    spec = demo.station
    assert isinstance(spec, SimulatedSpec)
    return (
        f"rig demo: {len(demo.drives)} simulated drives ({spec.describe()}),"
        f" {demo.cycles} cuts each"
    )
