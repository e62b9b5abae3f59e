"""Captures of drive models the vendored real data lacks, derived from real ones.

The real-data folder has no Kingston KC400 (Phison), no Silicon Motion drive and no Samsung
PM893 outside smartctl's drive database, models whose health the rig once misread. Each is built
from a real capture of a SATA SSD (its device, identity and JSON shape as smartctl printed them),
with the attribute table replaced by the ids that model reports, named exactly as the installed
smartctl's drive database names them for that model (`smartctl -P showall MODEL`, the presets
smartctl applies when it prints the JSON), and the values such drives were seen to report.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from functools import cache

import pytest
from health_paths import real_file

# a real SATA SSD capture whose table rows give the JSON shape of an attribute
BASE = "sat-Intel_S4510_S4610_S4500_S4600_Series_SSDs-INTEL_SSDSC2KB480G8-sdm.json"
KC400 = "KINGSTON SKC400S37128G"
SILICON_MOTION = "ADATA SU800"
# smartctl's default names (DEFAULT entry) for an SSD it has no entry for
DEFAULT_NAMES = {5: "Reallocated_Sector_Ct", 187: "Reported_Uncorrect", 235: "Unknown_Attribute"}

_PRESET = re.compile(r"^(?:ATTRIBUTE OPTIONS:)?\s+(\d{3}) (\S+)", re.MULTILINE)


@cache
def drivedb(model: str) -> tuple[str, dict[int, str]]:
    """(model family, {attribute id: name}) from the installed smartctl's drive database."""
    smartctl = shutil.which("smartctl") or shutil.which("smartctl", path="/usr/sbin:/sbin")
    if smartctl is None:
        pytest.fail("smartctl is not installed (the Makefile's STATION_APT_PACKAGES installs it)")
    text = subprocess.run(
        [smartctl, "-P", "showall", model], capture_output=True, text=True, check=False
    ).stdout
    family = re.search(r"^MODEL FAMILY:\s+(.+)$", text, re.MULTILINE)
    if family is None:
        pytest.fail(f"{model} not in smartctl's drive database:\n{text[:400]}")
    options = text[text.index("ATTRIBUTE OPTIONS:") :]
    return family.group(1).strip(), {int(i): n for i, n in _PRESET.findall(options)}


@cache
def default_names() -> dict[int, str]:
    """{attribute id: name} of smartctl's DEFAULT entry: the names it prints for an attribute
    no model preset names (`smartctl -P showall`, the entry whose family is DEFAULT)."""
    smartctl = shutil.which("smartctl") or shutil.which("smartctl", path="/usr/sbin:/sbin")
    if smartctl is None:
        pytest.fail("smartctl is not installed (the Makefile's STATION_APT_PACKAGES installs it)")
    text = subprocess.run(
        [smartctl, "-P", "showall"], capture_output=True, text=True, check=False
    ).stdout
    entry = next((e for e in text.split("\n\n") if "MODEL FAMILY:       DEFAULT" in e), "")
    if not entry:
        pytest.fail(f"no DEFAULT entry in smartctl -P showall:\n{text[:400]}")
    options = entry[entry.index("ATTRIBUTE OPTIONS:") :]
    return {int(i): n for i, n in _PRESET.findall(options)}


def capture(
    model: str,
    values: dict[int, tuple[int, int]],
    family: str | None,
    names: dict[int, str],
) -> str:
    """smartctl -x JSON of `model` with attributes {id: (normalised, raw)} named by `names`."""
    doc = json.loads(real_file(BASE).read_text())
    template = doc["ata_smart_attributes"]["table"][0]
    table = []
    for attr_id, (normalised, raw) in sorted(values.items()):
        row = copy.deepcopy(template)
        row.update(id=attr_id, name=names[attr_id], value=normalised, worst=normalised)
        row["raw"] = {"value": raw, "string": str(raw)}
        table.append(row)
    doc["ata_smart_attributes"]["table"] = table
    doc["model_name"] = model
    doc.pop("model_family", None)
    if family is not None:
        doc["model_family"] = family
    doc["in_smartctl_database"] = family is not None
    return json.dumps(doc, indent=1)


def from_drivedb(model: str, values: dict[int, tuple[int, int]]) -> str:
    family, presets = drivedb(model)
    return capture(model, values, family, {**DEFAULT_NAMES, **presets})


SAMSUNG_PM893 = "sat-Samsung_based_SSDs-SAMSUNG_MZ7L3240HCHQ-00A07-sda.json"


def without_drivedb_entry(name: str, attr_id: int) -> str:
    """The real capture `name` as a smartctl without the model's drive-database entry prints
    it: no model family, and attribute `attr_id` under the default name Unknown_Attribute."""
    doc = json.loads(real_file(name).read_text())
    for row in doc["ata_smart_attributes"]["table"]:
        if row["id"] == attr_id:
            row["name"] = "Unknown_Attribute"
    doc.pop("model_family", None)
    doc["in_smartctl_database"] = False
    return json.dumps(doc, indent=1)
