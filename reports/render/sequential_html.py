"""The "Sequential verdict" part of a model's section (reports/analysis/sequential.py): the plan,
its decision and the cuts it used, per drive too, its exact risks and ASN beside the fixed-sample
size, and its OC and ASN curves. Nothing at all for a model without a plan."""

from __future__ import annotations

from markupsafe import Markup

from reports.analysis.sequential import CONTINUING, Decision, SequentialReport
from reports.render import svg
from reports.render.templating import ENV


def sequential_section(s: SequentialReport | None) -> str:
    if s is None:
        return ""
    template = ENV.get_template("sequential.html.j2")
    return template.render(
        s=s,
        continuing=CONTINUING,
        used=_used,
        stopped=Markup(_stopped(s)),
        charts=Markup(oc_chart(s) + asn_chart(s)),
    )


def _stopped(s: SequentialReport) -> str:
    if s.stopped_when_settled:
        return ' and stopped its drives once it decided ([stop] when = "settled")'
    return " and stopped nothing on it"


def _used(d: Decision) -> str:
    if d.decision == CONTINUING:
        return f"no decision yet after {d.cuts} cuts ({d.failing} failing)"
    more = d.cuts_seen - d.cuts
    after = f"; {more} more recorded after it" if more else ""
    return f"decided after {d.cuts} cuts ({d.failing} failing){after}"


def oc_chart(s: SequentialReport) -> str:
    chart = svg.Chart(
        "Operating characteristic: P(PASS) against the per-cut failure probability",
        (0, s.p[-1]),
        (0, 1),
        "per-cut failure probability p",
        "P(PASS)",
    )
    chart.line(s.p, s.pass_probability, svg.colour(0))
    _levels(chart, s)
    chart.hline(1 - s.plan["alpha"], "#666", f"1 − alpha = {1 - s.plan['alpha']:g}")
    chart.hline(s.plan["beta"], "#666", f"beta = {s.plan['beta']:g}")
    return chart.render()


def asn_chart(s: SequentialReport) -> str:
    top = max(max(s.asn) + max(s.asn_sd), s.fixed_sample_cuts) * 1.1
    chart = svg.Chart(
        "Average sample number: cuts to a decision (± 1 sd)",
        (0, s.p[-1]),
        (0, top),
        "per-cut failure probability p",
        "cuts",
    )
    lows = [max(0.0, a - d) for a, d in zip(s.asn, s.asn_sd, strict=True)]
    highs = [a + d for a, d in zip(s.asn, s.asn_sd, strict=True)]
    chart.band(s.p, lows, highs, svg.colour(0))
    chart.line(s.p, s.asn, svg.colour(0))
    _levels(chart, s)
    chart.hline(s.fixed_sample_cuts, "#b00", f"fixed-sample n = {s.fixed_sample_cuts}")
    return chart.render()


def _levels(chart: svg.Chart, s: SequentialReport) -> None:
    chart.vline(s.plan["p0"], "#080", f"p0 = {s.plan['p0']:g}")
    chart.vline(s.plan["p1"], "#b00", f"p1 = {s.plan['p1']:g}")
