"""The Markdown summary (`rig report --markdown FILE`, reports/render/markdown.py), read back with a
maintained Markdown parser (Python-Markdown, its tables extension) and compared with report.json:
the models table, each model's verdict and reasons, each drive's line."""

from __future__ import annotations

import dataclasses
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import markdown as markdown_parser

from reports.analysis import reliability as analysis
from reports.load import dataset
from reports.render import markdown
from tests.cli_runner import rig
from tests.reports.golden_report import CASES, GOLDEN


def parsed(text: str) -> ET.Element:
    return ET.fromstring(f"<div>{markdown_parser.markdown(text, extensions=['tables'])}</div>")


def rows(table: ET.Element) -> list[list[str]]:
    return [["".join(td.itertext()) for td in tr] for tr in table.iter("tr")][1:]


def rate(value: Any) -> str:
    return "n/a" if value is None else "0" if value == 0 else f"{value:.3g}"


def verdict(drive: dict[str, Any]) -> list[str]:
    return [str(drive["cuts"]["failed"]), drive["verdict"]]


def test_markdown_summary_says_what_report_json_says(tmp_path: Path) -> None:
    for name in CASES["stations"]:
        shutil.copyfile(GOLDEN / "stores" / name, tmp_path / name)
    done = rig("report", *CASES["stations"], "--out", "rep", "--markdown", "sum.md", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    page = parsed((tmp_path / "sum.md").read_text())
    tables = list(page.iter("table"))
    assert len(tables) == 1 + len(report["models"])  # the models, then each model's drives
    assert rows(tables[0]) == [
        [
            m["model"],
            m["verdict"]["label"],
            str(len(m["drives"])),
            str(m["cuts"]),
            str(m["any_failure"]["failed"]),
            rate(m["any_failure"]["rate"]),
            rate(m["any_failure"]["upper"]),
            f"{m['reliability_demonstrated']:.6g}",
            str(m["drives_dead"]),
        ]
        for m in report["models"]
    ]
    headings = ["".join(h.itertext()) for h in page.iter("h2")]
    assert headings == [f"{m['model']}: {m['verdict']['label']}" for m in report["models"]]
    reasons = [["".join(li.itertext()) for li in ul] for ul in page.iter("ul")]
    assert reasons == [m["verdict"]["reasons"] for m in report["models"]]
    for m, table in zip(report["models"], tables[1:], strict=True):
        assert rows(table) == [
            [d["serial"], ", ".join(d["firmware"]), str(d["cuts"]["trials"]), *verdict(d)]
            for d in m["drives"]
        ]
    assert len(report["models"]) == 2 and any(m["drives_dead"] for m in report["models"])


def test_a_pipe_in_a_name_stays_in_its_cell() -> None:
    report = analysis.analyse(dataset.load([str(GOLDEN / "stores" / "demo.sqlite")]))
    first = dataclasses.replace(report.models[0], model="Vendor | X")
    page = parsed(markdown.text(dataclasses.replace(report, models=[first]), 0.0))
    [models, _] = list(page.iter("table"))
    assert rows(models)[0][:2] == ["Vendor | X", first.verdict.label]
