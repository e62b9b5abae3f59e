"""How the report's HTML writes a figure: rates, milliseconds, times, a proportion's cells, a
finding's detail, a model's anchor and page name. Text is returned as text (the templates escape
it); a cell that is markup itself is built by `markup`, which escapes what it inserts."""

from __future__ import annotations

import datetime
import html
import json
import math

from markupsafe import Markup

from reports.analysis.record import Proportion


def escape(value: object) -> Markup:
    """Escaped as html.escape does (the page's bytes have always been that), Markup untouched."""
    if hasattr(value, "__html__"):
        return Markup(value)
    return Markup(html.escape(str(value)))


def markup(template: str, *values: object) -> Markup:
    """`template` (trusted markup) with `values` escaped into its `{}` places."""
    return Markup(template.format(*(escape(v) for v in values)))


def joined(separator: str, parts: list[Markup]) -> Markup:
    return Markup(separator.join(parts))


def pct(p: float | None, digits: int = 3) -> str:
    if p is None:
        return "n/a"
    if p == 0:
        return "0"
    return f"{p:.{digits}g}"


def ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def when(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "—"
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def prop_cells(p: Proportion) -> list[object]:
    interval = f"{pct(p.lower95)} – {pct(p.upper95)}"
    return [p.failed, p.trials, pct(p.rate), pct(p.upper), interval]


def model_page(model: str) -> str:
    """The file name of a model's own page (written beside report.html by reports.export)."""
    return "model-" + "".join(ch if ch.isalnum() or ch in "._" else "-" for ch in model) + ".html"


def anchor(model: str) -> str:
    return "m-" + "".join(ch if ch.isalnum() else "-" for ch in model)


def short(value: object) -> str:
    text = json.dumps(value) if isinstance(value, dict | list) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


DETAIL_LIST_ITEMS = 16  # a list in a finding's detail (sector generations...) shows this many


def finding_detail(detail: object) -> Markup:
    """A finding's detail (its JSON, docs/checker.md "What each finding carries") as readable
    `key: value` lines: a time stored in nanoseconds (a key ending `_ns`) in ms or s, a list
    as its items (the first DETAIL_LIST_ITEMS and how many in all), yes/no for a flag."""
    if not isinstance(detail, dict):
        return escape(short(detail)) if detail not in (None, "") else Markup("")
    lines = []
    for key, value in detail.items():
        name = str(key)
        if name.endswith("_ns") and isinstance(value, int | float) and not isinstance(value, bool):
            name, text = name.removesuffix("_ns"), nanoseconds(value)
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        elif isinstance(value, list):
            shown = " ".join(str(v) for v in value[:DETAIL_LIST_ITEMS])
            more = len(value) - DETAIL_LIST_ITEMS
            text = f"{shown} … ({len(value)} in all)" if more > 0 else shown
        else:
            text = short(value)
        lines.append(markup("{}: {}", name.replace("_", " "), text))
    return joined("<br>", lines)


def nanoseconds(ns: float) -> str:
    return f"{ns / 1e6:.4g} ms" if abs(ns) < 10e9 else f"{ns / 1e9:.4g} s"
