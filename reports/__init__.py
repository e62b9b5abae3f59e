"""The report layer's public names: all that the interfaces (rig/interface/) use of it.

Reports are built from stores only (SQLite files, or the fleet's PostgreSQL through the reads
handed in). Inside, reports/ is three layers (docs/architecture.md, "The layers"): load/ reads a
dataset, analysis/ turns it into the record, render/ writes the record; export.py writes a
report folder. A name is imported on first use (PEP 562 `__getattr__`), so `rig status`
loads the store's summary without the analysis, scipy or Jinja2.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reports.analysis.model_summary import ModelDriveSummary, ModelSummary, read_summaries
    from reports.analysis.reliability import analyse
    from reports.export import write_dataset_report, write_report
    from reports.load.central import read as read_central
    from reports.load.dataset import Dataset
    from reports.load.dataset import load as load_dataset
    from reports.load.dataset import merge as merge_datasets
    from reports.load.summary import CampaignReport, DriveReport
    from reports.load.summary import load as load_summary
    from reports.load.summary import text as summary_text
    from reports.render.cells import pct
    from reports.render.html import STYLE as REPORT_STYLE
    from reports.render.html import exposure_row
    from reports.render.html import render as render_html

# public name -> (module, name in it)
_PUBLIC = {
    "ModelDriveSummary": ("reports.analysis.model_summary", "ModelDriveSummary"),
    "ModelSummary": ("reports.analysis.model_summary", "ModelSummary"),
    "read_summaries": ("reports.analysis.model_summary", "read_summaries"),
    "analyse": ("reports.analysis.reliability", "analyse"),
    "write_dataset_report": ("reports.export", "write_dataset_report"),
    "write_report": ("reports.export", "write_report"),
    "read_central": ("reports.load.central", "read"),
    "Dataset": ("reports.load.dataset", "Dataset"),
    "load_dataset": ("reports.load.dataset", "load"),
    "merge_datasets": ("reports.load.dataset", "merge"),
    "CampaignReport": ("reports.load.summary", "CampaignReport"),
    "DriveReport": ("reports.load.summary", "DriveReport"),
    "load_summary": ("reports.load.summary", "load"),
    "summary_text": ("reports.load.summary", "text"),
    "pct": ("reports.render.cells", "pct"),
    "REPORT_STYLE": ("reports.render.html", "STYLE"),
    "exposure_row": ("reports.render.html", "exposure_row"),
    "render_html": ("reports.render.html", "render"),
}
__all__ = [
    "REPORT_STYLE",
    "CampaignReport",
    "Dataset",
    "DriveReport",
    "ModelDriveSummary",
    "ModelSummary",
    "analyse",
    "exposure_row",
    "load_dataset",
    "load_summary",
    "merge_datasets",
    "pct",
    "read_central",
    "read_summaries",
    "render_html",
    "summary_text",
    "write_dataset_report",
    "write_report",
]


if not TYPE_CHECKING:  # hidden from mypy, which would let any name through a module __getattr__

    def __getattr__(name: str) -> Any:
        if name not in _PUBLIC:
            raise AttributeError(f"module 'reports' has no attribute {name!r}")
        module, attr = _PUBLIC[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # the next lookup is a plain global
        return value
