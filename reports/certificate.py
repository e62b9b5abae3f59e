"""A model's qualification certificate: what the report's page of a model prints as.

On screen the report shows its charts and tables; printed (`@media print`), each model is one
certificate instead and nothing else: a page set per model (a page break before each), with the
model and its verdict in a running header repeated on every page of the set (a table header,
which Chromium repeats on each page a table spans), then the verdict with its reasons, the
criteria, the campaigns' plan, the cuts, the drives with their firmware, and the findings per
class. The figures are the report's own (`analysis.ModelReport`); nothing is computed here.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from html import escape as esc
from typing import Any

from reports.analysis import NOT_REPORTED, ModelReport, Proportion, Report

PRINT_STYLE = """
.certificate{display:none}
@media print{
@page{size:A4;margin:12mm 12mm 14mm}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}
body.report{margin:0;max-width:none}
body.report>*:not(.certificate){display:none!important}
body.report>.certificate{display:block;break-before:page}
body.report>.certificate.first{break-before:auto}
.certificate table{width:100%}
.certificate table.frame,.certificate table.frame>*>tr>*{border:none;padding:0}
.certificate thead.running th{background:none;font-size:12px;font-weight:normal;color:#444;
  border-bottom:1px solid #999;padding-bottom:3px}
.certificate thead{display:table-header-group}
.certificate tr{break-inside:avoid}
.certificate h2{margin:.5em 0 .2em;border:none;font-size:20px}
.certificate h3{margin:.8em 0 .2em;font-size:14px;break-after:avoid}
.certificate td,.certificate th{font-size:11px;padding:2px 5px}
.certificate .verdict{font-size:16px}
}
"""


def _when(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "—"
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M")


def _rate(p: float | None) -> str:
    return "—" if p is None else ("0" if p == 0 else f"{p:.3g}")


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    heads = "".join(f"<th>{esc(h)}</th>" for h in head)  # a thead: repeated on each page
    return f"<table><thead><tr>{heads}</tr></thead><tbody>{cells}</tbody></table>"


def _badge(m: ModelReport) -> str:
    return f'<span class="verdict {m.verdict.css}">{esc(m.verdict.label)}</span>'


def _criteria(m: ModelReport) -> str:
    c = m.criteria
    rows = [
        ["failure probability per cut", f"below {c.max_failure_rate:g} (one-sided upper bound)"],
        ["confidence", f"{c.confidence:.0%}"],
        ["failure classes counted", esc(", ".join(c.classes) or "every failure class")],
        ["a dead drive", "fails the model" if c.counts_dead else "not counted"],
        ["cuts every drive needs", str(c.min_cycles or "no minimum")],
        ["stated by", esc(m.criteria_note)],
    ]
    return _table(["criterion", "value"], rows)


def _plan(m: ModelReport, campaigns: Sequence[dict[str, Any]]) -> str:
    mine = [c for c in campaigns if f"{c['name']} ({c['station']})" in m.campaigns]
    rows = [
        [
            esc(c["name"]),
            esc(c["station"]),
            esc(c["status"]),
            f"{_when(c['started_at'])} – {_when(c['ended_at'])}",
            "<br>".join(f"{esc(k)}: {esc(v)}" for k, v in c.get("plan", {}).items()) or "—",
            c["seed"],
        ]
        for c in mine
    ]
    return _table(["campaign", "station", "status", "ran (UTC)", "plan", "seed"], rows)


def _cuts(m: ModelReport, criteria_failure: Proportion) -> str:
    p = criteria_failure
    rows = [
        [
            m.cuts,
            p.failed,
            _rate(p.rate),
            _rate(p.upper),
            _rate(m.reliability_demonstrated),
            m.verdict.cuts_needed or "—",
            m.rig_errors,
            m.interrupted,
            m.drives_dead,
        ]
    ]
    head = [
        "cuts",
        "failing cuts (counted classes)",
        "rate",
        f"{m.criteria.confidence:.0%} upper bound",
        "reliability shown",
        "failure-free cuts still needed",
        "rig errors",
        "interrupted",
        "dead drives",
    ]
    return _table(head, rows)


def _drives(m: ModelReport) -> str:
    rows = [
        [
            esc(d.serial),
            f"<code>{esc(d.wwn)}</code>" if d.wwn else "—",
            esc(", ".join(d.firmware) or NOT_REPORTED),
            esc(", ".join(d.stations)),
            d.cuts.trials,
            d.cuts.failed,
            "<br>".join(f"{esc(k)}: {v}" for k, v in d.findings.items()) or "none",
            "alive" if d.dead_at_cut is None else f"dead at cut {d.dead_at_cut}",
            f'<span class="{d.verdict.replace(" ", "-")}">{esc(d.verdict)}</span>',
        ]
        for d in m.drives
    ]
    head = ["serial", "WWN", "firmware", "station", "cuts", "failing cuts", "findings", "state"]
    return _table([*head, "drive verdict"], rows)


def _classes(m: ModelReport) -> str:
    if not m.classes:
        return "<p>No failure finding of any class.</p>"
    rows = [
        [esc(s.cls), s.findings, s.blocks, s.cuts.failed, _rate(s.cuts.rate), _rate(s.cuts.upper)]
        for s in m.classes
    ]
    c = f"{m.criteria.confidence:.0%}"
    return _table(["class", "findings", "blocks", "cuts with it", "rate", f"{c} upper"], rows)


def certificate(m: ModelReport, report: Report, first: bool, generated: str) -> str:
    """The print-only certificate of one model (`first`: no page break before it)."""
    reasons = "".join(f"<li>{esc(r)}</li>" for r in m.verdict.reasons)
    header = f"Power-fault qualification certificate · <b>{esc(m.model)}</b> · verdict {_badge(m)}"
    body = (
        f"<h2>{esc(m.model)}</h2>"
        f"<p>Verdict: {_badge(m)} against the criteria: {esc(m.criteria.describe())}.</p>"
        f"<ul>{reasons}</ul>"
        f"<h3>Criteria</h3>{_criteria(m)}"
        f"<h3>Plan</h3>{_plan(m, report.campaigns)}"
        f"<h3>Cuts</h3>{_cuts(m, m.criteria_failure)}"
        f"<h3>Drives ({len(m.drives)})</h3>{_drives(m)}"
        f"<h3>Findings per class</h3>{_classes(m)}"
        f'<p class="note">From the power-fault reliability report generated {generated} from'
        f" {len(report.sources)} store(s); its charts, per-cut data and method are in the"
        " report's HTML and JSON.</p>"
    )
    return (
        f'<section class="certificate{" first" if first else ""}">'
        f'<table class="frame"><thead class="running"><tr><th>{header}</th></tr></thead>'
        f"<tbody><tr><td>{body}</td></tr></tbody></table></section>"
    )


def certificates(report: Report, generated: str) -> str:
    return "".join(certificate(m, report, i == 0, generated) for i, m in enumerate(report.models))
