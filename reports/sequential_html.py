"""The "Sequential verdict" part of a model's section (reports/sequential.py): the plan, its
decision and the cuts it used, per drive too, its exact risks and ASN beside the fixed-sample
size, and its OC and ASN curves. Nothing at all for a model without a plan."""

from __future__ import annotations

from html import escape as esc

from reports import svg
from reports.sequential import CONTINUING, Decision, SequentialReport


def sequential_section(s: SequentialReport | None) -> str:
    if s is None:
        return ""
    plan = s.plan
    return f"""<h3>Sequential verdict</h3>
<p>{_badge(s.model)} by the sequential plan over this model's cuts pooled over every drive,
store and station: {_used(s.model)}. <span class="note">Plan {esc(s.origin)}; while the
campaign ran, the rig counted one plan per {esc(s.scope)}{_stopped(s)}.</span></p>
<p class="note">The verdict above is the fixed-sample one (Clopper-Pearson over all the cuts
recorded); this one is Wald's sequential probability ratio test of p0 = {plan["p0"]:g}
(acceptable) against p1 = {plan["p1"]:g} (rejectable), producer's risk alpha =
{plan["alpha"]:g}, consumer's risk beta = {plan["beta"]:g}, truncated at {plan["max_cuts"]}
cuts (decided there by the sign of the log-likelihood ratio). Cuts are taken in the order they
started. Exactly (recursion over the truncated binomial walk): P(FAIL | p0) =
{s.exact_fail_at_p0:.4g}, P(PASS | p1) = {s.exact_pass_at_p1:.4g}; average cuts to a decision
{s.asn_p0:.1f} at p0 and {s.asn_p1:.1f} at p1, against {s.fixed_sample_cuts} cuts for the
fixed-sample plan with the same risks (FAIL above {s.fixed_sample_failures} failing cuts).</p>
{_drive_table(s)}
<div class="charts">{oc_chart(s)}{asn_chart(s)}</div>"""


def _stopped(s: SequentialReport) -> str:
    if s.stopped_when_settled:
        return ' and stopped its drives once it decided ([stop] when = "settled")'
    return " and stopped nothing on it"


def _badge(d: Decision) -> str:
    css = "NOT-YET-DEMONSTRATED" if d.decision == CONTINUING else d.decision
    return f'<span class="verdict {css}">{esc(d.decision.upper())}</span>'


def _used(d: Decision) -> str:
    if d.decision == CONTINUING:
        return f"no decision yet after {d.cuts} cuts ({d.failing} failing)"
    more = d.cuts_seen - d.cuts
    after = f"; {more} more recorded after it" if more else ""
    return f"decided after {d.cuts} cuts ({d.failing} failing){after}"


def _drive_table(s: SequentialReport) -> str:
    rows = "".join(
        f"<tr><td>{esc(d.drive)}</td><td>{_badge(d.decision)}</td>"
        f'<td class="n">{d.decision.cuts}</td><td class="n">{d.decision.failing}</td>'
        f'<td class="n">{d.decision.cuts_seen}</td></tr>'
        for d in s.drives
    )
    return (
        "<table><tr><th>drive</th><th>the plan over its own cuts</th><th>cuts used</th>"
        f"<th>failing</th><th>cuts recorded</th></tr>{rows}</table>"
    )


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
