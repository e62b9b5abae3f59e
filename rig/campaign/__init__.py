"""A campaign: N power-cut cycles per drive, all drives in parallel, everything into the store.

- `model`: the station, one cycle's context (`Cycle`), `ResumePoint`, `DriveCounts`,
  `DriveSummary`;
- `drive`: `DriveRun`, one drive for the whole campaign (its loop and public API);
- `phases`: the cycle's phases as plain functions, in order in `PHASES`;
- `cycle`: one cycle (phases, the teardown guarantee, then the record phase);
- `recording`: every store call of the campaign (the record phase among them);
- `preparation`, `blocks`: a drive's set-up, the blocks a check reads;
- `parallel`: `run_campaign`, every drive in its own thread.

See docs/campaign.md ("Inside a campaign").
"""

from rig.campaign.drive import DriveRun
from rig.campaign.model import (
    Cycle,
    DeadDevice,
    DriveClaim,
    DriveCounts,
    DriveSummary,
    Interrupted,
    ReadyProbe,
    ResumePoint,
    Station,
    TargetOpener,
    WriteCacheControl,
)
from rig.campaign.parallel import run_campaign

__all__ = [
    "Cycle",
    "DeadDevice",
    "DriveClaim",
    "DriveCounts",
    "DriveRun",
    "DriveSummary",
    "Interrupted",
    "ReadyProbe",
    "ResumePoint",
    "Station",
    "TargetOpener",
    "WriteCacheControl",
    "run_campaign",
]
