"""Per-drive summaries read from a store (the only input a report has)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from rig.config.criteria import Criteria
from rig.notify import failures
from rig.store import Store
from rig.verdict import exact_bound
from rig.verdict import rule as verdicts

OUTSIDE_WARN = 0.01  # `rig status` warns when more than this share of cuts fell off the range


@dataclass
class DriveReport:
    drive_id: int
    channel: int
    model: str
    serial: str
    wwn: str
    profile: str
    status: str
    cycles: int = 0
    cycles_ok: int = 0
    cycles_error: int = 0
    cycles_with_failure: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # findings per class
    # per class a cut was exposed to: (cuts exposed, failing cuts among them), docs/checker.md
    exposure: dict[str, tuple[int, int]] = field(default_factory=dict)
    failure_blocks: dict[str, int] = field(default_factory=dict)
    allowed_losses: int = 0
    nondurable_writes: int = 0
    nondurable_survived: int = 0
    writes: int = 0
    bytes_written: int = 0
    blocks_unchecked: int = 0  # meant to be read, left unread by a read budget (not a failure)
    # the return times' middle one or two, in order (`load` reads no more of them); a report
    # that builds a DriveReport itself may give all of them
    return_ms: list[float] = field(default_factory=list)
    criteria: Criteria = field(default_factory=Criteria)  # its campaign's, as stored
    cuts_outside_range: int = 0  # realized delay outside the requested range (store v13)

    @property
    def verdict(self) -> str:
        """The report's per-drive rule (rig/verdict/rule.py): failure-free cuts pass only once
        they demonstrate the campaign's claim; any failure finding fails the drive (the
        criteria's classes decide the model's verdict: docs/decisions.md, "Verdicts have three
        states, and one per-drive rule"). Where the store keeps
        exposure, the cuts that count are the fewest any judged class was exposed to (a class
        no cut exposed is not exercised and not counted: docs/checker.md)."""
        c = self.criteria
        cuts = self.cycles_ok
        if self.exposure:
            judged = c.classes or tuple(self.exposure)
            exposed = [self.exposure[k][0] for k in judged if self.exposure.get(k, (0, 0))[0]]
            cuts = min(exposed, default=0)
        return verdicts.drive_verdict(
            self.status == "dead", self.cycles_with_failure, cuts, c.max_failure_probability,
            c.confidence,
        )  # fmt: skip

    def exposure_bound(self, cls: str) -> float | None:
        """The class's one-sided Clopper-Pearson upper bound on the failure probability per
        exposed cut, at the campaign's confidence (the report's figure, without scipy:
        rig/verdict/exact_bound.py); None where no cut was exposed to it (not exercised)."""
        exposed, failing = self.exposure.get(cls, (0, 0))
        if not exposed:
            return None
        return exact_bound.upper_bound(failing, exposed, self.criteria.confidence)

    @property
    def median_return_ms(self) -> float | None:
        return statistics.median(self.return_ms) if self.return_ms else None


@dataclass
class CampaignReport:
    name: str
    station: str
    status: str
    drives: list[DriveReport]
    examples: list[dict[str, object]]  # first failure findings, for the report's table
    # the notifications not delivered (rig/notify/failures.py)
    undelivered: failures.NotDelivered = field(default_factory=failures.NotDelivered)


def load(store: Store) -> CampaignReport:
    head = store.latest_campaign_head()
    name, station, status = tuple(head[0]) if head else ("(none)", "", "")
    drives = []
    cycle_sums = store.drive_cycle_sums()  # summed by SQLite: no cycle row is read here
    outside = store.cuts_outside_range()
    for row in store.all_drives():
        drive = DriveReport(
            row["id"],
            row["channel"],
            row["model"],
            row["serial"],
            row["wwn"],
            row["profile"],
            row["status"],
            criteria=_criteria(store.criteria_of_campaign(row["campaign_id"])),
        )
        if (c := cycle_sums.get(drive.drive_id)) is not None:
            drive.cycles = c["cycles"]
            drive.cycles_ok = c["ok"]
            drive.cycles_error = c["error"]
            drive.cycles_with_failure = c["with_failure"]
            drive.nondurable_writes = c["nondurable_writes"]
            drive.nondurable_survived = c["nondurable_survived"]
            drive.writes = c["writes"]
            drive.bytes_written = c["bytes_written"]
            drive.blocks_unchecked = c["blocks_unchecked"]
            middle = store.middle_return_ns(drive.drive_id, c["returned"])
            drive.return_ms = [ns / 1e6 for ns in middle]  # their median is the drive's
        drive.cuts_outside_range = outside.get(drive.drive_id, 0)
        for e in store.exposure_of_drive(drive.drive_id):
            drive.exposure[e["class"]] = (e["exposed"], e["failing"])
        for f in store.finding_totals_of_drive(drive.drive_id):
            if f["failure"]:
                drive.failures[f["class"]] = f["n"]
                drive.failure_blocks[f["class"]] = f["blocks"]
            else:
                drive.allowed_losses += f["n"]
        drives.append(drive)
    examples = [dict(r) for r in store.failure_examples(200)]
    undelivered = failures.read(store)
    return CampaignReport(name, station, status, drives, examples, undelivered)


def _criteria(stored: dict[str, object]) -> Criteria:
    """The stored criteria; the rig's defaults for what an older store does not hold."""
    default = Criteria()
    rate, confidence, classes = (
        stored.get("max_failure_probability"),
        stored.get("confidence"),
        stored.get("classes"),
    )
    return Criteria(
        float(rate) if isinstance(rate, int | float) else default.max_failure_probability,
        float(confidence) if isinstance(confidence, int | float) else default.confidence,
        tuple(str(k) for k in classes) if isinstance(classes, list) else (),
    )


def text(report: CampaignReport) -> str:
    lines = [f"campaign {report.name} on {report.station}: {report.status}"]
    for d in report.drives:
        failures = ", ".join(f"{k} x{v}" for k, v in sorted(d.failures.items())) or "none"
        back = f"{d.median_return_ms:.0f} ms" if d.median_return_ms is not None else "n/a"
        lines.append(
            f"ch{d.channel} {d.model} s/n {d.serial}: {d.verdict}; {d.cycles} cycles"
            f" ({d.cycles_error} rig errors), failures: {failures};"
            f" allowed losses {d.allowed_losses}; blocks unchecked {d.blocks_unchecked};"
            f" median return {back}{_exposure_text(d)}"
        )
        if d.cycles and d.cuts_outside_range > OUTSIDE_WARN * d.cycles:
            lines.append(
                f"warning: ch{d.channel}: {d.cuts_outside_range} of {d.cycles} cuts"
                f" ({100 * d.cuts_outside_range / d.cycles:.1f} %) fell outside the requested"
                " delay range (docs/campaign.md, cut timing)"
            )
    lines += report.undelivered.lines()
    return "\n".join(lines)


def _exposure_text(d: DriveReport) -> str:
    """Per class the cuts exposed to it, the failing ones and the upper bound on the failure
    probability per exposed cut (none for an older store)."""
    if not d.exposure:
        return ""
    parts = [
        f"{k} {n - f}/{n} {_bound_text(d.exposure_bound(k))}"
        for k, (n, f) in sorted(d.exposure.items())
    ]
    c = f"{100 * d.criteria.confidence:g}"
    return f"; exposed cuts (passing/exposed, {c} % upper bound): " + ", ".join(parts)


def _bound_text(bound: float | None) -> str:
    return "(not exercised)" if bound is None else f"(<= {100 * bound:.3g} %)"
