"""The per-model reliability report as one self-contained HTML page (inline CSS and SVG charts,
no script, no network), rendered from the record (`record.Report`) by the Jinja2 templates in
reports/render/templates/ with autoescaping: this module gathers what each template shows (rows of
cells, charts), the templates lay it out."""

from __future__ import annotations

import datetime
from typing import Any

from markupsafe import Markup

from reports.analysis.record import (
    NOT_REPORTED,
    ClassExposure,
    Comparison,
    DelayBin,
    DriveHealth,
    DriveStat,
    ModelReport,
    RailStat,
    Report,
)
from reports.render import certificate, charts, deferred, intervals, svg
from reports.render.cells import (
    anchor,
    finding_detail,
    markup,
    model_page,
    ms,
    pct,
    prop_cells,
    when,
)
from reports.render.endurance_html import endurance_sections
from reports.render.sequential_html import sequential_section
from reports.render.templating import ENV

STYLE = (
    """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{margin-bottom:0}h2{border-bottom:2px solid #ddd;padding-bottom:2px;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}
.PASS{color:#1b7837;font-weight:bold}.FAIL{color:#b2182b;font-weight:bold}
.DEAD{color:#fff;background:#252525;font-weight:bold}
.verdict{display:inline-block;padding:4px 12px;border-radius:4px;color:#000;font-weight:bold;
  border:1px solid #555;-webkit-print-color-adjust:exact;print-color-adjust:exact}
"""
    # the badges in the charts' verdict colours (reports/render/svg.py: VERDICT_FILL), FAIL hatched
    + f""".verdict.PASS{{background:{svg.VERDICT_FILL["PASS"]};color:#000}}
.verdict.FAIL{{background:repeating-linear-gradient(45deg,{svg.VERDICT_FILL["FAIL"]} 0 6px,
  #7a0f1d 6px 9px);color:#fff}}
.verdict.NOT-YET-DEMONSTRATED{{background:{svg.VERDICT_FILL["NOT YET DEMONSTRATED"]};color:#000}}
"""
    + """.NOT-YET-DEMONSTRATED{color:#8a6d00;font-weight:bold}
.absent{color:#777;font-style:italic}.note{color:#555;font-size:13px}
.detail{font-size:12px;white-space:nowrap}
code{font-size:12px;word-break:break-all}.charts{display:flex;flex-wrap:wrap;gap:12px}
section.model{border-left:4px solid #ccc;padding-left:14px;margin-top:2em}
"""
    + certificate.PRINT_STYLE
)


def render(report: Report, generated_at: float | None = None) -> str:
    return deferred.join(render_text(report, generated_at))


def render_text(
    report: Report, generated_at: float | None = None, extra: str = "", before: str = ""
) -> str:
    """The page with its largest parts as tokens (reports/render/deferred.py), for writing to a file
    as it is made. `extra`: sections of their own modules, after the models' (brownouts);
    `before`: before the models' long sections (the window of vulnerability,
    reports/render/window_html.py); "" leaves the page as it was."""
    stamp = datetime.datetime.fromtimestamp(
        generated_at if generated_at is not None else 0, tz=datetime.UTC
    ).strftime("%Y-%m-%d %H:%M UTC")
    return ENV.get_template("report.html.j2").render(
        report=report,
        title=", ".join(m.model for m in report.models) or "no drives",
        style=Markup(STYLE),
        when=stamp,
        confidence=f"{report.confidence:.0%}",
        campaign_head=["store", "campaign", "station", "status", "started", "ended"],
        campaigns=[campaign_row(c) for c in report.campaigns],
        unread=[(s, t) for s, t in report.unread_tables.items() if t],
        summary_head=summary_head(report.confidence),
        summary=[summary_row(m) for m in report.models],
        bounds_chart=Markup(charts.bounds_chart(report.models, report.confidence)),
        comparison_head=comparison_head(report.confidence),
        comparisons=[comparison_row(c) for c in report.comparisons],
        survival_chart=Markup(charts.survival_chart(report.models)),
        return_chart=Markup(charts.return_chart(report.models)),
        models=[model_section(m, report.confidence) for m in report.models],
        extra=Markup(extra),
        before=Markup(before),
        certificates=Markup(certificate.certificates(report, stamp)),
    )


def campaign_row(c: dict[str, Any]) -> list[object]:
    source = markup("<code>{}</code>", c["source"])
    return [
        source,
        c["name"],
        c["station"],
        c["status"],
        when(c["started_at"]),
        when(c["ended_at"]),
    ]


def summary_head(confidence: float) -> list[str]:
    c = f"{confidence:.0%}"
    return [
        *("model", "firmware", "drives", "cuts", "failing cuts", "rate", f"{c} upper bound"),
        *(f"reliability shown ({c})", "drives with failures", "dead", "rig errors", "verdict"),
    ]


def summary_row(m: ModelReport) -> list[object]:
    p = m.criteria_failure
    name = markup(
        '<a href="#{}">{}</a><br><a class="note" href="{}">own page</a>',
        anchor(m.model),
        m.model,
        model_page(m.model),
    )
    verdict = markup(
        '<span class="verdict {}">{}</span><br><span class="note">{}</span>'
        '<br><span class="note">criteria: {} ({}/{} counted)</span>',
        m.verdict.css,
        m.verdict.label,
        "; ".join(m.verdict.reasons),
        m.criteria.describe(),
        p.failed,
        p.trials,
    )
    return [
        *(name, ", ".join(m.firmware), len(m.drives), m.cuts, m.any_failure.failed),
        *(pct(m.any_failure.rate), pct(m.any_failure.upper), pct(m.reliability_demonstrated, 6)),
        *(f"{m.drive_level.failed}/{m.drive_level.trials}", m.drives_dead, m.rig_errors, verdict),
    ]


def comparison_head(confidence: float) -> list[str]:
    return [
        *("cuts with", "model A", "failing/cuts", "model B", "failing/cuts"),
        *("Fisher p (two-sided)", "Holm-adjusted p", f"differ at {1 - confidence:.0%}"),
    ]


def comparison_row(c: Comparison) -> list[object]:
    return [
        *(c.outcome, c.model_a, f"{c.a.failed}/{c.a.trials}", c.model_b),
        *(f"{c.b.failed}/{c.b.trials}", f"{c.p_value:.3g}", f"{c.p_holm:.3g}"),
        "yes" if c.significant else "no",
    ]


def exposure_row(e: ClassExposure) -> list[object]:
    zero = "yes" if e.zero_tolerance else ""
    return [e.cls, e.cuts.trials, e.cuts.failed, pct(e.cuts.upper), e.unknown, zero, e.verdict]


def model_section(m: ModelReport, confidence: float) -> Markup:
    c = f"{confidence:.0%}"
    v6 = intervals.is_v6(m)
    return Markup(
        ENV.get_template("model.html.j2").render(
            m=m,
            c=c,
            anchor=anchor(m.model),
            sequential=Markup(sequential_section(m.sequential)),
            firmware=[[fw, *prop_cells(p)] for fw, p in m.firmware.items()],
            classes=[[s.cls, s.findings, s.blocks, *prop_cells(s.cuts)] for s in m.classes],
            exposure=[exposure_row(e) for e in m.exposure],
            drive_head=drive_head(c),
            drives=[drive_row(d) for d in m.drives],
            class_chart=Markup(charts.class_chart(m.drives)),
            returns=[len(m.return_ms), *return_cells(m)],
            delay_chart=Markup(charts.delay_chart(m)),
            lost_after_chart=Markup(charts.lost_after_chart(m)),
            bin_rows=bin_rows,
            health=Markup(health_section(m)),
            interval_head=intervals.HEAD,
            interval_rows=intervals.summary_rows(m) if v6 else None,
            interval_charts=Markup(
                intervals.write_charts(m)
                if v6
                else intervals.generic_charts(m)
                if m.intervals
                else ""
            ),
            endurance=Markup(endurance_sections(m)),
            rail_head=RAIL_HEAD,
            rail_rows=[rail_row(r) for r in m.rail],
            rail_chart=Markup(charts.rail_chart(m.rail)),
            examples=[example_row(e) for e in m.examples[:60]],
        )
    )


def return_cells(m: ModelReport) -> list[str]:
    q = m.return_quantiles
    return [ms(q[k]) for k in ("min", "p50", "p90", "p99", "max", "mean")] if q else []


def bin_rows(bins: list[DelayBin]) -> list[list[object]]:
    rows = []
    for b in bins:
        high = "∞" if b.high_ms is None else f"{b.high_ms:g}"
        rows.append([f"[{b.low_ms:g}, {high}) ms", *prop_cells(b.cuts)])
    return rows


def drive_head(c: str) -> list[str]:
    return [
        *("drive (serial, WWN)", "firmware", "stations", "campaigns", "profile", "cuts"),
        *("failing cuts", f"{c} upper (this drive)", "findings", "allowed losses"),
        *("written", "blocks checked", "full scans", "blocks unchecked"),
        *("rig errors / interrupted", "status"),
        *("median return ms", "verdict"),
    ]


def drive_row(d: DriveStat) -> list[object]:
    findings = [markup("{}: {}", k, v) for k, v in d.findings.items()]
    return [
        markup("{}<br><code>{}</code>", d.serial, d.wwn),
        ", ".join(d.firmware) or NOT_REPORTED,
        *(", ".join(d.stations), ", ".join(d.campaigns), d.profile, d.cuts.trials),
        *(d.cuts.failed, pct(d.cuts.upper), Markup("<br>".join(findings)) or "none"),
        d.allowed_losses,
        *(f"{d.bytes_written / 1e9:.3g} GB", d.blocks_checked, d.full_scans, d.blocks_unchecked),
        d.rig_errors + d.interrupted,
        "alive" if d.dead_at_cut is None else f"dead at cut {d.dead_at_cut}",
        ms(d.median_return_ms),
        markup('<span class="{}">{}</span>', d.verdict.replace(" ", "-"), d.verdict),
    ]


def example_row(e: dict[str, Any]) -> list[object]:
    detail = markup('<span class="detail">{}</span>', finding_detail(e.get("detail", "")))
    return [
        *(str(e["drive"]), e.get("cycle", ""), str(e.get("class", ""))),
        f"{e.get('lba_first')}+{e.get('lba_count')}",
        *(e.get("expected_gen", ""), e.get("observed_gen", ""), detail),
    ]


RAIL_HEAD = (
    *("drive", "cuts measured", "ends", "below high threshold µs p50", "p90", "max"),
    *("below low threshold µs p50", "p90", "max"),
)


def rail_row(r: RailStat) -> list[object]:
    return [
        *(r.drive, r.measured, ", ".join(f"{k} {v}" for k, v in sorted(r.ends.items()))),
        *(ms(r.hi_us.get(k)) for k in ("p50", "p90", "max")),
        *(ms(r.lo_us.get(k)) for k in ("p50", "p90", "max")),
    ]


def health_section(m: ModelReport) -> str:
    """SMART deltas (one column per drive: a model has few; one row per counter) and counter
    anomalies."""
    fields = [f for f in HEALTH_ORDER if any(d.field == f for h in m.health for d in h.deltas)]
    by_drive = [{d.field: d for d in h.deltas} for h in m.health]
    rows: list[list[object]] = [
        ["campaign", *(h.campaign for h in m.health)],
        ["source", *(h.source for h in m.health)],
        ["snapshots / cuts covered", *(f"{h.snapshots} / {h.cuts}" for h in m.health)],
        ["unsafe-shutdown counter", *(unsafe_counter(h) for h in m.health)],
    ]
    for f in fields:
        cells: list[object] = [f]
        for deltas_of in by_drive:
            d = deltas_of.get(f)
            cells.append(
                "—"
                if d is None
                else markup("{} → {} (<b>{}</b>)", f"{d.first:g}", f"{d.last:g}", f"{d.delta:+g}")
            )
        rows.append(cells)
    anomalies = [
        Markup("<br>".join(markup("{}: {}", k, v) for k, v in sorted(h.anomalies.items())))
        or "none"
        for h in m.health
    ]
    rows.append(["counter anomalies", *anomalies])
    keys = ("drive", "seq", "field", "before", "after", "expected", "reason")
    return ENV.get_template("health.html.j2").render(
        m=m,
        drives=[h.drive for h in m.health],
        rows=rows,
        unsafe_chart=Markup(charts.unsafe_chart(m)),
        anomalies=[[str(a.get(k, "")) for k in keys] for a in m.anomalies[:50]],
    )


UNSAFE_COUNTER_MISSING = "counter not available"


def unsafe_counter(h: DriveHealth) -> object:
    """Where the unsafe-shutdown rule read its counter, or why no cut of this drive was judged
    by it (a model without the counter, or one smartctl's drive database does not name)."""
    if h.unsafe_source:
        return h.unsafe_source
    return markup('<b class="FAIL">{}</b>: cuts not judged by this rule', UNSAFE_COUNTER_MISSING)


HEALTH_ORDER = (
    *("power_cycles", "unsafe_shutdowns", "media_errors", "crc_errors", "reallocated_sectors"),
    *("pending_sectors", "reported_uncorrectable", "offline_uncorrectable", "error_log_entries"),
    *("percentage_used", "available_spare", "critical_warning", "host_bytes_written"),
    "temperature_c",
)
