"""The layer order of docs/architecture.md ("The layers"), read from the source with `ast`:

- every import of rig/ and reports/ points down the order in `LAYERS` (or stays in its layer);
- no two files import each other in a circle at run time (a function's own import counts: it runs
  when the function does); an import under `if TYPE_CHECKING:` is only for the type checker,
  and a circle through one is allowed only where `TYPE_CYCLES` names it (with why).

Own code on `ast`, not import-linter: the rules are two graph walks over what the structure test
already parses, and a file-level cycle check that import-linter's contracts do not state
(docs/decisions.md, "The layer order is checked by our own walk over ast").
"""

from __future__ import annotations

import ast
import functools
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rig", "reports")

# Top first, as docs/architecture.md ("The layers") states it. A module may import its own layer
# or any layer below; a name is a package (all of it) or a module, the longest that matches wins.
# One name per layer: two names in one layer would be siblings free to import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("rig.interface",),  # the `rig` command, its --json documents, the demo and the fleet
    ("reports",),  # the public names rig/interface/ uses (reports/__init__.py)
    ("reports.export",),  # a report folder written from stores: the report's entry point
    ("reports.render",),  # HTML, SVG, CSV, JSON, JUnit and Markdown of the record
    ("reports.analysis",),  # from the dataset to the figures (pure, no I/O)
    ("reports.load",),  # the dataset read from SQLite stores or the fleet's PostgreSQL
    ("rig.campaign",),  # cycles, drives, campaigns, resume, the run's observer
    ("rig.config.campaign_file",),  # a campaign file read with the station kinds handed in
    ("rig.station",),  # a station and its wiring: kinds, interlocks, locks, purge, check
    ("rig.config.campaign",),  # campaign files: the sections assembled
    ("rig.config.criteria",),  # the pass criteria
    ("rig.window",),  # the window of vulnerability's keys, design and fit
    ("rig.bus",),  # a drive on the bus: presence, recovery, readiness
    ("rig.health",),  # the drive's own tools: SMART, nvme-cli, sg3_utils, OCP, maintenance
    ("rig.drive",),  # a drive's node and identity, as the bus and the health layer name it
    ("rig.power",),  # the power switch and its backends
    ("rig.store",),  # the SQLite store
    ("rig.check",),  # the checker: what a read-back block says against the ledger
    ("rig.io",),  # the data path's writer, its record format and the ledger it logs into
    ("rig.native",),  # the C kernels of io and check
    ("rig.notify",),  # notifications: the [notify] table and the sender
    ("rig.verdict",),  # a drive's verdict: the rule, its statistics, the sequential plans
    ("rig.config.station_keys",),  # what every station has in a campaign file
    ("rig.config.tables",),  # reading campaign files: the TOML, typed tables, shared helpers
    ("rig.config",),  # the package itself (a docstring)
    ("rig.errors",),
)

# Imports against the order that remain, "importer -> imported" with why; a stale entry fails.
AGAINST_ORDER_ALLOWED: dict[str, str] = {}

# Circles that pass only through type-only imports, each with why a small Protocol cannot
# break it (docs/architecture.md names them too). Keyed by the sorted modules of the circle.
TYPE_CYCLES: dict[str, str] = {}


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    imported: str  # dotted module name (the longest module of rig/ or reports/ it names)
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for top in PACKAGES
        for p in sorted((ROOT / top).rglob("*.py"))
        if ".venv" not in p.parts
    }


def resolve(dotted: str, known: dict[str, Path] | set[str]) -> str | None:
    """The longest module of `known` that `dotted` names (a name inside a module is that
    module; a package's name is its __init__)."""
    parts = dotted.split(".")
    while parts:
        if (name := ".".join(parts)) in known:
            return name
        parts.pop()
    return None


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement reaches (a `from` import: each `module.name`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names] or [base]


def imports_of(
    module: str, tree: ast.Module, known: dict[str, Path] | set[str], is_package: bool
) -> Iterator[Import]:
    """Every import of a module of `known`, at any depth, marked type-only under TYPE_CHECKING."""

    def walk(node: ast.AST, type_only: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and is_type_checking(child):
                for stmt in child.body:
                    yield from walk_one(stmt, True)
                for stmt in child.orelse:
                    yield from walk_one(stmt, type_only)
            else:
                yield from walk_one(child, type_only)

    def walk_one(node: ast.AST, type_only: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for name in imported_names(node, module, is_package):
                target = resolve(name, known)
                if target is None and isinstance(node, ast.ImportFrom):
                    target = resolve(name.rsplit(".", 1)[0], known)
                if target is not None and target != module:
                    yield Import(module, target, node.lineno, type_only)
        else:
            yield from walk(node, type_only)

    yield from walk(tree, False)


@functools.cache
def all_imports() -> tuple[Import, ...]:
    found: list[Import] = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found += imports_of(name, tree, modules(), path.name == "__init__.py")
    return tuple(found)


def layer_of(module: str) -> int | None:
    """Index of the module's layer in LAYERS (0 is the top), by the longest name that matches."""
    best: tuple[int, int] | None = None  # (length of the matching name, layer)
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (
                best is None or len(name) > best[0]
            ):
                best = (len(name), index)
    return None if best is None else best[1]


def against_order(imports: tuple[Import, ...] | list[Import]) -> dict[str, Import]:
    """Imports from a lower layer up to a higher one, keyed 'importer -> imported'."""
    found = {}
    for imp in imports:
        low, high = layer_of(imp.importer), layer_of(imp.imported)
        if low is not None and high is not None and high < low:
            found[f"{imp.importer} -> {imp.imported}"] = imp
    return found


def cycles(edges: list[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while (member := stack.pop()) != node:
                        on_stack.discard(member)
                        group.append(member)
                    on_stack.discard(node)
                    if group:
                        groups.append(sorted([node, *group]))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def run_time_cycles(imports: tuple[Import, ...] | list[Import]) -> list[list[str]]:
    return cycles([(i.importer, i.imported) for i in imports if not i.type_only])


def type_cycles(imports: tuple[Import, ...] | list[Import]) -> list[list[str]]:
    return cycles([(i.importer, i.imported) for i in imports])


# -- the checks --------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    """(rig/__init__.py, the version string, imports nothing and stands above nothing.)"""
    assert sorted(m for m in modules() if layer_of(m) is None and m != "rig") == []


def test_no_import_against_the_layer_order() -> None:
    found = against_order(all_imports())
    new = [f"{imp.importer}:{imp.line}: {key}" for key, imp in found.items()]
    new = sorted(n for n, key in zip(new, found, strict=True) if key not in AGAINST_ORDER_ALLOWED)
    assert not new, "imports against the layer order (docs/architecture.md):\n" + "\n".join(new)
    stale = sorted(AGAINST_ORDER_ALLOWED.keys() - found.keys())
    assert not stale, "allowed imports that are gone (remove them):\n" + "\n".join(stale)


def test_config_imports_only_errors() -> None:
    """Each package reads its own campaign-file section; rig/config/tables.py, the reading of
    the file and the shared table helpers, stands on rig.errors alone (docs/decisions.md, "Each
    package reads its own section")."""
    imported = {imp.imported for imp in all_imports() if imp.importer == "rig.config.tables"}
    assert imported == {"rig.errors"}


def test_no_import_cycle_at_run_time() -> None:
    assert run_time_cycles(all_imports()) == []


def test_type_only_cycles_are_the_named_ones() -> None:
    found = {" ".join(group) for group in type_cycles(all_imports())}
    assert found == TYPE_CYCLES.keys()


# -- the checks catch what they are for ---------------------------------------------------------


def probe(files: dict[str, str]) -> list[Import]:
    """The imports of planted modules (dotted name -> source), resolved against the real tree
    and each other; nothing is written."""
    known = set(modules()) | set(files)
    found: list[Import] = []
    for name, source in files.items():
        tree = ast.parse(textwrap.dedent(source))
        found += imports_of(name, tree, known, is_package=False)
    return found


def test_a_planted_upward_import_fails() -> None:
    planted = probe({"rig.bus.probe": "from rig.campaign import runner\nfrom rig import errors\n"})
    assert list(against_order(planted)) == ["rig.bus.probe -> rig.campaign.runner"]
    # rig's library reaching up into reports is against the order too
    planted = probe({"rig.store.probe": "def f():\n    from reports.load import dataset\n"})
    assert list(against_order(planted)) == ["rig.store.probe -> reports.load.dataset"]


def test_each_layer_is_one_name() -> None:
    """Two names in one layer would be siblings free to import each other both ways."""
    assert [names for names in LAYERS if len(names) != 1] == []


def reaches_into_reports(imports: tuple[Import, ...] | list[Import]) -> list[str]:
    """Imports of rig/ that name a module of reports/ rather than the package's public names."""
    return sorted(
        f"{imp.importer}:{imp.line}: {imp.imported}"
        for imp in imports
        if imp.importer.startswith("rig.") and imp.imported.startswith("reports.")
    )


def test_rig_reaches_reports_only_through_its_public_names() -> None:
    assert reaches_into_reports(all_imports()) == []
    import reports

    for name in reports.__all__:  # each a function, class or constant, none a module
        assert not isinstance(getattr(reports, name), types.ModuleType), name


def test_a_planted_reach_into_reports_fails() -> None:
    planted = probe({"rig.interface.probe": "from reports.load.dataset import Dataset\n"})
    assert reaches_into_reports(planted) == ["rig.interface.probe:1: reports.load.dataset"]


def test_a_planted_cycle_fails_and_a_type_only_one_is_told_apart() -> None:
    planted = probe(
        {
            "rig.io.probe_a": "from rig.io import probe_b, probe_c\n",
            "rig.io.probe_b": "def f():\n    from rig.io.probe_a import x\n",
            "rig.io.probe_c": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from rig.io.probe_a import y\n",
        }
    )
    assert run_time_cycles(planted) == [["rig.io.probe_a", "rig.io.probe_b"]]
    assert type_cycles(planted) == [["rig.io.probe_a", "rig.io.probe_b", "rig.io.probe_c"]]


def test_relative_and_package_imports_resolve() -> None:
    [imp] = probe({"rig.campaign.cutcycle.probe": "from .. import drive\n"})
    assert imp.imported == "rig.campaign.drive"
    [imp] = probe({"rig.interface.fleet.probe": "import rig.store\n"})
    assert imp.imported == "rig.store" and layer_of("rig.store.reads") == layer_of("rig.store")
    assert layer_of("rig.campaign.runner") == LAYERS.index(("rig.campaign",))
