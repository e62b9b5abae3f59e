"""The drive's own account of each power loss, per drive: the OCP C0h log's capacitor health and
PLP start count against cuts, "PLP unproven", and readiness against the drive's promise.

Its own section, JSON key (`ocp`) and CSV (`ocp.csv`), each absent when no drive of the dataset
reported the OCP log or a ready timeout, so reports of other stores are unchanged
(docs/reports.md). A PLP drive (one that reports a capacitor health other than FFFFh) whose PLP
start count did not count a cut after which its data survived (no failure but counter
anomalies and slow returns) kept that data some other way: its PLP claim is unproven there.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from reports.load.dataset import Dataset, DriveData
from reports.render import svg
from rig.check.failures import COUNTER_ANOMALY, SLOW_READY

NO_CAPACITOR = 0xFFFF
NOT_DATA = frozenset({COUNTER_ANOMALY, SLOW_READY})  # failures that are no loss of data
CSV_HEAD = (
    *("model", "serial", "campaign", "snapshots", "cuts", "plp_declared"),
    *("capacitor_health_first", "capacitor_health_last", "plp_start_rise"),
    *("plp_unproven_cuts", "incomplete_shutdown_rise", "slow_ready", "ready_timeout_ms"),
    "capacitor_failed_cuts",
)


@dataclass
class OcpDrive:
    model: str
    serial: str
    campaign: str
    snapshots: int
    plp_declared: bool
    ready_timeout_ms: int | None
    slow_ready: int  # slow_ready findings
    # (cuts since the first snapshot, capacitor health %, PLP start count rise), per snapshot
    series: list[tuple[int, int | None, int | None]] = field(default_factory=list)
    incomplete_rise: int | None = None  # last snapshot against the first
    plp_unproven: list[int] = field(default_factory=list)  # cycles: not counted, data kept
    capacitors_failed: list[int] = field(default_factory=list)  # cycles: capacitor_health found

    @property
    def cuts(self) -> int:
        return self.series[-1][0] if self.series else 0


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unproven(run: DriveData) -> list[int]:
    missed = {
        int(a["seq"])
        for a in run.anomalies
        if a.get("field") == "plp_start_count" and "did not count" in str(a.get("reason", ""))
    }
    if not missed:
        return []
    return sorted(c.seq for c in run.cuts if c.seq in missed and c.failure_classes <= NOT_DATA)


def drive(run: DriveData) -> OcpDrive | None:
    """The drive's OCP account in this campaign, or None when it reported none of it."""
    rows = [h for h in run.health if _int(h.fields.get("ocp_log_version")) is not None]
    timeouts = [_int(h.fields.get("ready_timeout_ms")) for h in run.health]
    timeout = next((t for t in reversed(timeouts) if t is not None), None)
    if not rows and timeout is None:
        return None
    health = [_int(h.fields.get("capacitor_health")) for h in rows]
    plp = any(v is not None and v != NO_CAPACITOR for v in health)
    first = rows[0] if rows else None
    out = OcpDrive(
        run.model,
        run.serial or run.wwn,
        run.campaign.name,
        len(rows),
        plp,
        timeout,
        run.findings.get(SLOW_READY, 0),
    )
    for h, cap in zip(rows, health, strict=True):
        assert first is not None
        base, count = (
            _int(first.fields.get("plp_start_count")),
            _int(h.fields.get("plp_start_count")),
        )
        rise = count - base if base is not None and count is not None else None
        shown = cap if cap != NO_CAPACITOR else None
        out.series.append((h.after_seq - first.after_seq, shown, rise))
    if first is not None:
        a, b = (
            _int(first.fields.get("incomplete_shutdowns")),
            _int(rows[-1].fields.get("incomplete_shutdowns")),
        )
        out.incomplete_rise = b - a if a is not None and b is not None else None
    out.plp_unproven = _unproven(run) if plp else []
    failed = {int(a["seq"]) for a in run.anomalies if a.get("field") == "capacitor_health"}
    out.capacitors_failed = sorted(failed)
    return out


def analyse(data: Dataset) -> list[OcpDrive]:
    return [d for run in data.runs if (d := drive(run)) is not None]


def to_json(drives: list[OcpDrive]) -> list[dict[str, Any]]:
    return [{**asdict(d), "cuts": d.cuts} for d in drives]


def _row(d: OcpDrive) -> list[object]:
    caps = [c for _, c, _ in d.series if c is not None]
    rises = [r for _, _, r in d.series if r is not None]
    return [
        *(d.model, d.serial, d.campaign, d.snapshots, d.cuts, int(d.plp_declared)),
        *(caps[0] if caps else "", caps[-1] if caps else "", rises[-1] if rises else ""),
        *(len(d.plp_unproven), "" if d.incomplete_rise is None else d.incomplete_rise),
        *(d.slow_ready, "" if d.ready_timeout_ms is None else d.ready_timeout_ms),
        len(d.capacitors_failed),
    ]


def write_csv(drives: list[OcpDrive], out: Path) -> Path | None:
    """ocp.csv, one row per drive and campaign; none written when no drive reported any."""
    if not drives:
        return None
    path = out / "ocp.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_HEAD)
        writer.writerows(_row(d) for d in drives)
    return path


def _chart(title: str, ylabel: str, drives: list[OcpDrive], pick: int, diagonal: bool) -> str:
    lines = [(d, [(s[0], s[pick]) for s in d.series if s[pick] is not None]) for d in drives]
    lines = [(d, pts) for d, pts in lines if len(pts) > 1]
    if not lines:
        return svg.no_data(title, "fewer than two snapshots with the field")
    longest = max(p[-1][0] for _, p in lines) or 1
    ys = [float(y or 0) for _, p in lines for _, y in p]
    top = max([*ys, longest if diagonal else 100.0])
    chart = svg.Chart(
        title,
        (0, longest),
        (min(0.0, *ys), top * 1.05),
        "cuts since the first snapshot",
        ylabel,
        width=520,
        height=260,
    )
    if diagonal:
        chart.line([0, longest], [0, longest], "#999", dash="5 4")
    for i, (d, pts) in enumerate(lines):
        chart.line([x for x, _ in pts], [float(y or 0) for _, y in pts], svg.colour(i))
        chart.legend(d.serial, svg.colour(i))
    return chart.render()


def _flag(d: OcpDrive) -> Markup:
    if not d.plp_declared:
        return Markup("no PLP capacitors")
    if d.plp_unproven:
        seqs = ", ".join(str(s) for s in d.plp_unproven[:10])
        more = "…" if len(d.plp_unproven) > 10 else ""
        return Markup('<b class="FAIL">PLP unproven</b> on {} cuts (after cut {}{})').format(
            len(d.plp_unproven), seqs, more
        )
    return Markup("PLP start counted every cut")


def _table(drives: Iterable[OcpDrive]) -> str:
    head = (
        "drive",
        "campaign",
        "snapshots / cuts",
        "PLP",
        "capacitor health",
        "slow_ready",
        "ready timeout",
    )
    cells = []
    for d in drives:
        caps = [c for _, c, _ in d.series if c is not None]
        cap: object = f"{caps[0]} → {caps[-1]} %" if caps else "—"
        if d.capacitors_failed:
            cap = Markup(
                '{} (<b class="FAIL">failed</b> after {} cuts, first after cut {})'
            ).format(cap, len(d.capacitors_failed), d.capacitors_failed[0])
        timeout = "—" if d.ready_timeout_ms is None else f"{d.ready_timeout_ms / 1000:g} s"
        row = (
            d.serial,
            d.campaign,
            f"{d.snapshots} / {d.cuts}",
            _flag(d),
            cap,
            d.slow_ready,
            timeout,
        )
        cells.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
    heads = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table><tr>{heads}</tr>{''.join(cells)}</table>"


def section(drives: list[OcpDrive]) -> str:
    """The report's section, per model, or "" when no drive reported the OCP log or a timeout."""
    if not drives:
        return ""
    parts = ["<h2>The drive's own account of each power loss (OCP C0h, CAP.TO/CRTO)</h2>"]
    for model in sorted({d.model for d in drives}):
        mine = [d for d in drives if d.model == model]
        parts.append(f'<h3>{escape(model)}</h3>{_table(mine)}<div class="charts">')
        parts.append(_chart("Capacitor health vs cuts", "capacitor health %", mine, 1, False))
        parts.append(
            _chart(
                "PLP start count rise vs cuts (dashed: one per cut)", "PLP starts", mine, 2, True
            )
        )
        parts.append("</div>")
    return "".join(parts)
