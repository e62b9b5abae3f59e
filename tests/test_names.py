"""One meaning per name: no class name is defined twice in the package (rig/, reports/), so a
name read anywhere in the tree points at one definition, and "window" names only the window of
vulnerability (docs/architecture.md, "The layers")."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rig", "reports")


def class_definitions(root: Path) -> dict[str, list[str]]:
    """Class name -> where it is defined ("path:line"), over every module of the packages."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef):
                    found[node.name].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def twice(found: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: where for name, where in found.items() if len(where) > 1}


def test_no_class_name_is_defined_twice() -> None:
    assert twice(class_definitions(ROOT)) == {}


def test_a_planted_second_definition_fails(tmp_path: Path) -> None:
    for package, module in (("rig", "a"), ("reports", "b")):
        (tmp_path / package).mkdir()
        (tmp_path / package / f"{module}.py").write_text("class Cycle:\n    pass\n")
    assert twice(class_definitions(tmp_path)) == {"Cycle": ["rig/a.py:1", "reports/b.py:1"]}


def test_window_names_only_the_window_of_vulnerability() -> None:
    """A class or function named for a window lives in rig/window/ or is about its fit."""
    outside = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("rig/window/") or "window" in path.name:
                continue
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
                if isinstance(node, kinds) and "window" in node.name.lower():
                    outside.append(f"{rel}:{node.lineno} {node.name}")
    assert outside == []
