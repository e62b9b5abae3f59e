"""A campaign file's typed settings: each section read by the package that owns it, assembled
here into a `Campaign`, with one-line errors.

rig/config/tables.py reads the TOML text and holds `Table` and the shared helpers; the owners read
their own sections ([workload]: rig/io/workload_plan.py, [cut] shape: rig/power/shapes.py,
[cut.window]: rig/window/spec.py, [criteria.sequential]: rig/verdict/sequential.py, [notify]:
rig/notify/settings.py, recovery and drive identity: rig/bus/, failure classes: rig/check/), the
station kinds theirs (handed in by rig/config/campaign_file.py). See docs/campaign.md for every key.
Unknown keys are errors (a typo must not silently fall back to a default in a destructive tool).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from rig.bus import recover
from rig.check import failures
from rig.config import tables as config
from rig.config.criteria import (
    Criteria,  # its own module: readers of stored criteria import no campaign sections
)
from rig.config.station_keys import KindRules, StationSpec
from rig.config.tables import Table
from rig.drive import identity as drive_identity
from rig.drive.identity import DriveIdentity
from rig.errors import UserError
from rig.health import maintenance
from rig.health.maintenance import MaintenanceSpec
from rig.io import workload_plan
from rig.io.workload_plan import Workload
from rig.notify import settings as notify_settings
from rig.notify.settings import NotifySpec
from rig.power import recovery, shapes
from rig.power.recovery import RecoverySpec
from rig.power.shapes import ShapeSpec
from rig.verdict import sequential
from rig.window import spec as window_spec
from rig.window.spec import WindowSpec

# the cut strategies a [cut] table may name (rig/campaign/cutcycle/cuts.py draws each)
STRATEGIES = ("uniform", "during_flush", "after_ack", "idle", "window", "during_discard")


@dataclass(frozen=True)
class DriveSpec:
    channel: int  # the station channel: the drive's key in the store, progress and switch
    identity: DriveIdentity
    profile: str = ""  # simulated drives: a profile name from fixtures.profiles
    allow_wipe: bool = False  # write over signatures/partitions on this exact identity
    board: str = ""  # the relay board it is wired to, on a station of several ("": the only one)
    board_channel: int = -1  # its channel on that board (-1: the station channel itself)

    def wiring(self) -> str:
        """Where the drive is wired, for messages: `ch5` or `board b ch1 (ch17)`."""
        if not self.board:
            return f"ch{self.channel}"
        return f"board {self.board} ch{self.board_channel} (ch{self.channel})"


@dataclass(frozen=True)
class CutSpec:
    delay_ms: tuple[float, float] = (2.0, 60.0)
    strategy: str = "uniform"  # STRATEGIES
    after_ms: tuple[float, float] = (0.0, 1000.0)  # after_ack / idle: cut this long after
    off_ms: float = 50.0
    # after the switch's edge the drive may still complete commands this long: the relay's
    # release time plus the drive's own hold-up on its capacitance (docs/campaign.md)
    hold_up_ms: float = 10.0
    gone_timeout_s: float = 5.0
    return_timeout_s: float = 30.0
    sample_blocks: int = 256  # older blocks read back per cut to catch collateral damage
    recent_cycles: int = 1  # blocks written in this many earlier cycles are still at risk
    full_scan_every: int = 0  # every Nth cycle checks the whole region (0 = never)
    # read the region once before the first cycle: a used drive's old bytes start as unknown
    # (rig/check/baseline.py); false for a region known to hold zeroes or records
    baseline: bool = True
    read_timeout_s: float = 30.0  # a check read not answered by then is a hang
    read_budget: int = 2048  # extra reads a check may spend locating bad blocks (then unchecked)
    window: WindowSpec | None = None  # [cut.window]: the window strategy's keys (rig/window/)
    shape: ShapeSpec = field(
        default_factory=ShapeSpec
    )  # kind and its ranges: off, sag, ramp, glitch (rig/power/)
    recovery: RecoverySpec | None = None  # [cut.recovery]: a burst of cuts after power-on
    maintenance: MaintenanceSpec | None = None  # [cut.maintenance]: cuts during an operation


@dataclass(frozen=True)
class HealthSpec:
    every: int = 1  # a health snapshot after every Nth cut (and one before the first); 0 = none
    required: bool = False  # [health].every given: a station that cannot read health refuses
    write_cache: str = "keep"  # keep (read and record only) | on | off (set after every return)


DISCARD_KINDS = ("none", "blkdiscard", "sg_unmap", "nvme")
PURGE_METHODS = (
    "auto",
    "discard",
    "nvme_sanitize",
    "nvme_format",
    "ata_secure_erase",
    "scsi_sanitize",
)  # as rig/station/purge.py METHODS


@dataclass(frozen=True)
class EnduranceSpec:
    """Endurance mode (docs/campaign.md, "Endurance"): sustained writes in measured intervals."""

    intervals: int = 0  # measured intervals per drive; 0 = until the campaign's duration_s
    interval_s: float = 60.0  # length of one interval of sustained writes
    verify_every: int = 1  # read back what an interval wrote after every Nth; 0 = never
    cut_every: int = 0  # a power-cut cycle after every Nth interval; 0 = none
    retention_every: int = 0  # a retention check after every Nth interval; 0 = none
    retention_off_s: float = 60.0  # how long the drive stays off in a retention check
    tbw_tb: float = 0.0  # the drive's rated endurance in TB written, for progress; 0 = unknown
    steady_window: int = 5  # intervals in the steady-state window (SNIA PTS: 5)
    discard: str = "none"  # trim the test region before the first interval
    # the SNIA PTS test flow (docs/campaign.md, "PTS test flow"; rig/campaign/endurance/pts.py)
    purge: str = "none"  # before anything: none | PURGE_METHODS (the drive says what it supports)
    precondition: bool = False  # workload-independent: 2 x region of 128 KiB sequential writes
    max_rounds: int = 25  # rounds after which steady state is "not reached"; 0 = no limit
    stop_at_steady: bool = False  # end the drive's run at steady state (or at max_rounds)


@dataclass(frozen=True)
class StopRules:
    """When a drive's channel stops before its cycle count (the other channels go on)."""

    max_failures: int = 0  # cycles with a drive failure before the drive stops; 0 = never
    max_consecutive_errors: int = 5  # rig errors in a row before the channel stops
    duration_s: float = 0.0  # time in cycles per drive (summed across resumes); 0 = none
    when: str = "cycles"  # STOP_WHEN; "settled": a drive stops once its sequential plan decides


STOP_WHEN = ("cycles", "settled")
SEQUENTIAL_SCOPES = sequential.SCOPES


@dataclass(frozen=True)
class Campaign:
    name: str
    cycles: int
    seed: int
    station: StationSpec
    workload: Workload
    cut: CutSpec
    drives: tuple[DriveSpec, ...]
    region_bytes: int  # size of the test region ([campaign].region_mib / _kib / _bytes)
    region_offset_bytes: int  # where it starts on the drive
    source: str  # the file's text, kept in the store
    health: HealthSpec = HealthSpec()
    stop: StopRules = StopRules()
    criteria: Criteria = field(default_factory=Criteria)
    duration_s: float = 0.0  # with cycles: whichever comes first; 0 = cycles only
    endurance: EnduranceSpec | None = None  # endurance mode when the file has [endurance]
    notify: NotifySpec = field(default_factory=NotifySpec)  # [notify]: where events are sent
    # the file names the region's size: a drive it does not fit is refused (the default, 64 MiB,
    # is shortened to a smaller drive; each drive's row records the region really tested)
    region_given: bool = False


def parse(text: str, where: str = "campaign", *, kinds: Mapping[str, KindRules]) -> Campaign:
    """`kinds`: the station kinds the file may name (rig/station/backends.py:STATION_KINDS, as
    rig/config/campaign_file.py hands them in)."""
    root = Table("file", config.parse_toml(text, where))
    head = Table("[campaign]", root.get("campaign", dict))
    name = head.get("name", str)
    cycles = head.whole("cycles", None, 1, 10_000_000)
    duration_s = float(head.number("duration_s", 0.0, 0, 10 * 365 * 86400))
    seed = head.whole("seed", 1, 0, 2**31)
    region_bytes = config.size(head, "region", 64 << 20, 1)
    region_given = any(f"region_{unit}" in head.data for unit, _ in config.SIZE_UNITS)
    region_offset_bytes = config.size(head, "region_offset", 0, 0)
    head.done()

    station, kind = _station(Table("[station]", root.get("station", dict)), kinds)

    workload = workload_plan.settings(Table("[workload]", root.get("workload", dict, {})))
    cut = _cut(Table("[cut]", root.get("cut", dict, {})), workload)
    if cut.shape.kind not in kind.cut_kinds:  # before anything is written
        raise UserError(
            f'campaign: [cut].kind = "{cut.shape.kind}" is more than a {station.kind} station'
            f" can do (it makes {', '.join(kind.cut_kinds)})"
        )

    health = _health(root.get("health", dict, {}))
    stop = _stop_rules(Table("[stop]", root.get("stop", dict, {})))
    criteria = _criteria(Table("[criteria]", root.get("criteria", dict, {})))
    notify = notify_settings.parse(Table("[notify]", root.get("notify", dict, {})))
    if stop.when == "settled" and criteria.sequential is None:
        raise UserError('campaign: [stop].when = "settled" needs a [criteria.sequential] plan')
    endurance = None
    if "endurance" in root.data:
        endurance_t = Table("[endurance]", root.get("endurance", dict))
        endurance = _endurance(endurance_t, kind, station)
        if not endurance.intervals and not duration_s:
            raise UserError("campaign: [endurance] needs intervals, or [campaign].duration_s")
        if stop.when == "settled":
            raise UserError(
                'campaign: [stop].when = "settled" is for cut campaigns, not [endurance]'
            )

    drive_list = root.get("drive", list)
    drives = tuple(_drive(i, entry, kind, station) for i, entry in enumerate(drive_list))
    if not drives:
        raise UserError("campaign: name at least one [[drive]]")
    seen: dict[int, DriveSpec] = {}
    for d in drives:
        if d.channel in seen:
            raise UserError(f"campaign: two drives on the same channel ({d.wiring()})")
        seen[d.channel] = d
    root.done()
    return Campaign(
        name,
        cycles,
        seed,
        station,
        workload,
        cut,
        drives,
        region_bytes,
        region_offset_bytes,
        text,
        health,
        stop,
        criteria,
        duration_s,
        endurance,
        notify,
        region_given,
    )


def _cut(cut_t: Table, workload: Workload) -> CutSpec:
    """The [cut] table (a during_flush strategy needs the workload's flush cadence)."""
    delay = cut_t.get("delay_ms", list, [2.0, 60.0])
    if (
        len(delay) != 2
        or not all(isinstance(d, int | float) for d in delay)
        or not (0 <= delay[0] <= delay[1] <= 3_600_000)
    ):
        raise UserError("campaign: [cut].delay_ms must be [low, high] milliseconds, low <= high")
    after = cut_t.range_ms("after_ms", [0.0, 1000.0])
    strategy = cut_t.choice("strategy", STRATEGIES)
    if strategy == "during_flush" and not (workload.flush_every or workload.flush_every_ms):
        raise UserError("campaign: [cut].strategy during_flush needs a flush cadence in [workload]")
    if strategy == "during_discard" and not workload.discard_share:
        raise UserError("campaign: [cut].strategy during_discard needs [workload].discard_share")
    flush_cadence = bool(workload.flush_every or workload.flush_every_ms)
    window = window_spec.for_strategy(cut_t, strategy, flush_cadence)
    cut = CutSpec(
        delay_ms=(float(delay[0]), float(delay[1])),
        strategy=strategy,
        after_ms=after,
        off_ms=float(cut_t.number("off_ms", 50.0, 0, 3_600_000)),
        hold_up_ms=float(cut_t.number("hold_up_ms", 10.0, 0, 10_000)),
        gone_timeout_s=float(cut_t.number("gone_timeout_s", 5.0, 0.01, 3600)),
        return_timeout_s=float(cut_t.number("return_timeout_s", 30.0, 0.01, 3600)),
        sample_blocks=cut_t.whole("sample_blocks", 256, 0, 1 << 30),
        recent_cycles=cut_t.whole("recent_cycles", 1, 0, 1000),
        full_scan_every=cut_t.whole("full_scan_every", 0, 0, 10_000_000),
        baseline=cut_t.get("baseline", bool, True),
        read_timeout_s=float(cut_t.number("read_timeout_s", 30.0, 0.001, 3600)),
        read_budget=int(cut_t.number("read_budget", 2048, 0, 1 << 24)),
        window=window,
        shape=shapes.settings(cut_t),
    )
    cut = replace(
        cut,
        recovery=recovery.settings(cut_t, cut.return_timeout_s),
        maintenance=maintenance.settings(cut_t),
    )
    if cut.recovery and cut.maintenance:
        raise UserError("campaign: [cut.recovery] and [cut.maintenance] are separate campaigns")
    cut_t.done()
    return cut


def _station(table: Table, kinds: Mapping[str, KindRules]) -> tuple[StationSpec, KindRules]:
    """[station]: the keys every kind has here, the kind's own keys read by the kind; a key of
    another kind is named as such."""
    name = table.get("kind", str)
    kind = kinds.get(name)
    if kind is None:
        raise UserError(f"campaign: [station].kind must be one of {', '.join(kinds)}")
    common = StationSpec(name, *recover.settings(table))
    spec = kind.settings(table, common)
    for key in sorted(set(table.data) - table.used):
        owners = [other for other, k in kinds.items() if key in k.own_keys()]
        if owners:
            raise UserError(
                f"campaign: [station].{key} applies to {' or '.join(owners)} stations only"
            )
    table.done()
    return spec, kind


def _endurance(table: Table, station_kind: KindRules, station: StationSpec) -> EnduranceSpec:
    spec = EnduranceSpec(
        intervals=table.whole("intervals", 0, 0, 100_000_000),
        interval_s=float(table.number("interval_s", 60.0, 0.05, 86400)),
        verify_every=table.whole("verify_every", 1, 0, 1_000_000),
        cut_every=table.whole("cut_every", 0, 0, 1_000_000),
        retention_every=table.whole("retention_every", 0, 0, 1_000_000),
        retention_off_s=float(table.number("retention_off_s", 60.0, 0, 365 * 86400)),
        tbw_tb=float(table.number("tbw_tb", 0.0, 0, 1e9)),
        steady_window=table.whole("steady_window", 5, 2, 1000),
        discard=table.get("discard", str, "none"),
        purge=table.get("purge", str, "none"),
        precondition=table.get("precondition", bool, False),
        max_rounds=table.whole("max_rounds", 25, 0, 1_000_000),
        stop_at_steady=table.get("stop_at_steady", bool, False),
    )
    if spec.purge not in ("none", *PURGE_METHODS):
        raise UserError(
            f"campaign: [endurance].purge must be one of none, {', '.join(PURGE_METHODS)}"
        )
    # simulated drives can be block devices: the full twin's are loop devices
    simulated = station_kind.simulated_drives and not station.simulated_block_devices()
    if spec.purge != "none" and simulated:
        raise UserError(
            "campaign: [endurance].purge needs drives that can be purged: the in-process"
            ' virtual drives cannot (use [station] twin = "simavr", whose drives take discard)'
        )
    if spec.max_rounds and spec.max_rounds < spec.steady_window:
        raise UserError(
            f"campaign: [endurance].max_rounds = {spec.max_rounds} is shorter than"
            f" steady_window = {spec.steady_window} (0 = no limit)"
        )
    if spec.discard not in DISCARD_KINDS:
        raise UserError(f"campaign: [endurance].discard must be one of {', '.join(DISCARD_KINDS)}")
    if spec.discard != "none" and simulated:
        raise UserError("campaign: [endurance].discard needs a block device (not simulated)")
    table.done()
    return spec


def _stop_rules(table: Table) -> StopRules:
    rules = StopRules(
        max_failures=table.whole("max_failures", 0, 0, 10_000_000),
        max_consecutive_errors=table.whole("max_consecutive_errors", 5, 1, 1_000_000),
        duration_s=float(table.number("duration_s", 0.0, 0, 10 * 365 * 86400)),
        when=table.choice("when", STOP_WHEN),
    )
    table.done()
    return rules


def _criteria(table: Table) -> Criteria:
    classes = failures.classes_setting(table)
    probability = float(table.number("max_failure_probability", 1e-3, 0, 1))
    if not 0 < probability < 1:
        raise UserError("campaign: [criteria].max_failure_probability must lie strictly in 0..1")
    confidence = float(table.number("confidence", 0.95, 0, 1))
    if not 0 < confidence < 1:
        raise UserError("campaign: [criteria].confidence must lie strictly in 0..1")
    plan, scope = (None, "")
    if "sequential" in table.data:
        plan, scope = sequential.from_table(table.table("sequential"))
    limit = (
        table.number("ready_limit_s", None, 0.001, 3600) if "ready_limit_s" in table.data else None
    )
    criteria = Criteria(
        probability,
        confidence,
        classes,
        table.whole("min_cycles", 0, 0, 100_000_000),
        plan,
        scope or "model",
        None if limit is None else float(limit),
        failures.zero_tolerance_setting(table),
    )
    table.done()
    return criteria


def _health(data: Any) -> HealthSpec:
    table = Table("[health]", data)
    given = "every" in table.data
    every = table.whole("every", 1, 0, 1_000_000)
    write_cache = table.get("write_cache", str, "keep")
    if write_cache not in ("keep", "on", "off"):
        raise UserError("campaign: [health].write_cache must be keep, on or off")
    table.done()
    return HealthSpec(every, given and every > 0, write_cache)


def _drive(index: int, entry: Any, station_kind: KindRules, station: StationSpec) -> DriveSpec:
    table = Table(f"[[drive]] #{index + 1}", entry)
    channel = table.whole("channel", None, 0, 63)
    board = table.get("board", str, "")
    # a kind of several boards names the board and maps its channel to a station channel
    board_name, station_channel = station.place(board, channel, table.where)
    identity = drive_identity.settings(table)
    profile = table.get("profile", str, "")
    if station_kind.simulated_drives and not profile:
        raise UserError(f"campaign: {table.where} on a simulated station needs a profile")
    if not station_kind.simulated_drives and profile:
        raise UserError(f"campaign: {table.where}: profile is for simulated drives only")
    allow_wipe = table.get("allow_wipe", bool, False)
    on_board = channel if board_name else -1
    spec = DriveSpec(station_channel, identity, profile, allow_wipe, board_name, on_board)
    table.done()
    return spec


def load(path: str, *, kinds: Mapping[str, KindRules]) -> Campaign:
    return parse(config.read_text(path), path, kinds=kinds)
