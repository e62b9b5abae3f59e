"""Which attribute gives `percentage_used`, per controller family (rig/health/ata.py,
WEAR_BY_FAMILY): on a Silicon Motion drive 169 `Remaining_Lifetime_Perc` (raw = percent of life
left) wins over 177, which such a drive prints under smartctl's DEFAULT name
`Wear_Leveling_Count` with a normalised value that stays at 100. The captures are
built from a real SATA capture's JSON and the installed smartctl's drive database
(tests/health/drive_models.py)."""

from __future__ import annotations

import pytest
from drive_models import SILICON_MOTION, capture, default_names, drivedb
from health_paths import real_file

from rig.health.ata import WEAR_BY_FAMILY, wear_attrs_of
from rig.health.smart import parse_smartctl_json

SILICON_MOTION_OEM = "Intenso SSD"  # "Silicon Motion based OEM SSDs"
INNODISK = '2.5" SATA SSD 3ME3'  # "Innodisk 1IE3/3IE3/3ME3/3IE4/3ME4 SSDs"
SAMSUNG = "sat-Samsung_based_SSDs-SAMSUNG_MZ7L3240HCHQ-00A07-sda.json"


def _names(model: str) -> tuple[str, dict[int, str]]:
    """(family, names) as smartctl prints them for `model`: its presets over the DEFAULT ones."""
    family, presets = drivedb(model)
    return family, {**default_names(), **presets}


@pytest.mark.parametrize("model", [SILICON_MOTION, SILICON_MOTION_OEM, INNODISK])
def test_169_raw_wins_over_a_177_that_stays_at_100(model: str) -> None:
    family, names = _names(model)
    # the drive database names 169 for this family and leaves 177 to the DEFAULT name
    assert names[169] == "Remaining_Lifetime_Perc", (family, names[169])
    assert names[177] == "Wear_Leveling_Count"
    values = {169: (100, 96), 177: (100, 35), 12: (100, 210)}  # 177 raw: an erase count
    snap = parse_smartctl_json(capture(model, values, family, names))
    assert (snap.percentage_used, snap.percentage_used_source) == (
        4,
        "ata:169:Remaining_Lifetime_Perc",
    )


def test_a_silicon_motion_drive_without_169_reports_no_wear_rather_than_177() -> None:
    family, names = _names(SILICON_MOTION)
    snap = parse_smartctl_json(capture(SILICON_MOTION, {177: (100, 35)}, family, names))
    assert snap.percentage_used is None and snap.percentage_used_source is None


def test_samsung_keeps_177_normalised_on_its_real_capture() -> None:
    snap = parse_smartctl_json(real_file(SAMSUNG).read_text())
    assert (snap.percentage_used, snap.percentage_used_source) == (
        2,
        "ata:177:Wear_Leveling_Count",
    )


def test_each_family_rule_names_a_family_of_the_installed_drive_database() -> None:
    """A rule whose pattern matches no family smartctl prints would never apply."""
    models = (SILICON_MOTION, SILICON_MOTION_OEM, INNODISK, "KINGSTON SKC400S37128G")
    families = {drivedb(model)[0] for model in models} | {"Samsung based SSDs"}
    for rule in WEAR_BY_FAMILY:
        assert any(rule.family.search(f) for f in families), rule.family.pattern
        assert wear_attrs_of(next(f for f in families if rule.family.search(f))) == rule.attrs
