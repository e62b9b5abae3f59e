"""hardware/: the KiCad schematic is the source; its rendered images and the BOM are generated
from it (hardware/Makefile) and must match it; the README shows the render."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARDWARE = REPO / "hardware"
CHANNEL_NOTE = (
    "one sheet, 4 instances: CH0 = R1xx/Q1xx..., CH1 = R2xx..., CH2 = R3xx..., CH3 = R4xx..."
)


def _tool(script: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, str(HARDWARE / "tools" / script), *args],
        cwd=HARDWARE,
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("sheet", "extra"), [("powerboard", ()), ("channel", ("--ref-note", CHANNEL_NOTE))]
)
def test_rendered_schematic_matches_its_kicad_source(
    tmp_path: Path, sheet: str, extra: tuple[str, ...]
) -> None:
    source = HARDWARE / f"{sheet}.kicad_sch"
    assert source.read_text().lstrip().startswith("(kicad_sch")
    out = tmp_path / f"{sheet}.svg"
    _tool("render_sch.py", str(source), str(out), *extra)
    assert out.read_bytes() == (HARDWARE / f"{sheet}.svg").read_bytes(), "make -C hardware"
    png = (HARDWARE / f"{sheet}.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_bom_matches_the_schematic_and_names_real_parts(tmp_path: Path) -> None:
    out = tmp_path / "BOM.csv"
    _tool("bom.py", str(out))
    assert out.read_text() == (HARDWARE / "BOM.csv").read_text(), "make -C hardware BOM.csv"
    rows = list(csv.DictReader((HARDWARE / "BOM.csv").open()))
    fitted = [r for r in rows if r["fitted"] == "yes" and float(r["unit_eur"]) > 0]
    assert len(fitted) >= 10
    assert all(r["manufacturer"] and r["mpn"] for r in fitted), [
        r["references"] for r in fitted if not r["mpn"]
    ]


def test_readme_shows_the_board_render() -> None:
    readme = (REPO / "README.md").read_text()
    assert "](hardware/powerboard.png)" in readme
    assert (HARDWARE / "powerboard.pdf").read_bytes().startswith(b"%PDF")
