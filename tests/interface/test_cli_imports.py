"""What a `rig` command pays before its work: `rig status` imports no numpy, scipy or campaign
file sections, and no command imports argcomplete unless a shell completes (docs/decisions.md,
"A command imports only what it runs")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.reports.storebuilder import DriveSpec, build

ROOT = Path(__file__).resolve().parents[2]

# Runs a `rig` command in a fresh interpreter and prints its exit status and what it imported
PROBE = """
import json, sys
from rig.interface import cli
code = cli.main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

HEAVY = (
    "numpy",
    "scipy",
    "argcomplete",
    "rig.config.campaign",
    "rig.campaign",
    "rig.verdict.sequential",
)


def _run(*argv: str, env: dict[str, str] | None = None) -> tuple[int, set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *printed, last = done.stdout.splitlines()
    probe = json.loads(last)
    return probe["code"], set(probe["modules"]), "\n".join(printed)


def _imported(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_status_imports_no_numpy_scipy_or_campaign_sections(tmp_path: Path) -> None:
    # a failure-free drive whose verdict is PASS (its bound computed), one that FAILs
    db = build(
        tmp_path / "s.sqlite",
        [
            DriveSpec("Clean", "C1", ["ok"] * 3000, channel=0),
            DriveSpec("Lost", "L1", ["ok"] * 5 + ["lost_durable_write"], channel=1),
        ],
    )
    for extra in ([], ["--json"]):
        code, modules, out = _run("status", str(db), *extra)
        assert code == 1  # a drive failed
        assert "PASS" in out and "FAIL" in out
        assert [name for name in HEAVY if _imported(modules, name)] == []


def test_argcomplete_is_imported_only_when_a_shell_completes(tmp_path: Path) -> None:
    db = build(tmp_path / "s.sqlite", [DriveSpec("Clean", "C1", ["ok"] * 3)])
    _, modules, _ = _run("status", str(db))
    assert not _imported(modules, "argcomplete")
    env = dict(os.environ, _ARGCOMPLETE="1", COMP_LINE="rig sta", COMP_POINT="7")
    env["_ARGCOMPLETE_STDOUT_FILENAME"] = str(tmp_path / "completions")
    done = subprocess.run(
        [sys.executable, "-m", "rig.interface.cli"], cwd=ROOT, env=env, timeout=120, check=False
    )
    assert done.returncode == 0  # argcomplete answered and exited
    assert "status" in (tmp_path / "completions").read_text()


def test_the_station_check_schema_is_told_by_its_parser() -> None:
    """check_cli names the JSON schema in its --json help without importing the check."""
    from rig.interface import station_check as check_cli
    from rig.station import check

    assert check_cli.SCHEMA == check.SCHEMA
