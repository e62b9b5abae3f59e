"""JUnit XML of a report (reports/render/junit.py), read back by a maintained JUnit parser
(junitparser) and compared with report.json: a suite per model, a test case for the model and one
per drive, FAIL and DEAD as <failure> with the findings per class, NOT YET DEMONSTRATED as
<skipped>."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from junitparser import Failure, JUnitXml, Properties, Skipped

from fixtures import sim_station
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text
from tests.cli_runner import rig


def properties(element: Any) -> dict[str, str]:
    found = element.child(Properties)
    return {p.name: p.value for p in found} if found is not None else {}


def test_junit_xml_says_the_report_verdicts(tmp_path: Path) -> None:
    # a drive that passes too few cuts (not yet), one that loses flushed data, one that dies
    text = campaign_text(["plp", "lying-flush", "brick"], 8, flush_every=2)
    campaign = campaign_file.parse(text.replace("off_ms = 1", "off_ms = 1\nreturn_timeout_s = 1"))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "j.sqlite"))
    run_campaign(campaign, station, store, Observer())
    store.close()
    own = tmp_path / "ci" / "verdicts.xml"
    own.parent.mkdir()
    done = rig("report", "j.sqlite", "--out", "rep", "--junit", str(own), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "rep" / "junit.xml").exists()  # --junit put it elsewhere
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    xml = JUnitXml.fromfile(str(own))
    suites = {s.name: s for s in xml}
    assert sorted(suites) == sorted(m["model"] for m in report["models"])
    verdicts_seen: list[str] = []
    for model in report["models"]:
        suite = suites[model["model"]]
        cases = list(suite)
        assert len(cases) == 1 + len(model["drives"]) == suite.tests
        props = properties(suite)
        assert props["verdict"] == model["verdict"]["label"]
        assert int(props["cuts"]) == model["cuts"]
        assert int(props["rig_errors"]) == model["rig_errors"]
        assert int(props["drives_dead"]) == model["drives_dead"]
        assert int(props["failing_cuts"]) == model["criteria_failure"]["failed"]
        outcomes = [(model["verdict"]["label"], cases[0], model["cuts"], None)]
        outcomes += [
            (d["verdict"], case, d["cuts"]["trials"], d)
            for d, case in zip(model["drives"], cases[1:], strict=True)
        ]
        for verdict, case, cuts, drive in outcomes:
            verdicts_seen.append(verdict)
            assert properties(case)["verdict"] == verdict
            assert int(properties(case)["cuts"]) == cuts
            results = case.result
            if verdict in ("FAIL", "DEAD"):
                assert case.is_failure and isinstance(results[0], Failure)
                assert results[0].type == verdict and results[0].message.startswith(verdict)
                if drive is not None:
                    assert drive["serial"] in case.name
                    for cls, n in drive["findings"].items():
                        assert f"{cls}: {n}" in results[0].text
            elif verdict == "PASS":
                assert case.is_passed
            else:
                assert case.is_skipped and isinstance(results[0], Skipped)
                assert results[0].message.startswith("NOT YET DEMONSTRATED")
    assert {"FAIL", "DEAD", "NOT YET DEMONSTRATED"} <= set(verdicts_seen)
    root = ET.parse(own).getroot()  # the totals junitparser leaves to the file
    assert int(root.get("tests", -1)) == len(verdicts_seen)
    assert int(root.get("failures", -1)) == sum(v in ("FAIL", "DEAD") for v in verdicts_seen)
    assert int(root.get("skipped", -1)) == verdicts_seen.count("NOT YET DEMONSTRATED")


def test_the_report_folder_has_junit_xml_by_default(tmp_path: Path) -> None:
    campaign = campaign_file.parse(campaign_text(["plp"], 2))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "d.sqlite"))
    run_campaign(campaign, station, store, Observer())
    store.close()
    done = rig("report", "d.sqlite", "--out", "rep", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    xml = JUnitXml.fromfile(str(tmp_path / "rep" / "junit.xml"))
    assert [s.name for s in xml] == ["SIM plp"]
