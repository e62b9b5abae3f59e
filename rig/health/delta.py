"""Before/after comparison of two snapshots of one drive, and the counter-anomaly rules.

`cuts` is the number of power cuts between the two snapshots (1 when health is read around
every cut; N when the campaign reads it every N cuts; never 0: a delta is taken across cuts).
Rules, per docs/architecture.md, "The checker's contract" (docs/health.md gives the table):
- the drive is the same one: model, serial and WWN unchanged; without a WWN on both sides, a
  capacity that changed or power-on hours that went back mean another drive with the same
  serial (an NVMe swap). Another drive's counters are not compared;
- unsafe_shutdowns rises by exactly `cuts` (0: the drive did not notice the cut, or counted it
  as a clean shutdown; more: extra resets or brown-outs; less than before: counter lost);
  a model without such a counter is "not reported", never an anomaly;
- power_cycles rises by exactly `cuts`;
- media errors, uncorrectables, reallocations, CRC errors and error-log entries do not rise
  (and never fall); pending sectors may fall;
- lifetime totals (power-on hours, bytes written) never fall; percentage used never falls;
  available spare never drops;
- no critical-warning bit newly set; SMART status does not turn to failed; no smartctl health
  exit bit (3-7) newly set;
- a counter read from a different attribute or page set than before (its `*_source` changed,
  e.g. a SCSI error-counter page missing) is "not reported" for that delta, never compared;
- a fixed-width counter that wraps (65535 -> 0 of a 16-bit one) has risen, not been reset.

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
    "error_log_entries",
)
MAY_FALL = frozenset({"pending_sectors"})
# Lifetime totals that can only grow.
MONOTONIC = ("power_on_hours", "host_bytes_written", "data_units_written", "percentage_used")
# The OCP C0h log's power-loss accounting (rig/health/ocp.py): each rises by one per cut.
OCP_EXACT = ("incomplete_shutdowns", "plp_start_count")
COUNTERS = ("power_cycles", "unsafe_shutdowns", *OCP_EXACT, *MUST_NOT_RISE, *MONOTONIC)
# Critical warning bit 4: the volatile memory backup device (the PLP capacitors) has failed:
# the drive's own verdict that its capacitor health is below its threshold.
BACKUP_FAILED = 1 << 4
NO_CAPACITOR = 0xFFFF  # OCP Capacitor Health of a drive without PLP capacitors
# Fields read from a vendor attribute or a set of log pages: compared only from the same one.
SOURCED = {
    "unsafe_shutdowns": "unsafe_shutdowns_source",
    "media_errors": "media_errors_source",
    "percentage_used": "percentage_used_source",
    "host_bytes_written": "host_bytes_written_source",
}
IDENTITY_FIELDS = ("model", "serial", "wwn", "firmware")
GEOMETRY_FIELDS = ("capacity_bytes", "logical_block_size", "physical_block_size")
# Widths a drive's counter may have; a wrap is recognised only from the top 1/256 of the range
# to the bottom 1/256 (anything else that went down is a reset or another drive).
WRAP_WIDTHS = (16, 32, 48, 64)
EXIT_BIT_NAMES = {
    SmartctlExit.DISK_FAILING: "SMART status DISK FAILING",
    SmartctlExit.PREFAIL_AT_THRESHOLD: "a prefail attribute reached its threshold",
    SmartctlExit.PAST_THRESHOLD: "an attribute was at or below its threshold",
    SmartctlExit.ERROR_LOG: "the device error log has records",
    SmartctlExit.SELFTEST_LOG: "the self-test log has errors",
}


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
    modulus: int = 0  # 2**width when the counter wrapped between the snapshots

    @property
    def delta(self) -> int:
        if self.modulus:
            return (self.after - self.before) % self.modulus
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


def wrap_modulus(before: int, after: int) -> int:
    """2**width if `before` -> `after` is a fixed-width counter wrapping past zero, else 0."""
    if after >= before:
        return 0
    for bits in WRAP_WIDTHS:
        top = 1 << bits
        if before < top:
            edge = top >> 8
            return top if before >= top - edge and after < edge else 0
    return 0


def diff_snapshots(
    before: HealthSnapshot, after: HealthSnapshot, cuts: int = 1, clean_offs: int = 0
) -> HealthDelta:
    # cuts may be 0: every cut since `before` was ridden through (a sag), so no unsafe shutdown
    # or power cycle is expected
    # clean_offs: controlled power-offs in between (the drive was told to shut down first):
    # each is a power cycle, and none of them an unsafe or incomplete shutdown or a PLP start
    for name, value in (("cuts", cuts), ("clean_offs", clean_offs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, not {value!r}")
    anomalies = _identity_anomalies(before, after)
    replaced = _replaced(before, after)
    if replaced is not None:
        # Another drive: comparing its counters with this one's would only add noise.
        anomalies.append(replaced)
        return HealthDelta(cuts, (), tuple(anomalies), ())

    not_reported: list[str] = []
    unaccounted = before.power_cycles == 0 or after.power_cycles == 0
    changes, compared = _compare_counters(before, after, anomalies, not_reported)
    _check_power_counts(
        before, after, (cuts, clean_offs), compared, unaccounted, anomalies, not_reported
    )
    _check_ocp(before, after, cuts, compared, anomalies)
    _check_must_not_rise(compared, cuts, unaccounted, anomalies)
    _check_monotonic(compared, unaccounted, anomalies, not_reported)
    _check_spare(after, compared, cuts, anomalies)
    anomalies.extend(_status_anomalies(before, after))
    return HealthDelta(cuts, tuple(changes), tuple(anomalies), tuple(not_reported))


def _identity_anomalies(before: HealthSnapshot, after: HealthSnapshot) -> list[CounterAnomaly]:
    """Identity or geometry fields known on both sides that changed across the cut."""
    anomalies: list[CounterAnomaly] = []
    for name in IDENTITY_FIELDS + GEOMETRY_FIELDS:
        b, a = getattr(before.identity, name), getattr(after.identity, name)
        if b is not None and a is not None and b != a:
            what = "identity" if name in IDENTITY_FIELDS else "geometry"
            anomalies.append(CounterAnomaly(name, b, a, "unchanged", f"{what} changed across cut"))
    return anomalies


def _compare_counters(
    before: HealthSnapshot,
    after: HealthSnapshot,
    anomalies: list[CounterAnomaly],
    not_reported: list[str],
) -> tuple[list[CounterChange], dict[str, tuple[int, int]]]:
    """Every counter known on both sides (its change, and its (before, after) pair); a counter
    read from another source is not reported, one that stopped being reported an anomaly."""
    changes: list[CounterChange] = []
    compared: dict[str, tuple[int, int]] = {}
    for name in (*COUNTERS, "available_spare"):
        b, a = getattr(before, name), getattr(after, name)
        source = SOURCED.get(name)
        moved_source = source and getattr(before, source) != getattr(after, source)
        if moved_source and b is not None and a is not None:
            not_reported.append(name)  # read from another attribute or page set
            continue
        if b is not None and a is not None:
            changes.append(CounterChange(name, b, a, wrap_modulus(b, a)))
            compared[name] = (b, a)
        elif b is not None:
            anomalies.append(
                CounterAnomaly(name, b, a, "still reported", "reported before the cut, not after")
            )
    return changes, compared


def _check_power_counts(
    before: HealthSnapshot,
    after: HealthSnapshot,
    offs: tuple[int, int],
    compared: dict[str, tuple[int, int]],
    unaccounted: bool,
    anomalies: list[CounterAnomaly],
    not_reported: list[str],
) -> None:
    """Unsafe shutdowns rise by exactly the cuts, power cycles by the cuts and clean offs."""
    cuts, clean_offs = offs
    for name, rule in (("unsafe_shutdowns", "unsafe-shutdown"), ("power_cycles", "power-cycle")):
        if unaccounted and name not in not_reported:
            not_reported.append(name)  # a device that keeps no power accounting
        elif name in compared:
            losses = cuts + clean_offs if name == "power_cycles" else cuts
            anomaly = _exact_rise(name, rule, *compared[name], losses)
            if anomaly is not None:
                anomalies.append(anomaly)
        elif getattr(before, name) is None and getattr(after, name) is None:
            not_reported.append(name)
        # otherwise already flagged (lost) above, appeared, or read from another source


def declares_plp(snapshot: HealthSnapshot) -> bool:
    """The drive reports a capacitor health in its OCP log: it has PLP capacitors."""
    return snapshot.capacitor_health is not None and snapshot.capacitor_health != NO_CAPACITOR


def _check_ocp(
    before: HealthSnapshot,
    after: HealthSnapshot,
    cuts: int,
    compared: dict[str, tuple[int, int]],
    anomalies: list[CounterAnomaly],
) -> None:
    """Incomplete Shutdowns rise by exactly `cuts`; on a PLP drive PLP Start Count does too,
    and its capacitors stay above the drive's threshold (no backup-failed warning, not 0 %)."""
    rules = [("incomplete_shutdowns", "incomplete-shutdown")]
    plp = declares_plp(before) and declares_plp(after)
    if plp:
        rules.append(("plp_start_count", "PLP start"))
    for name, rule in rules:
        if name in compared:
            anomaly = _exact_rise(name, rule, *compared[name], cuts)
            if anomaly is not None:
                anomalies.append(anomaly)
    health = after.capacitor_health
    if not plp or health is None:
        return
    failed = (after.critical_warning or 0) & BACKUP_FAILED
    if failed or health == 0:
        why = "the drive reports its PLP capacitors failed" if failed else "capacitor health 0 %"
        anomalies.append(
            CounterAnomaly(
                "capacitor_health",
                before.capacitor_health,
                health,
                "above the drive's threshold",
                f"{why} ({health} %) after {_cuts(cuts)}",
            )
        )


def _check_must_not_rise(
    compared: dict[str, tuple[int, int]],
    cuts: int,
    unaccounted: bool,
    anomalies: list[CounterAnomaly],
) -> None:
    """Error counters do not rise, and (but pending sectors) never fall."""
    for name in MUST_NOT_RISE:
        if name not in compared:
            continue
        b, a = compared[name]
        rise = _rise(b, a)
        if rise > 0:
            wrapped = " (the counter wrapped)" if a < b else ""
            anomalies.append(
                CounterAnomaly(
                    name, b, a, f"<= {b}", f"rose by {rise} across {_cuts(cuts)}{wrapped}"
                )
            )
        elif rise < 0 and name not in MAY_FALL and not unaccounted:
            anomalies.append(CounterAnomaly(name, b, a, f">= {b}", "lifetime counter went down"))


def _check_monotonic(
    compared: dict[str, tuple[int, int]],
    unaccounted: bool,
    anomalies: list[CounterAnomaly],
    not_reported: list[str],
) -> None:
    """Lifetime totals never fall (but per-instance ones of a device without power accounting)."""
    for name in MONOTONIC:
        if name in compared and _rise(*compared[name]) < 0:
            if unaccounted:  # a per-instance total, started again when the device came back
                not_reported.append(name)
                continue
            b, a = compared[name]
            reason = "wear indicator went down" if name == "percentage_used" else None
            anomalies.append(
                CounterAnomaly(name, b, a, f">= {b}", reason or "lifetime counter went down")
            )


def _check_spare(
    after: HealthSnapshot,
    compared: dict[str, tuple[int, int]],
    cuts: int,
    anomalies: list[CounterAnomaly],
) -> None:
    """Available spare never drops."""
    if "available_spare" not in compared:
        return
    b, a = compared["available_spare"]
    if a < b:
        threshold = after.available_spare_threshold
        below = f" (threshold {threshold})" if threshold is not None else ""
        anomalies.append(
            CounterAnomaly(
                "available_spare",
                b,
                a,
                f">= {b}",
                f"available spare dropped by {b - a} points across {_cuts(cuts)}{below}",
            )
        )


def _rise(b: int, a: int) -> int:
    modulus = wrap_modulus(b, a)
    return (a - b) % modulus if modulus else a - b


def _replaced(before: HealthSnapshot, after: HealthSnapshot) -> CounterAnomaly | None:
    """A summary anomaly when `after` is of another drive than `before`, else None."""
    b_id, a_id = before.identity, after.identity
    for name in ("wwn", "serial", "model"):
        b, a = getattr(b_id, name), getattr(a_id, name)
        if b is not None and a is not None and b != a:
            return CounterAnomaly("drive_replaced", b, a, f"same {name}", f"{name} changed")
    if b_id.wwn is not None and a_id.wwn is not None:
        return None  # same WWN: the same drive, whatever its counters did
    # No WWN to go by (NVMe without EUI-64/NGUID, some USB bridges): the same serial on a drive
    # of another capacity, or with fewer power-on hours, is another drive.
    b_cap, a_cap = b_id.capacity_bytes, a_id.capacity_bytes
    if b_cap is not None and a_cap is not None and b_cap != a_cap:
        return CounterAnomaly(
            "drive_replaced", b_cap, a_cap, "same capacity", "same serial, another capacity"
        )
    b_poh, a_poh = before.power_on_hours, after.power_on_hours
    if b_poh is not None and a_poh is not None and _rise(b_poh, a_poh) < 0:
        return CounterAnomaly(
            "drive_replaced",
            b_poh,
            a_poh,
            f"power-on hours >= {b_poh}",
            "same serial, power-on hours went back",
        )
    return None


def _cuts(cuts: int) -> str:
    return "1 cut" if cuts == 1 else f"{cuts} cuts"


def _exact_rise(name: str, rule: str, b: int, a: int, cuts: int) -> CounterAnomaly | None:
    rise = _rise(b, a)
    modulus = wrap_modulus(b, a)
    expected = f"+{cuts} (= {(b + cuts) % modulus if modulus else b + cuts})"
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
        newly = a_ex.health_bits & ~(b_ex or SmartctlExit(0))
        if found and found[-1].field == "smart_passed":
            newly &= ~SmartctlExit.DISK_FAILING  # the same news, already reported as FAILED
        if newly:
            named = "; ".join(text for bit, text in EXIT_BIT_NAMES.items() if newly & bit)
            found.append(
                CounterAnomaly(
                    "smartctl_exit",
                    None if b_ex is None else int(b_ex),
                    int(a_ex),
                    "no new health bit (3-7)",
                    f"newly set: {named}",
                )
            )
    return found
