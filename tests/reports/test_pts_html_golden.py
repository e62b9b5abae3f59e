"""The PTS, write-cliff and TRIM sections (reports/render/endurance_html.py) of fixed runs equal the
reference written before they came from a template (tests/reports/golden/pts-sections.html):
steady state reached and not reached, a short run, a TRIM pair, a pair that is not one, and
names that must be escaped.

Regenerate (only for an intended change of the sections, saying so in the commit):
    .venv/bin/python -m tests.reports.test_pts_html_golden
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from reports.analysis.record import ModelReport
from reports.render import deferred, endurance_html
from tests.reports.test_pts_report import CLIFF, WITH_TRIM, _campaign, _report, _run

REFERENCE = Path(__file__).resolve().parent / "golden" / "pts-sections.html"


def sections(render: Callable[[ModelReport], str]) -> str:
    off = _run(_campaign("off", "none"), CLIFF)
    odd = _run(_campaign("o'ff <&>", "none"), CLIFF, serial="S'<2>")
    reports = [
        _report(off),
        _report(_run(_campaign("noisy", "none"), [100, 200] * 13)),
        _report(off, _run(_campaign("trim-on", "blkdiscard"), WITH_TRIM)),
        _report(off, _run(_campaign("trim-on", "blkdiscard"), WITH_TRIM, serial="S2")),
        _report(odd, _run(_campaign("on'<x>", "blk'discard"), WITH_TRIM, serial="S'<2>")),
        _report(_run(_campaign("short", "none"), [100] * 7)),
    ]
    models = [m for r in reports for m in r.models]
    assert all(m.endurance for m in models) and sum(len(m.trim_pairs) for m in models) == 2
    return "\n<!-- next model -->\n".join(deferred.join(render(m)) for m in models) + "\n"


def test_pts_sections_are_unchanged() -> None:
    assert sections(endurance_html.endurance_sections) == REFERENCE.read_text(encoding="utf-8")


if __name__ == "__main__":
    REFERENCE.write_text(sections(endurance_html.endurance_sections), encoding="utf-8")
