"""A self-contained HTML report (inline CSS and SVG, no network) from a store."""

from __future__ import annotations

import html
import json

from reports.summary import FAILURE_ORDER, CampaignReport, DriveReport, load
from rig.store import open_existing

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px}
th{background:#f0f0f0}.PASS{color:#080;font-weight:bold}.FAIL{color:#b00;font-weight:bold}
.DEAD{color:#fff;background:#b00;font-weight:bold}code{font-size:12px}
"""
COLOURS = ("#d62728", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#000")


def _bars(drives: list[DriveReport]) -> str:
    """Findings per class per drive, as a horizontal stacked bar chart."""
    width, row_h, left = 640, 28, 220
    biggest = max([sum(d.failures.values()) for d in drives] + [1])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + left + 20}" '
        f'height="{row_h * len(drives) + 50}" role="img" aria-label="failures per drive">'
    ]
    for i, d in enumerate(drives):
        y = 10 + i * row_h
        parts.append(
            f'<text x="0" y="{y + 17}" font-size="12">ch{d.channel} '
            f"{html.escape(d.model[:28])}</text>"
        )
        x = float(left)
        for cls, colour in zip(FAILURE_ORDER, COLOURS, strict=True):
            n = d.failures.get(cls, 0)
            if n:
                w = width * n / biggest
                parts.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 6}" '
                    f'fill="{colour}"><title>{cls}: {n}</title></rect>'
                )
                x += w
        if x == left:
            parts.append(
                f'<text x="{left}" y="{y + 17}" font-size="12" fill="#080">no failures</text>'
            )
    y = 20 + len(drives) * row_h
    x = float(left)
    for cls, colour in zip(FAILURE_ORDER, COLOURS, strict=True):
        parts.append(
            f'<rect x="{x}" y="{y}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{x + 13}" y="{y + 9}" font-size="10">{cls}</text>'
        )
        x += 13 + 6.2 * len(cls) + 10
    parts.append("</svg>")
    return "".join(parts)


def render(report: CampaignReport) -> str:
    esc = html.escape
    rows = []
    for d in report.drives:
        failures = (
            "<br>".join(
                f"{esc(k)}: {v} findings, {d.failure_blocks.get(k, 0)} blocks"
                for k, v in sorted(d.failures.items())
            )
            or "none"
        )
        back = f"{d.median_return_ms:.0f}" if d.median_return_ms is not None else "n/a"
        survived = (
            f"{d.nondurable_survived}/{d.nondurable_writes}" if d.nondurable_writes else "n/a"
        )
        rows.append(
            f"<tr><td>{d.channel}</td><td>{esc(d.model)}<br><code>s/n {esc(d.serial)}"
            f" {esc(d.wwn)}</code></td><td>{esc(d.profile)}</td><td>{d.cycles}</td>"
            f"<td>{d.cycles_error}</td><td>{d.cycles_with_failure}</td><td>{failures}</td>"
            f"<td>{d.allowed_losses}</td><td>{survived}</td><td>{back}</td>"
            f'<td class="{d.verdict}">{d.verdict}</td></tr>'
        )
    examples = []
    for f in report.examples:
        detail = json.loads(str(f["detail"]))
        examples.append(
            f"<tr><td>ch{f['channel']}</td><td>{f['cycle']}</td><td>{esc(str(f['class']))}</td>"
            f"<td>{f['lba_first']}+{f['lba_count']}</td><td>{f['expected_gen']}</td>"
            f"<td>{f['observed_gen']}</td><td><code>{esc(json.dumps(detail))[:160]}</code></td></tr>"
        )
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>Power-fault report: {esc(report.name)}</title><style>{STYLE}</style></head><body>
<h1>Power-fault campaign <i>{esc(report.name)}</i></h1>
<p>Station: {esc(report.station)}. Campaign status: {esc(report.status)}.
Findings are classed per ARCHITECTURE §4; allowed losses are unflushed writes lost whole,
which a drive may do.</p>
<h2>Per drive</h2>
<table><tr><th>ch</th><th>drive</th><th>profile</th><th>cuts</th><th>rig errors</th>
<th>cuts with failures</th><th>failures</th><th>allowed losses</th>
<th>unflushed writes survived</th><th>median return ms</th><th>verdict</th></tr>
{"".join(rows)}</table>
<h2>Failures per class</h2>{_bars(report.drives)}
<h2>Failure findings (first {len(examples)})</h2>
<table><tr><th>drive</th><th>cycle</th><th>class</th><th>LBA range</th><th>expected gen</th>
<th>observed gen</th><th>detail</th></tr>{"".join(examples)}</table>
</body></html>
"""


def write_report(db_path: str, out_path: str) -> str:
    store = open_existing(db_path)
    try:
        page = render(load(store))
    finally:
        store.close()
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(page)
    return out_path
