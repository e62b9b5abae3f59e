"""tests/heavy.txt names tests that exist: an entry whose file or function is gone (renamed,
moved) would silently put a slow test back into `make check`'s budget or hide nothing."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import HEAVY_LIST, heavy_tests

ROOT = HEAVY_LIST.parent.parent


def missing(entries: set[str], root: Path) -> list[str]:
    """Entries (file::function or file::Class::function) whose test is not defined."""
    gone = []
    for entry in sorted(entries):
        path, *names = entry.split("::")
        file = root / path
        if not file.is_file():
            gone.append(entry)
            continue
        scope: list[ast.stmt] = ast.parse(file.read_text()).body
        for name in names:
            found = [
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == name
            ]
            if not found:
                gone.append(entry)
                break
            scope = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return gone


def test_every_heavy_entry_names_a_test() -> None:
    entries = heavy_tests(HEAVY_LIST.read_text())
    assert entries, "tests/heavy.txt lists no test"
    assert missing(entries, ROOT) == []


def test_a_stale_entry_is_found(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_here():\n    pass\n")
    listed = ["# a comment", "tests/test_a.py::test_here", "tests/test_a.py::test_gone"]
    entries = heavy_tests("\n".join([*listed, "", "tests/test_b.py::test_x"]))
    assert missing(entries, tmp_path) == ["tests/test_a.py::test_gone", "tests/test_b.py::test_x"]
