"""The lean station install: `make station` installs the runtime set, `make setup`
the test and development set on top. The runtime lock is exactly what the rig's code needs,
the dev lock holds the rest, the station's Debian list has no test machinery, and the rig's
commands run with every dev-only package out of reach."""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = {"rig", "reports", "fixtures"}
# Debian packages a station must not get: emulators, kernels, browsers, a database server,
# the simulator's FUSE and simavr
NOT_ON_A_STATION = re.compile(r"^(qemu|linux-image|chromium|postgresql|simavr|libsimavr|fuse)")


def _lock(name: str) -> tuple[set[str], list[str]]:
    """(pinned names, canonicalised; the `-r` includes) of a lock file."""
    names, includes = set(), []
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            includes.append(line[3:].strip())
        elif line:
            assert "==" in line, f"{name}: {line!r} is not pinned exactly"
            names.add(canonicalize_name(line.split("==")[0]))
    return names, includes


def _closure(requirements: list[Requirement]) -> set[str]:
    """Every distribution `requirements` pull in (with their extras), from the installed
    packages' metadata."""
    seen: set[tuple[str, str]] = set()
    todo = [(r.name, extra) for r in requirements for extra in {"", *r.extras}]
    while todo:
        name, extra = todo.pop()
        key = (canonicalize_name(name), extra)
        if key in seen:
            continue
        seen.add(key)
        for text in md.requires(name) or []:
            sub = Requirement(text)
            if sub.marker is None or sub.marker.evaluate({"extra": extra}):
                todo.extend((sub.name, e) for e in {"", *sub.extras})
    return {name for name, _ in seen}


def _pyproject_dependencies() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def _third_party_imports() -> dict[str, set[str]]:
    """{top-level module: files} of every import under rig/, reports/ and fixtures/ that is
    neither the standard library nor first-party (imports inside functions included)."""
    import ast

    found: dict[str, set[str]] = {}
    for path in sorted(p for top in FIRST_PARTY for p in (ROOT / top).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_runtime_lock_is_exactly_what_pyproject_needs() -> None:
    runtime, includes = _lock("requirements.lock")
    assert includes == []
    needed = _closure(_pyproject_dependencies())
    assert runtime - needed == set(), "in the runtime lock but nothing at run time needs it"
    assert needed - runtime == set(), "needed at run time but not pinned in requirements.lock"


def test_the_dev_lock_adds_to_the_runtime_lock_and_is_closed() -> None:
    runtime, _ = _lock("requirements.lock")
    dev, includes = _lock("requirements-dev.lock")
    assert includes == ["requirements.lock"]
    assert dev & runtime == set(), "pinned in both locks"
    for tool in ("pytest", "hypothesis", "ruff", "mypy", "pillow", "selenium", "virtme-ng"):
        assert tool in dev, tool
    everything = runtime | dev
    pulled = _closure([Requirement(name) for name in everything])
    assert pulled - everything == set(), "pulled in by a locked package but not pinned"


def test_every_import_of_the_rig_resolves_to_the_runtime_lock() -> None:
    runtime, _ = _lock("requirements.lock")
    distributions = md.packages_distributions()
    imports = _third_party_imports()
    assert imports, "the scan found no third-party import at all"
    for module, files in sorted(imports.items()):
        owners = {canonicalize_name(d) for d in distributions.get(module, [])}
        assert owners, f"{module} (imported by {sorted(files)}) belongs to no installed package"
        assert owners & runtime, f"{module} (imported by {sorted(files)}) is not runtime-locked"


def _make_variable(name: str) -> list[str]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(rf"^{name}\s*:=(.*)$", text, re.MULTILINE)
    assert match, f"the Makefile has no {name}"
    return match.group(1).split()


def test_the_station_apt_list_has_no_test_machinery_and_setup_installs_both() -> None:
    station, dev = _make_variable("STATION_APT_PACKAGES"), _make_variable("APT_PACKAGES")
    assert [p for p in station if NOT_ON_A_STATION.match(p)] == []
    assert set(station) & set(dev) == set()
    for tool in ("smartmontools", "sg3-utils", "nvme-cli", "avrdude", "udev"):
        assert tool in station, tool
    for heavy in ("qemu-system-x86", "chromium", "postgresql", "simavr"):
        assert heavy in dev, heavy
    # `make setup` installs both lists; `make station` only the first
    dry = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), "setup"], capture_output=True, text=True, check=False
    ).stdout
    assert "requirements-dev.lock" in dry
    assert all(p in dry for p in station + dev)
    dry = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), "station"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "requirements.lock" in dry and "requirements-dev.lock" not in dry
    assert all(p in dry for p in station) and not any(f" {p} " in dry for p in dev)


def _dev_only_modules() -> set[str]:
    runtime, _ = _lock("requirements.lock")
    dev, _ = _lock("requirements-dev.lock")
    modules = set()
    for module, dists in md.packages_distributions().items():
        owners = {canonicalize_name(d) for d in dists}
        if owners and owners <= dev and not owners & runtime:
            modules.add(module)
    return modules


# Makes every module of a dev-only package (argv[1], comma-separated) unimportable, as on a
# station; then the rest of the program runs.
_DEV_ONLY_AWAY = """
import sys
blocked = set(sys.argv[1].split(","))
class DevOnly:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"{name}: dev-only, not on a station")
        return None
sys.meta_path.insert(0, DevOnly())
"""
_RIG = "from rig.interface.cli import main\nsys.exit(main(sys.argv[2:]))\n"


@pytest.mark.timeout(600)
def test_the_rig_runs_with_the_dev_only_packages_out_of_reach(tmp_path: Path) -> None:
    blocked = _dev_only_modules()
    assert {"pytest", "selenium", "PIL", "hypothesis", "jsonschema"} <= blocked

    def run(program: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", _DEV_ONLY_AWAY + program, ",".join(blocked), *args]
        return subprocess.run(
            command, capture_output=True, text=True, cwd=tmp_path, timeout=540, check=False
        )

    def rig(*args: str) -> subprocess.CompletedProcess[str]:
        return run(_RIG, *args)

    # the blocker works: a dev-only module cannot be imported through it
    assert "dev-only, not on a station" in run("import pytest\n").stderr
    assert rig("--help").returncode == 0
    # the agent, the dashboard, the job queue and the board driver import without them too
    fleet = ", ".join(f"rig.interface.fleet.{m}" for m in ("agent", "dashboard", "dispatch"))
    station = f"import {fleet}, rig.power.relay\n"
    imported = run(station)
    assert imported.returncode == 0, imported.stderr
    demo = rig("demo", "--in-process", "--cycles", "2", "--quiet", "--out", str(tmp_path / "d"))
    assert demo.returncode == 0, demo.stderr
    store = str(tmp_path / "d" / "demo.sqlite")
    report = rig("report", store, "--out", str(tmp_path / "r"))
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r" / "report.html").exists()
    status = rig("status", store)
    assert status.returncode in (0, 1) and "campaign" in status.stdout, status.stderr
