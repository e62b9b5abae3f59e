"""The power board's KiCad checks: ERC, DRC, layout-vs-schematic and rail widths.

`make -C hardware check` must pass on the committed files and fail on copies broken on purpose:
a cut rail track, a footprint moved onto another, two pad nets swapped, a narrowed rail, and the
schematic's sense label renamed back to the mismatch ERC first found. Needs Debian's KiCad 6
(`make -C hardware` installs it and the pinned KiAuto); skipped with the reason where it is absent.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HW = ROOT / "hardware"
KIPY = "/usr/bin/python3"


def _kicad_missing() -> str:
    if not shutil.which("eeschema"):
        return (
            "KiCad 6 (eeschema) not installed: apt-get install kicad kicad-footprints kicad-symbols"
        )
    probe = subprocess.run([KIPY, "-c", "import pcbnew"], capture_output=True)
    if probe.returncode != 0:
        return f"{KIPY} cannot import pcbnew (Debian's kicad package)"
    if not shutil.which("Xvfb") or not shutil.which("xdotool"):
        return "xvfb / xdotool not installed (KiAuto drives eeschema under Xvfb)"
    return ""


pytestmark = pytest.mark.skipif(bool(_kicad_missing()), reason=_kicad_missing() or "kicad present")


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-C", str(HW), *args], capture_output=True, text=True, timeout=600
    )


def broken_board(tmp_path: Path, kind: str) -> Path:
    board = tmp_path / f"{kind}.kicad_pcb"
    shutil.copy(HW / "powerboard.kicad_pcb", board)
    shutil.copy(HW / "powerboard.kicad_pro", board.with_suffix(".kicad_pro"))  # the board's rules
    subprocess.run(
        [KIPY, str(ROOT / "tests" / "board_mutations.py"), kind, str(board)],
        check=True,
        capture_output=True,
    )
    return board


def test_committed_board_passes_erc_drc_lvs_and_widths() -> None:
    result = make("check")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "'DRC violations': 0, 'unconnected pads': 0" in out
    assert "0 differences" in out and "0 rail paths broken" in out


@pytest.mark.parametrize(
    ("kind", "check", "expect"),
    [
        ("cut-rail", "drc", "'unconnected pads': 1"),
        ("overlap", "drc", "[courtyards_overlap]"),
        ("swap-nets", "lvs", "R111 pad 1: schematic net"),
        ("narrow-rail", "widths", "rail paths broken"),
    ],
)
def test_check_fails_on_a_broken_board(tmp_path: Path, kind: str, check: str, expect: str) -> None:
    board = broken_board(tmp_path, kind)
    result = make(check, f"BOARD={board}")
    assert result.returncode != 0, result.stdout
    assert expect in result.stdout, result.stdout


def test_erc_fails_on_a_broken_schematic(tmp_path: Path) -> None:
    for name in (
        "powerboard.kicad_sch",
        "powerfault.kicad_sym",
        "sym-lib-table",
        "powerboard.kicad_pro",
    ):
        shutil.copy(HW / name, tmp_path / name)
    channel = (HW / "channel.kicad_sch").read_text()
    assert '(hierarchical_label "SENSE"' in channel
    (tmp_path / "channel.kicad_sch").write_text(
        channel.replace('(hierarchical_label "SENSE"', '(hierarchical_label "SNS"')
    )
    result = make("erc", f"SCH={tmp_path / 'powerboard.kicad_sch'}")
    assert result.returncode != 0, result.stdout + result.stderr
    report = (HW / "build" / "erc" / "powerboard.erc").read_text()
    assert "hier_label_mismatch" in report
