"""The report as JUnit XML (junit.xml beside report.json, or `rig report --junit FILE`), for CI
and test-management systems: one <testsuite> per model, in it one <testcase> for the model's
verdict and one per drive. It reads the same `record.Report` as the HTML and JSON.

- PASS: a test case that passed;
- FAIL or DEAD: <failure> whose message names the verdict and the failing cuts, and whose text
  lists the findings per class;
- NOT YET DEMONSTRATED: <skipped> (no failure, too few cuts to claim a pass), its message saying
  how many failure-free cuts are still needed.

Counts are <property> elements: the suite's (cuts, rig errors, failing cuts, ...) and each test
case's own (docs/reports.md, "JUnit XML").
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from reports.analysis.record import DriveStat, ModelReport, Report
from rig.verdict.rule import DEAD, FAIL, PASS

FAILED = (FAIL, DEAD)


def _properties(parent: ET.Element, values: dict[str, object]) -> None:
    props = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(props, "property", name=name, value=str(value))


def _outcome(case: ET.Element, verdict: str, summary: str, findings: dict[str, int]) -> None:
    """The verdict as JUnit's outcome of `case` (PASS: none, it passed)."""
    if verdict in FAILED:
        failure = ET.SubElement(case, "failure", message=f"{verdict}: {summary}", type=verdict)
        failure.text = "\n".join(f"{cls}: {n}" for cls, n in findings.items()) or verdict
    elif verdict != PASS:
        ET.SubElement(case, "skipped", message=f"{verdict}: {summary}")


def _model_case(suite: ET.Element, m: ModelReport) -> None:
    case = ET.SubElement(suite, "testcase", classname=m.model, name=f"model {m.model}")
    failing = m.criteria_failure.failed
    _properties(
        case,
        {
            "verdict": m.verdict.label,
            "cuts": m.cuts,
            "failing_cuts": failing,
            "verdict_rule": m.verdict.rule,
            # per judged class: failing/exposed cuts, bound, verdict (reports/analysis/exposure.py)
            **{
                f"exposure.{e.cls}": f"{e.cuts.failed}/{e.cuts.trials} {e.cuts.upper} {e.verdict}"
                for e in m.exposure
            },
        },
    )
    findings = {c.cls: c.findings for c in m.classes}
    summary = "; ".join(m.verdict.reasons) or f"{failing} of {m.cuts} cuts failed"
    _outcome(case, m.verdict.label, summary, findings)


def _drive_case(suite: ET.Element, m: ModelReport, d: DriveStat) -> None:
    where = ", ".join(f"ch{c}" for c in d.channels)
    name = f"drive {d.serial or d.wwn} ({where})"
    case = ET.SubElement(suite, "testcase", classname=f"{m.model}.drives", name=name)
    _properties(
        case,
        {
            "verdict": d.verdict,
            "cuts": d.cuts.trials,
            "failing_cuts": d.cuts.failed,
            "rig_errors": d.rig_errors,
            "interrupted": d.interrupted,
            "firmware": ",".join(d.firmware),
        },
    )
    summary = f"{d.cuts.failed} of {d.cuts.trials} cuts failed"
    if d.dead_at_cut is not None:
        summary = f"dead at cut {d.dead_at_cut}; {summary}"
    _outcome(case, d.verdict, summary, d.findings)


def _suite(root: ET.Element, m: ModelReport) -> tuple[int, int, int]:
    """The model's suite; returns its (tests, failures, skipped)."""
    suite = ET.SubElement(root, "testsuite", name=m.model)
    _properties(
        suite,
        {
            "verdict": m.verdict.label,
            "cuts": m.cuts,
            "failing_cuts": m.criteria_failure.failed,
            "any_failure_cuts": m.any_failure.failed,
            "rig_errors": m.rig_errors,
            "interrupted": m.interrupted,
            "drives": len(m.drives),
            "drives_dead": m.drives_dead,
            "criteria": m.criteria.describe(),
        },
    )
    _model_case(suite, m)
    for d in m.drives:
        _drive_case(suite, m, d)
    verdicts = [m.verdict.label] + [d.verdict for d in m.drives]
    counts = (
        len(verdicts),
        sum(v in FAILED for v in verdicts),
        sum(v not in (*FAILED, PASS) for v in verdicts),
    )
    for key, value in zip(("tests", "failures", "skipped"), counts, strict=True):
        suite.set(key, str(value))
    suite.set("errors", "0")
    return counts


def junit_xml(report: Report) -> str:
    root = ET.Element("testsuites", name="rig power-fault report")
    totals = [0, 0, 0]
    for m in report.models:
        for i, n in enumerate(_suite(root, m)):
            totals[i] += n
    for key, value in zip(("tests", "failures", "skipped"), totals, strict=True):
        root.set(key, str(value))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def write(report: Report, path: str | Path) -> None:
    Path(path).write_text(junit_xml(report) + "\n", encoding="utf-8")
