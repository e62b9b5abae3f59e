"""What the dashboard and `rig fleet status` show of the fleet (or of one station's stores): the
overview's campaigns with their drives' progress, as rig/interface/fleet/views.py reads them."""

from __future__ import annotations

from dataclasses import dataclass, field

from rig.interface.fleet.freshness import StationStatus
from rig.notify.failures import NotDelivered


@dataclass
class FleetDriveProgress:
    channel: int
    model: str
    serial: str
    status: str  # active | dead | stopped, or after its campaign's end: ended | failed
    cycles: int
    cuts: int
    rig_errors: int
    failing: int


@dataclass
class CampaignProgress:
    key: str  # <station>/<media id>, or q<submission id> while no cycle has reached us
    name: str
    station: str
    status: str  # queued | running | done | stopped | error | failed
    submission_id: int | None
    started_at: float | None
    ended_at: float | None
    planned: int  # cycles per drive times drives
    cycles: int
    cuts: int
    rig_errors: int
    failing: int  # cycles with a failure finding
    per_hour: float
    eta_s: float | None
    resumes: int
    findings: dict[str, int] = field(default_factory=dict)  # failure findings per class
    drives: list[FleetDriveProgress] = field(default_factory=list)
    # how old this is (rig/interface/fleet/freshness.py): the state the centre can vouch for
    # (`status`, or `shipping` while cycles the station recorded have not all arrived), lagging (its
    # station is stale: the numbers are its last report's), the age of that report
    state: str = ""
    lagging: bool = False
    reported_s: float | None = None
    recorded_rows: int | None = None  # cycle rows the station last said its store holds
    held_rows: int = 0  # cycle rows the centre holds
    final_rows: int | None = None  # the station's count at the end
    process_bound: bool = False  # in-process drives: cannot survive its rig process
    duration_s: float | None = None  # an ended campaign's, instead of a rate
    # the notifications its station could not deliver (rig/notify/failures.py): a store's
    # station-wide events, shown with its last campaign (as the replicator ships them)
    undelivered: NotDelivered = field(default_factory=NotDelivered)

    def __post_init__(self) -> None:
        self.state = self.state or self.status

    @property
    def dead(self) -> list[str]:
        return [f"{d.model} s/n {d.serial}" for d in self.drives if d.status == "dead"]

    @property
    def percent(self) -> float:
        return 100.0 * min(1.0, self.cycles / self.planned) if self.planned else 0.0


@dataclass
class Overview:
    source: str
    stations: list[StationStatus]
    campaigns: list[CampaignProgress]
    models: list[str]
    generated_at: float

    @property
    def findings(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for c in self.campaigns:
            for cls, n in c.findings.items():
                total[cls] = total.get(cls, 0) + n
        return dict(sorted(total.items()))
