"""The brownout map: per model, what sags of each depth and duration did ([cut] kind = "sag";
docs/reports.md, "Brownout map"). A grid of depth (percent of nominal, or volts, as the campaign
drew them) against duration, each cell with its cuts, failing cuts, failures per class and the
same verdict a drive gets (rig/verdict/rule.py) against the campaign's criteria; drawn as an SVG
grid whose cells are shaded by their share of failing cuts. Empty where no campaign sagged.

Each cut's shape comes with its drive's run (`DriveRun.shapes`, reports/load/cut_shapes.py), which
the station loader fills; the central database's loader does not yet, so the section says which
sag campaigns it could not map (`not_mapped`) rather than drawing them as unshaped."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from html import escape
from typing import Any

from markupsafe import Markup

from reports.load.dataset import CampaignData, Dataset
from reports.render.templating import ENV
from rig.verdict import rule as verdict

DURATION_EDGES_MS = (0.0, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, math.inf)
DEPTH_BINS = 10  # per unit: percent in tenths of nominal; volts over the range drawn


@dataclass
class Cell:
    cuts: int = 0
    failing: int = 0
    classes: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class ModelMap:
    model: str
    unit: str  # "%" of nominal, or "V"
    depth_edges: list[float]
    cells: dict[tuple[int, int], Cell]  # (depth bin, duration bin) -> counts
    max_rate: float
    confidence: float

    def verdict(self, cell: Cell) -> str:
        return verdict.drive_verdict(False, cell.failing, cell.cuts, self.max_rate, self.confidence)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "unit": self.unit,
            "depth_edges": self.depth_edges,
            "duration_edges_ms": [e if math.isfinite(e) else None for e in DURATION_EDGES_MS],
            "cells": [
                {
                    "depth_bin": d,
                    "duration_bin": t,
                    "cuts": c.cuts,
                    "failing_cuts": c.failing,
                    "classes": dict(c.classes),
                    "verdict": self.verdict(c),
                }
                for (d, t), c in sorted(self.cells.items())
            ],
        }


def analyse(data: Dataset, confidence: float = 0.95) -> list[ModelMap]:
    sags: dict[tuple[str, str], list[tuple[float, float, frozenset[str], float]]] = {}
    for run in data.runs:
        shapes = run.shapes.of_kind("sag") if run.shapes is not None else {}
        if not shapes:
            continue
        rate = float(run.campaign.criteria.get("max_failure_probability", 1e-3))
        for cut in run.cuts:
            shape = shapes.get(cut.seq)
            if cut.is_cut and shape is not None and not math.isnan(shape[0] + shape[1]):
                depth, duration_ms, unit = shape
                sags.setdefault((run.model, unit), []).append(
                    (depth, duration_ms, cut.failure_classes, rate)
                )
    return [_map(model, unit, cuts, confidence) for (model, unit), cuts in sorted(sags.items())]


def not_mapped(data: Dataset) -> list[str]:
    """The sag campaigns ([cut] kind = "sag") of drives whose source carries no cut shapes (the
    central database: not on --central yet), by name."""
    return sorted({r.campaign.name for r in data.runs if r.shapes is None and _sags(r.campaign)})


def _sags(campaign: CampaignData) -> bool:
    cut = campaign.config.get("cut")
    return isinstance(cut, dict) and cut.get("kind") == "sag"


def _map(
    model: str,
    unit: str,
    cuts: list[tuple[float, float, frozenset[str], float]],
    confidence: float,
) -> ModelMap:
    low, high = (0.0, 100.0) if unit == "%" else (0.0, max(c[0] for c in cuts) or 1.0)
    edges = [low + (high - low) * i / DEPTH_BINS for i in range(DEPTH_BINS + 1)]
    cells: dict[tuple[int, int], Cell] = {}
    for depth, duration, classes, _ in cuts:
        d = min(DEPTH_BINS - 1, int((depth - low) / (high - low) * DEPTH_BINS))
        t = next(
            i for i in range(len(DURATION_EDGES_MS) - 1) if duration < DURATION_EDGES_MS[i + 1]
        )
        cell = cells.setdefault((d, t), Cell())
        cell.cuts += 1
        cell.failing += bool(classes)
        for cls in classes:
            cell.classes[cls] += 1
    return ModelMap(model, unit, edges, cells, min(c[3] for c in cuts), confidence)


def _duration_label(i: int) -> str:
    high = DURATION_EDGES_MS[i + 1]
    return f"≥{DURATION_EDGES_MS[i]:g}" if not math.isfinite(high) else f"<{high:g}"


def _grid(m: ModelMap) -> str:
    """The 2-D chart: depth down, duration across; shade by share of failing cuts."""
    used_t = sorted({t for _, t in m.cells})
    used_d = sorted({d for d, _ in m.cells}, reverse=True)
    w, h, left, top = 64, 26, 90, 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + w * len(used_t) + 10}"'
        f' height="{top + h * len(used_d) + 30}" role="img">'
    ]
    for x, t in enumerate(used_t):
        parts.append(
            f'<text x="{left + x * w + w / 2}" y="{top - 8}" text-anchor="middle"'
            f' font-size="11">{escape(_duration_label(t))} ms</text>'
        )
    for y, d in enumerate(used_d):
        label = f"{m.depth_edges[d]:g}–{m.depth_edges[d + 1]:g} {m.unit}"
        parts.append(
            f'<text x="{left - 6}" y="{top + y * h + h / 2 + 4}" text-anchor="end"'
            f' font-size="11">{escape(label)}</text>'
        )
        for x, t in enumerate(used_t):
            cell = m.cells.get((d, t))
            if cell is None:
                continue
            share = cell.failing / cell.cuts
            fill = f"rgb(255,{int(255 - 180 * share)},{int(255 - 180 * share)})"
            parts.append(
                f'<rect x="{left + x * w}" y="{top + y * h}" width="{w - 2}" height="{h - 2}"'
                f' fill="{fill}" stroke="#999"><title>{cell.failing}/{cell.cuts} failing;'
                f" {escape(m.verdict(cell))}</title></rect>"
                f'<text x="{left + x * w + w / 2 - 1}" y="{top + y * h + h / 2 + 3}"'
                f' text-anchor="middle" font-size="11">{cell.failing}/{cell.cuts}</text>'
            )
    parts.append(
        f'<text x="{left}" y="{top + h * len(used_d) + 18}" font-size="11">sag depth (rows)'
        " against duration (columns): failing cuts / cuts</text></svg>"
    )
    return "".join(parts)


def section(maps: list[ModelMap], unmapped: list[str] | None = None) -> str:
    """The report's section, or "" when no campaign sagged (the page is unchanged); `unmapped`:
    sag campaigns whose cuts' shapes the dataset does not carry (`not_mapped`)."""
    return ENV.get_template("brownout.html.j2").render(
        maps=maps,
        not_mapped=unmapped or [],
        grid=lambda m: Markup(_grid(m)),
        duration=_duration_label,
        classes=lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.classes.items())),
    )
