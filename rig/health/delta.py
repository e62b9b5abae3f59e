"""Before/after comparison of two snapshots of one drive, and the counter-anomaly rules.

`cuts` is the number of power cuts between the two snapshots (1 when health is read around
every cut; N when the campaign reads it every N cuts). Rules, per ARCHITECTURE §4:
- unsafe_shutdowns rises by exactly `cuts` (0: the drive did not notice the cut, or counted it
  as a clean shutdown; more: extra resets or brown-outs; less than before: counter lost);
  a model without such a counter is "not reported", never an anomaly;
- power_cycles rises by exactly `cuts`;
- media errors, uncorrectables, reallocations and CRC errors do not rise (and never fall);
- no critical-warning bit newly set; SMART status does not turn to failed;
- identity, capacity and block sizes do not change.

A device whose power-cycle count reads 0 keeps no power accounting (a running device has been
powered on at least once): QEMU's emulated NVMe and ATA disks are such devices. Its power-cycle
and unsafe-shutdown counts are then "not reported", never anomalies, and its totals are per
device instance (QEMU starts them again when the device is added back), so a total that falls is
not judged either; a counter that rises (media errors...) still is.
"""

from __future__ import annotations

from dataclasses import dataclass

from rig.health.snapshot import (
    HealthSnapshot,
    SmartctlExit,
    describe_critical_warning,
)

Value = int | bool | str | None

# Counters that must not rise across a cut. Pending sectors may fall (rewritten or remapped).
MUST_NOT_RISE = (
    "media_errors",
    "reallocated_sectors",
    "reported_uncorrectable",
    "offline_uncorrectable",
    "pending_sectors",
    "crc_errors",
)
MAY_FALL = frozenset({"pending_sectors"})
# Lifetime totals that can only grow.
MONOTONIC = ("power_on_hours", "host_bytes_written", "data_units_written", "error_log_entries")
COUNTERS = (
    "power_cycles",
    "unsafe_shutdowns",
    *MUST_NOT_RISE,
    *MONOTONIC,
    "percentage_used",
)
IDENTITY_FIELDS = ("model", "serial", "wwn", "firmware")
GEOMETRY_FIELDS = ("capacity_bytes", "logical_block_size", "physical_block_size")


@dataclass(frozen=True)
class CounterAnomaly:
    field: str
    before: Value
    after: Value
    expected: str
    reason: str


@dataclass(frozen=True)
class CounterChange:
    field: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True)
class HealthDelta:
    cuts: int
    changes: tuple[CounterChange, ...]  # every counter known on both sides
    anomalies: tuple[CounterAnomaly, ...]
    not_reported: tuple[str, ...]  # fields a rule needs that this model does not report

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def change(self, field: str) -> int | None:
        for c in self.changes:
            if c.field == field:
                return c.delta
        return None


def diff_snapshots(before: HealthSnapshot, after: HealthSnapshot, cuts: int = 1) -> HealthDelta:
    if cuts < 0:
        raise ValueError("cuts must be >= 0")
    anomalies: list[CounterAnomaly] = []
    not_reported: list[str] = []

    for name in IDENTITY_FIELDS + GEOMETRY_FIELDS:
        b, a = getattr(before.identity, name), getattr(after.identity, name)
        if b is not None and a is not None and b != a:
            what = "identity" if name in IDENTITY_FIELDS else "geometry"
            anomalies.append(CounterAnomaly(name, b, a, "unchanged", f"{what} changed across cut"))
    if any(a.field in ("model", "serial", "wwn") for a in anomalies):
        # Another drive: comparing its counters with this one's would only add noise.
        return HealthDelta(cuts, (), tuple(anomalies), ())

    unaccounted = before.power_cycles == 0 or after.power_cycles == 0
    changes: list[CounterChange] = []
    for name in COUNTERS:
        b, a = getattr(before, name), getattr(after, name)
        if b is not None and a is not None:
            changes.append(CounterChange(name, b, a))
        elif b is not None:
            anomalies.append(
                CounterAnomaly(name, b, a, "still reported", "reported before the cut, not after")
            )

    for name, rule in (("unsafe_shutdowns", "unsafe-shutdown"), ("power_cycles", "power-cycle")):
        b, a = getattr(before, name), getattr(after, name)
        if (b is None and a is None) or unaccounted:
            not_reported.append(name)
            continue
        if b is None or a is None:
            continue  # already flagged (lost) above, or appeared: nothing to compare
        anomaly = _exact_rise(name, rule, b, a, cuts)
        if anomaly is not None:
            anomalies.append(anomaly)

    for name in MUST_NOT_RISE:
        b, a = getattr(before, name), getattr(after, name)
        if b is None or a is None:
            continue
        if a > b:
            anomalies.append(
                CounterAnomaly(name, b, a, f"<= {b}", f"rose by {a - b} across {_cuts(cuts)}")
            )
        elif a < b and name not in MAY_FALL and not unaccounted:
            anomalies.append(CounterAnomaly(name, b, a, f">= {b}", "lifetime counter went down"))

    for name in MONOTONIC:
        b, a = getattr(before, name), getattr(after, name)
        if b is not None and a is not None and a < b:
            if unaccounted:
                not_reported.append(name)
                continue
            anomalies.append(CounterAnomaly(name, b, a, f">= {b}", "lifetime counter went down"))

    anomalies.extend(_status_anomalies(before, after))
    return HealthDelta(cuts, tuple(changes), tuple(anomalies), tuple(not_reported))


def _cuts(cuts: int) -> str:
    return "1 cut" if cuts == 1 else f"{cuts} cuts"


def _exact_rise(name: str, rule: str, b: int, a: int, cuts: int) -> CounterAnomaly | None:
    rise = a - b
    expected = f"+{cuts} (= {b + cuts})"
    if rise == cuts:
        return None
    if rise < 0:
        reason = f"{rule} counter went down by {-rise} (reset or lost drive metadata)"
    elif rise == 0:
        reason = f"{rule} counter did not count the cut"
    elif rise < cuts:
        reason = f"{rule} counter missed {cuts - rise} of {_cuts(cuts)}"
    else:
        reason = f"{rule} counter rose by {rise} for {_cuts(cuts)}"
    return CounterAnomaly(name, b, a, expected, reason)


def _status_anomalies(before: HealthSnapshot, after: HealthSnapshot) -> list[CounterAnomaly]:
    found: list[CounterAnomaly] = []
    b_cw, a_cw = before.critical_warning, after.critical_warning
    if a_cw is not None and a_cw & ~(b_cw or 0):
        bits = ", ".join(describe_critical_warning(a_cw & ~(b_cw or 0)))
        found.append(
            CounterAnomaly("critical_warning", b_cw, a_cw, "no new bits", f"newly set: {bits}")
        )
    if before.smart_passed is not False and after.smart_passed is False:
        found.append(
            CounterAnomaly(
                "smart_passed",
                before.smart_passed,
                False,
                "passed",
                "SMART overall health turned to FAILED",
            )
        )
    b_ex, a_ex = before.smartctl_exit, after.smartctl_exit
    if a_ex is not None:
        newly = a_ex & ~(b_ex or SmartctlExit(0)) & SmartctlExit.PREFAIL_AT_THRESHOLD
        if newly:
            found.append(
                CounterAnomaly(
                    "smartctl_exit",
                    None if b_ex is None else int(b_ex),
                    int(a_ex),
                    "no new prefail bit",
                    "a prefail attribute reached its threshold",
                )
            )
    return found
