"""A model's qualification certificate: what the report's page of a model prints as.

On screen the report shows its charts and tables; printed (`@media print`), each model is one
certificate instead and nothing else: a page set per model (a page break before each), with the
model and its verdict in a running header repeated on every page of the set (a table header,
which Chromium repeats on each page a table spans), then the verdict with its reasons, the
criteria, the campaigns' plan, the cuts, the drives with their firmware, and the findings per
class. The figures are the record's (`record.ModelReport`), laid out by
reports/render/templates/certificate.html.j2; nothing is computed here.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from reports.analysis.record import NOT_REPORTED, ModelReport, Report
from reports.render.cells import markup
from reports.render.templating import ENV

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


def _criteria(m: ModelReport) -> list[list[object]]:
    c = m.criteria
    return [
        ["failure probability per cut", f"below {c.max_failure_rate:g} (one-sided upper bound)"],
        ["confidence", f"{c.confidence:.0%}"],
        ["failure classes counted", ", ".join(c.classes) or "every failure class"],
        ["a dead drive", "fails the model" if c.counts_dead else "not counted"],
        ["cuts every drive needs", str(c.min_cycles or "no minimum")],
        ["stated by", m.criteria_note],
    ]


def _plan(m: ModelReport, campaigns: Sequence[dict[str, Any]]) -> list[list[object]]:
    mine = [c for c in campaigns if f"{c['name']} ({c['station']})" in m.campaigns]
    return [
        [
            *(c["name"], c["station"], c["status"]),
            f"{_when(c['started_at'])} – {_when(c['ended_at'])}",
            Markup("<br>".join(markup("{}: {}", k, v) for k, v in c.get("plan", {}).items()))
            or "—",
            c["seed"],
        ]
        for c in mine
    ]


def _cuts(m: ModelReport) -> list[object]:
    p = m.criteria_failure
    return [
        *(m.cuts, p.failed, _rate(p.rate), _rate(p.upper), _rate(m.reliability_demonstrated)),
        *(m.verdict.cuts_needed or "—", m.rig_errors, m.interrupted, m.drives_dead),
    ]


def _drives(m: ModelReport) -> list[list[object]]:
    return [
        [
            d.serial,
            markup("<code>{}</code>", d.wwn) if d.wwn else "—",
            *(", ".join(d.firmware) or NOT_REPORTED, ", ".join(d.stations)),
            *(d.cuts.trials, d.cuts.failed),
            Markup("<br>".join(markup("{}: {}", k, v) for k, v in d.findings.items())) or "none",
            "alive" if d.dead_at_cut is None else f"dead at cut {d.dead_at_cut}",
            markup('<span class="{}">{}</span>', d.verdict.replace(" ", "-"), d.verdict),
        ]
        for d in m.drives
    ]


def certificate(m: ModelReport, report: Report, first: bool, generated: str) -> str:
    """The print-only certificate of one model (`first`: no page break before it)."""
    return ENV.get_template("certificate.html.j2").render(
        m=m,
        first=first,
        generated=generated,
        sources=len(report.sources),
        criteria=_criteria(m),
        plan=_plan(m, report.campaigns),
        cuts=_cuts(m),
        drives=_drives(m),
        classes=[
            [s.cls, s.findings, s.blocks, s.cuts.failed, _rate(s.cuts.rate), _rate(s.cuts.upper)]
            for s in m.classes
        ],
    )


def certificates(report: Report, generated: str) -> str:
    return "".join(certificate(m, report, i == 0, generated) for i, m in enumerate(report.models))
