"""The report's verdicts for the dashboard's overview: per model over every campaign (as the
report of all the sources states it) and per campaign (each model on that campaign's cuts alone).
They come from the report's own analysis (reports/analysis/reliability.py, whose per-drive rule is
rig/verdict/rule.py), so the overview never claims more than the report does.

A view that keeps per-drive totals (the central database, schema v5) gives each model's verdict
from them (reports/analysis/model_summary.py: the same rule on the same counts, a few rows per
drive); a station's stores have none, and there the analysis reads a whole dataset, too much for
every two-second refresh of a live page: a verdict is computed again when its campaigns' progress
has changed, at most every `refresh_s` (the report part of a page refreshes as often), and kept
otherwise (the summaries' verdicts are kept the same way).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from reports import Dataset, ModelSummary, analyse
from rig.interface.fleet.views import CampaignProgress, FleetView, Overview

REFRESH_S = 10.0


@dataclass(frozen=True)
class ModelVerdict:
    model: str
    label: str  # PASS | FAIL | NOT YET DEMONSTRATED
    css: str  # the label as a class name (the report's)
    cuts: int
    drives: int


def verdicts_of(data: Dataset) -> list[ModelVerdict]:
    """Each model's verdict in the dataset, as the report gives it (none without cycles)."""
    if not data.runs:
        return []
    return [
        ModelVerdict(m.model, m.verdict.label, m.verdict.css, m.cuts, len(m.drives))
        for m in analyse(data).models
    ]


def _judge(read: Callable[[], Dataset]) -> list[ModelVerdict]:
    return verdicts_of(read())


def _from_summaries(summaries: dict[str, ModelSummary]) -> list[ModelVerdict]:
    return [
        ModelVerdict(m.model, m.verdict.label, m.verdict.css, m.cuts, len(m.drives))
        for m in summaries.values()
        if m.drives
    ]


class VerdictBoard:
    """The verdicts of a view's campaigns and models, kept between refreshes (thread-safe)."""

    def __init__(self, view: FleetView, refresh_s: float = REFRESH_S) -> None:
        self._view = view
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        # key -> (progress it was computed for, when, verdicts)
        self._kept: dict[str, tuple[Hashable, float, list[ModelVerdict]]] = {}

    def campaign(self, c: CampaignProgress) -> list[ModelVerdict]:
        if not c.cycles:  # queued, or no cycle recorded yet: nothing to judge
            return []
        return self._get(f"campaign {c.key}", (c.cycles, c.status), lambda: self._judged(c.key))

    def _judged(self, key: str) -> list[ModelVerdict]:
        summaries = self._view.model_summaries(campaign=key)
        if summaries is not None:
            return _from_summaries(summaries)
        return verdicts_of(self._view.campaign_dataset(key))

    def models(self, view: Overview) -> dict[str, ModelVerdict]:
        """Per model, pooled over every campaign of the view."""
        progress = tuple((c.key, c.cycles, c.status) for c in view.campaigns)
        summarised = self._get("models", progress, self._summarised)
        if summarised:
            return {v.model: v for v in summarised}
        found: dict[str, ModelVerdict] = {}
        for model in view.models:
            read = functools.partial(self._view.model_dataset, model)
            kept = self._get(f"model {model}", progress, functools.partial(_judge, read))
            found.update((v.model, v) for v in kept)
        return found

    def _summarised(self) -> list[ModelVerdict]:
        summaries = self._view.model_summaries()
        return [] if summaries is None else _from_summaries(summaries)

    def _get(
        self, key: str, progress: Hashable, compute: Callable[[], list[ModelVerdict]]
    ) -> list[ModelVerdict]:
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and (kept[0] == progress or now - kept[1] < self._refresh_s):
                return kept[2]
            verdicts = compute()
            self._kept[key] = (progress, now, verdicts)
            return verdicts
