"""Endurance runs as the report reads them: one series per drive and campaign, with the PTS
rounds and their steady-state window, the position of each write row against fill level and
against drive-capacity multiples written (the write cliff), where cuts and retention checks fell,
and TRIM on/off pairs (the same drive, two campaigns that differ only in `discard`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reports.load.dataset import DriveData
from rig.campaign.endurance import pts
from rig.config.tables import SIZE_UNITS

DEFAULT_REGION_BYTES = 64 << 20  # rig/config/campaign.py: the region when the campaign names none
SERIES_KINDS = ("precondition", "write")  # rows that wrote data (retention rows only read)


@dataclass
class Mark:
    """A cut or a retention check, placed after the write row it followed."""

    kind: str  # cut | retention
    seq: int  # the cycle's or the retention row's own seq
    fill: float
    capacity_multiple: float | None
    host_bytes: float


@dataclass
class SteadyStateFit:
    """One tracking variable over the measurement window (rig/campaign/endurance/pts.py's check, for
    plotting)."""

    variable: str
    rounds: list[int]
    values: list[float]
    average: float
    slope: float
    intercept: float
    range_share: float  # (max - min) / average
    excursion: float  # |slope| x (window - 1) / average
    ok: bool


@dataclass
class Steady:
    verdict: str  # filling | tracking | reached | not reached (the stored one)
    reached_at: int | None
    window: int
    max_rounds: int
    fits: list[SteadyStateFit] = field(default_factory=list)


@dataclass
class EnduranceSeries:
    drive: str  # model|serial (the physical drive)
    campaign: str
    source: str
    discard: str  # [endurance].discard ("none": TRIM off)
    purge: str
    precondition: bool
    region_bytes: int
    rows: list[dict[str, Any]]  # precondition and write rows, by seq, with the fields below added
    marks: list[Mark]
    rounds: list[dict[str, Any]]  # per round: round, iops, mb_per_s, mean_latency_us, verdict
    steady: Steady
    setup: dict[str, Any]  # what must match for a TRIM pair: workload, endurance but discard

    @property
    def trim(self) -> bool:
        return self.discard != "none"


@dataclass
class TrimPair:
    drive: str
    off: EnduranceSeries
    on: EnduranceSeries


def region_bytes(config: dict[str, Any]) -> int:
    head = config.get("campaign", {}) if isinstance(config.get("campaign"), dict) else {}
    for unit, scale in SIZE_UNITS:
        value = head.get(f"region_{unit}")
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return int(value * scale)
    return DEFAULT_REGION_BYTES


def _num(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def series_of(run: DriveData) -> EnduranceSeries | None:
    rows = sorted(
        (r for r in run.intervals if r.get("_table") == "endurance_interval"),
        key=lambda r: int(r.get("seq") or 0),
    )
    if not rows:
        return None
    config = run.campaign.config
    spec = config.get("endurance", {}) if isinstance(config.get("endurance"), dict) else {}
    region = region_bytes(config)
    written, marks = _place(rows, region, run)
    rounds = _rounds(written)
    window = int(spec.get("steady_window", pts.WINDOW))
    max_rounds = int(spec.get("max_rounds", pts.MAX_ROUNDS))
    setup = {
        "workload": config.get("workload", {}),
        "endurance": {k: v for k, v in spec.items() if k != "discard"},
        "region": {k: v for k, v in config.get("campaign", {}).items() if k.startswith("region")},
    }
    return EnduranceSeries(
        run.key,
        run.campaign.name,
        run.campaign.source,
        str(spec.get("discard", "none")),
        str(spec.get("purge", "none")),
        bool(spec.get("precondition", False)),
        region,
        written,
        marks,
        rounds,
        _steady(rounds, window, max_rounds),
        setup,
    )


def _place(
    rows: list[dict[str, Any]], region: int, run: DriveData
) -> tuple[list[dict[str, Any]], list[Mark]]:
    """The rows that wrote, each with `capacity_multiple` (host bytes / the tested capacity);
    retention checks and cuts placed after the row they followed (cuts by their start time)."""
    written: list[dict[str, Any]] = []
    marks: list[Mark] = []
    for row in rows:
        host = _num(row.get("host_bytes_total")) or 0.0
        if row.get("kind") in SERIES_KINDS:
            written.append(dict(row, capacity_multiple=host / region if region else None))
        elif row.get("kind") == "retention" and written:
            last = written[-1]
            marks.append(_mark("retention", int(row.get("seq") or 0), last))
    starts = [(_num(r.get("started_at")) or 0.0, r) for r in written]
    for cut in run.cuts:
        if not cut.is_cut:
            continue
        before = [r for t, r in starts if t <= cut.started_at]
        if before:
            marks.append(_mark("cut", cut.seq, before[-1]))
    return written, marks


def _mark(kind: str, seq: int, row: dict[str, Any]) -> Mark:
    return Mark(
        kind,
        seq,
        _num(row.get("fill_fraction")) or 0.0,
        row.get("capacity_multiple"),
        _num(row.get("host_bytes_total")) or 0.0,
    )


def _rounds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        detail = row.get("detail")
        figures = detail.get("pts") if isinstance(detail, dict) else None
        if row.get("kind") == "write" and isinstance(figures, dict):
            out.append(dict(figures, seq=row.get("seq")))
    return out


def _steady(rounds: list[dict[str, Any]], window: int, max_rounds: int) -> Steady:
    """The stored verdict, and the window's fits recomputed from the stored rounds (the same
    rule, rig/campaign/endurance/pts.py) for the window plot."""
    verdict = str(rounds[-1].get("verdict", "")) if rounds else "no rounds recorded"
    try:
        tracker = pts.SteadyState(window=window, max_rounds=max_rounds)
    except ValueError:
        return Steady(verdict, None, window, max_rounds)
    for n, r in enumerate(rounds, start=1):
        tracker.add(
            pts.Round(
                n,
                _num(r.get("iops")) or 0.0,
                _num(r.get("mb_per_s")) or 0.0,
                _num(r.get("mean_latency_us")) or 0.0,
            )
        )
    reached = next(
        (int(r["round"]) for r in rounds if r.get("verdict") == pts.REACHED and "round" in r),
        None,
    )
    chosen = tracker.steady_state_rounds()
    fits = []
    if len(chosen) >= 2:
        for variable in pts.TRACKED:
            values = [r.value(variable) for r in chosen]
            check = pts.check_steady_state(values, variable)
            fits.append(
                SteadyStateFit(
                    variable,
                    [r.number for r in chosen],
                    values,
                    check.average,
                    check.slope,
                    check.intercept,
                    check.range_share,
                    check.excursion,
                    check.ok,
                )
            )
    return Steady(verdict, reached, window, max_rounds, fits)


def endurance_series(runs: list[DriveData]) -> list[EnduranceSeries]:
    return [s for s in (series_of(r) for r in runs) if s is not None]


def trim_pairs(series: list[EnduranceSeries]) -> list[TrimPair]:
    """The same drive in two campaigns that differ only in discard: TRIM off beside TRIM on
    (the latest pair of each drive and setup)."""
    pairs: dict[tuple[str, str], TrimPair] = {}
    for off in (s for s in series if not s.trim):
        for on in (s for s in series if s.trim):
            if on.drive == off.drive and on.setup == off.setup and on.campaign != off.campaign:
                pairs[(off.drive, repr(sorted(off.setup.items())))] = TrimPair(off.drive, off, on)
    return list(pairs.values())
