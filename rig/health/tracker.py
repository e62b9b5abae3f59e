"""Health across a campaign for one drive: snapshots at a cadence, per-cut deltas, anomalies.

The campaign's `health` phase calls `after_cut` once per cycle that cut power; every `every`-th
cut a snapshot is read, compared with the previous one over the cuts in between, and every
counter anomaly becomes a finding of class `counter_anomaly`. The snapshot after cut N is also
the "before" of cut N+1 (nothing but writes happens in between), so one reading per cut gives
before and after of every cut. A cycle that ended in a rig error after power was switched may
or may not have been a real cut for the drive: the next snapshot starts a new baseline instead
of being judged over an unknown number of cuts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from rig.drive.node import DriveNode
from rig.health.delta import HealthDelta, diff_snapshots
from rig.health.errors import PARSER_SLIPS, HealthToolError, ToolOutputError
from rig.health.snapshot import HealthSnapshot

HealthReader = Callable[[DriveNode], HealthSnapshot]
Event = tuple[int, str, dict[str, Any]]

# Fields of a snapshot kept as typed columns of the store's JSON (raw text kept beside them).
SNAPSHOT_FIELDS = tuple(
    name for name in HealthSnapshot.__dataclass_fields__ if name not in ("identity", "raw")
)


def snapshot_fields(snapshot: HealthSnapshot) -> dict[str, Any]:
    fields = {name: getattr(snapshot, name) for name in SNAPSHOT_FIELDS}
    if fields["smartctl_exit"] is not None:
        fields["smartctl_exit"] = int(fields["smartctl_exit"])
    fields["identity"] = asdict(snapshot.identity)
    return fields


def anomaly_details(delta: HealthDelta) -> list[dict[str, Any]]:
    """One finding detail per anomaly (the store's finding.detail)."""
    return [
        {
            "field": a.field,
            "before": a.before,
            "after": a.after,
            "expected": a.expected,
            "reason": a.reason,
            "cuts": delta.cuts,
        }
        for a in delta.anomalies
    ]


class HealthTracker:
    """Owns the last snapshot of one drive and the count of cuts since."""

    def __init__(self, read: HealthReader, every: int) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.read = read
        self.every = every
        self.last: HealthSnapshot | None = None
        self.cuts_since = 0
        # power-offs between cycles since the last snapshot (an endurance retention check): the
        # drive counts each as an unsafe shutdown and a power cycle, as it does a cut
        self.offs_between = 0
        self.uncertain = False  # a cycle since the last snapshot may or may not have cut power
        self.kept_power = 0  # cuts since the last snapshot the drive rode through (a sag)
        self.not_reported: tuple[str, ...] = ()  # last said in a `health_not_reported` event
        self.clean_offs = 0  # controlled power-offs since the last snapshot (no unsafe shutdown)
        self.ocp_said = False  # the drive's "no OCP C0h log" was said (once)

    def _read(self, node: DriveNode) -> HealthSnapshot:
        """One reading; whatever the reader raises about the drive's answer is a typed error.

        The parsers are total, so a slip here is a reader outside them (a station's own health
        callable): still the answer's fault for the record, never an internal error of a cycle.
        """
        try:
            return self.read(node)
        except HealthToolError:
            raise
        except PARSER_SLIPS as exc:
            error = ToolOutputError(f"health reading failed: {type(exc).__name__}: {exc}")
            error.unexpected = True
            raise error from exc

    def baseline(self, node: DriveNode) -> HealthSnapshot:
        """The first snapshot, before any cut. Raises HealthToolError if the drive cannot answer."""
        self.last = self._read(node)
        self.cuts_since = self.offs_between = self.kept_power = self.clean_offs = 0
        self.uncertain = False
        return self.last

    def power_off_between_cycles(self) -> None:
        """Power went off and on outside a cut cycle (an endurance retention check, flushed but
        not shut down): the next comparison expects it in the counters with the cuts."""
        self.offs_between += 1

    def clean_power_off(self) -> None:
        """Power went off after the drive was told to shut down (a controlled power-off): the
        next comparison expects a power cycle of it, and no unsafe or incomplete shutdown."""
        self.clean_offs += 1

    def _ocp_events(self, snapshot: HealthSnapshot) -> list[Event]:
        """`ocp_unavailable` once per drive: a drive without the OCP log is not an error."""
        if snapshot.ocp_unavailable is None or self.ocp_said:
            return []
        self.ocp_said = True
        return [(0, "ocp_unavailable", {"reason": snapshot.ocp_unavailable})]

    def due(self) -> bool:
        return self.cuts_since + 1 >= self.every

    def after_cut(
        self, node: DriveNode, kept_power: bool = False
    ) -> tuple[HealthSnapshot | None, HealthDelta | None, list[Event]]:
        """Count one cut; when a snapshot is due, read it and compare. `kept_power`: the drive
        rode the cut through (a sag, rig/power/shapes.py): no unsafe shutdown is expected of it.

        Returns (snapshot or None, delta or None, events). A tool failure is an event, never a
        drive failure: the next snapshot is then compared over all the cuts since the last good
        one.
        """
        self.cuts_since += 1
        self.kept_power += kept_power
        if self.cuts_since < self.every:
            return None, None, []
        try:
            snapshot = self._read(node)
        except HealthToolError as error:
            detail = {"error": str(error), "kind": type(error).__name__}
            return None, None, [(0, "health_error", detail)]
        events = self._ocp_events(snapshot)
        delta = None
        if self.last is None or self.uncertain:
            events.append((0, "health_rebaseline", {"cuts_since": self.cuts_since}))
        else:
            losses = self.cuts_since - self.kept_power + self.offs_between
            delta = diff_snapshots(self.last, snapshot, losses, self.clean_offs)
            if delta.not_reported != self.not_reported:  # said once, and again when it changes
                self.not_reported = delta.not_reported
                events.append((0, "health_not_reported", {"fields": list(delta.not_reported)}))
        self.last, self.cuts_since, self.offs_between, self.uncertain = snapshot, 0, 0, False
        self.kept_power = self.clean_offs = 0
        return snapshot, delta, events

    def cycle_failed_after_cut(self) -> None:
        """The cycle ended in a rig error after power was switched: compare no further across it."""
        self.uncertain = True
