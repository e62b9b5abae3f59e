"""The layout rules of rig/ and reports/, read from the source with `ast` (nothing is run):

- SQL lives only in the stores (checked in rig/ and reports/): the rig/store/ package for the
  station's SQLite, rig/interface/fleet/central/ and rig/interface/fleet/migrations.py for the
  fleet's PostgreSQL;
- no module reaches into another rig or reports module's underscore names;
- every file under 500 lines, every function under 80;
- the same limits on fixtures/, and every C function (firmware/, rig/native/, fixtures/)
  under 120 lines, measured by lizard.

Each check has an allow-list of today's known violators, emptied as the splits that fix them merge.
A violation not on its list fails the check; an entry that no longer matches anything fails
`test_allow_lists_hold_only_live_entries`, so the lists only shrink.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import lizard
import pytest

ROOT = Path(__file__).resolve().parent.parent
RIG = ROOT / "rig"

FIRST_PARTY = ("rig", "reports")  # packages whose modules keep their underscore names
MAX_FILE_LINES = 500  # a file must be shorter than this
MAX_FUNCTION_LINES = 80  # a function (def line to last line) must be shorter than this

SQL_STORES = ("rig/store/", "rig/interface/fleet/central/", "rig/interface/fleet/migrations.py")
SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|WITH|PRAGMA)\s")
SQL_CALLS = frozenset({"execute", "executemany", "executescript"})

# Underscore attributes that are public API of the standard library, not a module's private name.
PUBLIC_UNDERSCORE = {
    "_replace": "namedtuple's public copy-with-changes",
    "_asdict": "namedtuple's public conversion to a dict",
    "_fields": "namedtuple's public field names",
    "_make": "namedtuple's public constructor from an iterable",
    "_exit": "os._exit, the documented exit without cleanup (after fork)",
}

# Known violators today (entries go as the splits that fix them land). Keys are
# "file:function: what", with " #n" for the n-th of the same in one function, so a key holds
# across edits elsewhere in the file and one more of the same is still new.
SQL_ALLOWED: dict[str, str] = {}
PRIVATE_ALLOWED: dict[str, str] = {}
FILE_LENGTH_ALLOWED: dict[str, str] = {}
FUNCTION_LENGTH_ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class Violation:
    key: str  # stable across edits elsewhere in the file: file:function: what
    where: str  # file:line, for the message
    detail: str = ""  # said in the message, not part of the key

    def __str__(self) -> str:
        said = self.key.split(":", 1)[1].strip() if ":" in self.key else ""
        return f"{self.where}: {said}{self.detail}  [key {self.key!r}]"


def numbered(found: list[Violation]) -> list[Violation]:
    """The same key again in one function becomes `key #2`, `key #3`...: one more is new."""
    seen: dict[str, int] = {}
    out = []
    for v in found:
        seen[v.key] = seen.get(v.key, 0) + 1
        n = seen[v.key]
        out.append(Violation(f"{v.key} #{n}" if n > 1 else v.key, v.where, v.detail))
    return out


def rig_files() -> list[Path]:
    return sorted(p for p in RIG.rglob("*.py") if ".venv" not in p.parts)


def reports_files() -> list[Path]:
    return sorted(p for p in (ROOT / "reports").rglob("*.py") if ".venv" not in p.parts)


def sql_checked_files() -> list[Path]:
    """rig/ and reports/: a report reads the store through its named reads too."""
    return rig_files() + reports_files()


def checked_files() -> list[Path]:
    """What the private-name and length rules cover: rig/ and reports/."""
    return rig_files() + reports_files()


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@functools.cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class Scopes(ast.NodeVisitor):
    """Walks a module keeping the qualified name of the enclosing function or class."""

    def __init__(self) -> None:
        self.stack: list[str] = []

    @property
    def scope(self) -> str:
        return ".".join(self.stack) or "<module>"

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.stack.append(node.name)
        self.enter(node)
        self.generic_visit(node)
        self.stack.pop()

    def enter(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        """Called for each function or class as the walk enters it."""

    visit_FunctionDef = _scoped
    visit_AsyncFunctionDef = _scoped
    visit_ClassDef = _scoped


# -- (a) SQL only in the stores --------------------------------------------------------------


class SqlFinder(Scopes):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.found: list[Violation] = []

    def add(self, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.found.append(Violation(f"{self.path}:{self.scope}: {what}", f"{self.path}:{line}"))

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and (match := SQL_START.match(node.value)):
            self.add(node, f"SQL {match.group(1)}")

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            self.add(node, f".{node.func.attr}(")
        self.generic_visit(node)


def in_sql_store(path: str) -> bool:
    return any(path == s or (s.endswith("/") and path.startswith(s)) for s in SQL_STORES)


@functools.cache
def sql_violations() -> list[Violation]:
    found: list[Violation] = []
    for path in sql_checked_files():
        name = rel(path)
        if in_sql_store(name):
            continue
        finder = SqlFinder(name)
        finder.visit(parse(path))
        found += numbered(finder.found)
    return found


# -- (b) no reaching into another module's underscore names ----------------------------------


def rig_module(dotted: str) -> bool:
    """`dotted` names a module (or package) of rig/ or reports/."""
    if dotted.split(".")[0] not in FIRST_PARTY:
        return False
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def absolute(module: str | None, level: int, path: Path) -> str:
    """The absolute module name of an import's `from` part (relative imports resolved)."""
    if not level:
        return module or ""
    package = list(path.relative_to(ROOT).with_suffix("").parts)
    package = package[: len(package) - level]
    return ".".join(package + ([module] if module else []))


def defined_names(tree: ast.Module) -> set[str]:
    """Every name a module defines itself: functions, classes, assigned names and attributes
    (`self._x = ...`), so an underscore access to one of them is the module's own business."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class PrivateFinder(Scopes):
    def __init__(self, path: Path, tree: ast.Module) -> None:
        super().__init__()
        self.path = path
        self.name = rel(path)
        self.own = defined_names(tree)
        self.rig_modules: dict[str, str] = {}  # local name -> rig module it is bound to
        self.rig_objects: dict[str, str] = {}  # local name -> rig module it was imported from
        self.foreign: set[str] = set()  # local names bound to modules or objects outside rig
        self.found: list[Violation] = []

    def add(self, node: ast.AST, what: str, detail: str = "") -> None:
        line = getattr(node, "lineno", 0)
        key = f"{self.name}:{self.scope}: {what}"
        self.found.append(Violation(key, f"{self.name}:{line}", detail))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                target = self.rig_modules if rig_module(alias.name) else None
                if target is not None:
                    target[alias.asname] = alias.name
                else:
                    self.foreign.add(alias.asname)
            else:
                top = alias.name.split(".")[0]
                if top in FIRST_PARTY:
                    self.rig_modules.setdefault(top, top)
                else:
                    self.foreign.add(top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = absolute(node.module, node.level, self.path)
        for alias in node.names:
            local = alias.asname or alias.name
            if not rig_module(module):
                self.foreign.add(local)
                continue
            if is_private(alias.name):
                self.add(node, f"from {module} import {alias.name}")
            if rig_module(f"{module}.{alias.name}"):
                self.rig_modules[local] = f"{module}.{alias.name}"
            else:
                self.rig_objects[local] = module

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.generic_visit(node)
        if not is_private(node.attr):
            return
        base = dotted_name(node.value)
        if base is not None:
            head = base.split(".")[0]
            if head in self.rig_modules:
                module = self.rig_modules[head] + base[len(head) :]
                if rig_module(module) and module != self.module_name:
                    self.add(node, f"{base}.{node.attr}", f" (a private name of {module})")
                    return
            if head in self.rig_objects and "." not in base:
                self.add(node, f"{base}.{node.attr}", f" ({base} is {self.rig_objects[head]}'s)")
                return
            if base in ("self", "cls") or head in self.foreign:
                return
        if isinstance(node.value, ast.Call) and dotted_name(node.value.func) == "super":
            return
        if node.attr in self.own or node.attr in PUBLIC_UNDERSCORE:
            return
        self.add(node, f".{node.attr}", " (a name this module does not define)")

    @property
    def module_name(self) -> str:
        parts = list(self.path.relative_to(ROOT).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def private_violations() -> list[Violation]:
    found: list[Violation] = []
    for path in checked_files():
        tree = parse(path)
        finder = PrivateFinder(path, tree)
        finder.visit(tree)
        found += numbered(finder.found)
    return found


# -- (c) file and function length -------------------------------------------------------------


@functools.cache
def file_length_violations() -> list[Violation]:
    found = []
    for path in checked_files():
        lines = len(path.read_text().splitlines())
        if lines >= MAX_FILE_LINES:
            where = f"{rel(path)}:{MAX_FILE_LINES}"  # the first line past the limit
            found.append(Violation(rel(path), where, f"the file has {lines} lines"))
    return found


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function and method, nested ones included."""

    def walk(
        node: ast.AST, prefix: str
    ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield prefix + child.name, child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


@functools.cache
def function_length_violations() -> list[Violation]:
    found = []
    for path in checked_files():
        for name, node in functions(parse(path)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines >= MAX_FUNCTION_LINES:
                where = f"{rel(path)}:{node.lineno}"
                found.append(Violation(f"{rel(path)}:{name}", where, f": {lines} lines"))
    return found


# -- (d) the same limits on fixtures/ and the C code -------------------------------------------

FIXTURES = ROOT / "fixtures"
MAX_C_FUNCTION_LINES = 120  # a C function (name line to closing brace) must be shorter
SKIPPED_PARTS = {".venv", ".git", "build"}

FIXTURE_FILE_LENGTH_ALLOWED: dict[str, str] = {}
FIXTURE_FUNCTION_LENGTH_ALLOWED: dict[str, str] = {}
C_FUNCTION_LENGTH_ALLOWED: dict[str, str] = {}


def fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.py") if not SKIPPED_PARTS & set(p.parts))


def c_files() -> list[Path]:
    found = (p for pattern in ("*.c", "*.h") for p in ROOT.rglob(pattern))
    return sorted(p for p in found if not SKIPPED_PARTS & set(p.relative_to(ROOT).parts))


@functools.cache
def fixture_file_length_violations() -> list[Violation]:
    found = []
    for path in fixture_files():
        lines = len(path.read_text().splitlines())
        if lines >= MAX_FILE_LINES:
            where = f"{rel(path)}:{MAX_FILE_LINES}"
            found.append(Violation(rel(path), where, f"the file has {lines} lines"))
    return found


@functools.cache
def fixture_function_length_violations() -> list[Violation]:
    found = []
    for path in fixture_files():
        for name, node in functions(parse(path)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines >= MAX_FUNCTION_LINES:
                where = f"{rel(path)}:{node.lineno}"
                found.append(Violation(f"{rel(path)}:{name}", where, f": {lines} lines"))
    return found


def long_c_functions(name: str, source: str) -> list[Violation]:
    """C functions of `source` (a file called `name`) of MAX_C_FUNCTION_LINES or more."""
    found = []
    for function in lizard.analyze_file.analyze_source_code(name, source).function_list:
        if function.length >= MAX_C_FUNCTION_LINES:
            where = f"{name}:{function.start_line}"
            key = f"{name}:{function.name}"
            found.append(Violation(key, where, f": {function.length} lines"))
    return found


@functools.cache
def c_function_length_violations() -> list[Violation]:
    return [v for path in c_files() for v in long_c_functions(rel(path), path.read_text())]


# -- the checks --------------------------------------------------------------------------------


CHECKS: dict[str, tuple[Callable[[], list[Violation]], dict[str, str], str]] = {
    "sql only in the stores": (
        sql_violations,
        SQL_ALLOWED,
        "SQL outside the stores (move it into a Store method)",
    ),
    "no reaching into private names": (
        private_violations,
        PRIVATE_ALLOWED,
        "underscore names used from outside their module",
    ),
    "files under 500 lines": (
        file_length_violations,
        FILE_LENGTH_ALLOWED,
        f"files of {MAX_FILE_LINES} lines or more",
    ),
    "functions under 80 lines": (
        function_length_violations,
        FUNCTION_LENGTH_ALLOWED,
        f"functions of {MAX_FUNCTION_LINES} lines or more",
    ),
    "fixtures: files under 500 lines": (
        fixture_file_length_violations,
        FIXTURE_FILE_LENGTH_ALLOWED,
        f"fixture files of {MAX_FILE_LINES} lines or more",
    ),
    "fixtures: functions under 80 lines": (
        fixture_function_length_violations,
        FIXTURE_FUNCTION_LENGTH_ALLOWED,
        f"fixture functions of {MAX_FUNCTION_LINES} lines or more",
    ),
    "C functions under 120 lines": (
        c_function_length_violations,
        C_FUNCTION_LENGTH_ALLOWED,
        f"C functions of {MAX_C_FUNCTION_LINES} lines or more",
    ),
}


@pytest.mark.parametrize("check", CHECKS)
def test_no_new_violation(check: str) -> None:
    find, allowed, what = CHECKS[check]
    found = sorted(str(v) for v in find() if v.key not in allowed)
    assert not found, f"{what}:\n" + "\n".join(found)


def test_allow_lists_hold_only_live_entries() -> None:
    """An entry whose violation is gone is removed, so a list never hides a new one."""
    stale = [
        f"{name}: {key!r}"
        for name, (find, allowed, _) in CHECKS.items()
        for key in allowed.keys() - {v.key for v in find()}
    ]
    assert not stale, "allow-list entries that match nothing any more (remove them):\n" + "\n".join(
        sorted(stale)
    )


# -- the checks themselves catch what they are for ---------------------------------------------

PROBE = (
    ROOT / "rig" / "interface" / "fleet" / "probe.py"
)  # never written: the finders read the tree given


def probe_private(source: str) -> list[str]:
    tree = ast.parse(textwrap.dedent(source))
    finder = PrivateFinder(PROBE, tree)
    finder.visit(tree)
    return [str(v) for v in numbered(finder.found)]


def test_sql_finder_names_file_and_line() -> None:
    finder = SqlFinder("rig/probe.py")
    finder.visit(ast.parse('x = 1\ndef f(db):\n    db.execute("UPDATE t SET a = 1")\n'))
    assert [str(v) for v in finder.found] == [
        "rig/probe.py:3: f: .execute(  [key 'rig/probe.py:f: .execute(']",
        "rig/probe.py:3: f: SQL UPDATE  [key 'rig/probe.py:f: SQL UPDATE']",
    ]
    quiet = SqlFinder("rig/probe.py")
    quiet.visit(ast.parse('"""With a docstring."""\nmessage = "select a drive"\n'))
    assert quiet.found == []
    assert in_sql_store("rig/store/recording.py") and in_sql_store(
        "rig/interface/fleet/central/reads.py"
    )
    assert not in_sql_store("rig/storage.py") and not in_sql_store("rig/interface/fleet/views.py")


def test_private_and_length_checks_read_reports_too() -> None:
    checked = {rel(p) for p in checked_files()}
    assert "reports/render/html.py" in checked and "rig/interface/cli.py" in checked
    assert rig_module("reports.render.cells") and not rig_module("reports.nothing_here")


def test_sql_check_reads_reports_too() -> None:
    checked = {rel(p) for p in sql_checked_files()}
    assert "reports/load/dataset.py" in checked and "reports/load/summary.py" in checked
    assert not any(in_sql_store(name) for name in checked if name.startswith("reports/"))


def test_private_finder_catches_each_kind_of_reach() -> None:
    found = probe_private(
        """
        import rig.store
        from rig import store as st
        from rig.store import Store, _connect
        from rig.interface.fleet.central import replication

        def f(run):
            _connect()
            st._migrate()
            rig.store._migrate()
            Store._open()
            replication._helper
            run._stop_drive()
        """
    )
    assert [line.split("  [key")[0] for line in found] == [
        "rig/interface/fleet/probe.py:4: <module>: from rig.store import _connect",
        "rig/interface/fleet/probe.py:9: f: st._migrate (a private name of rig.store)",
        "rig/interface/fleet/probe.py:10: f: rig.store._migrate (a private name of rig.store)",
        "rig/interface/fleet/probe.py:11: f: Store._open (Store is rig.store's)",
        "rig/interface/fleet/probe.py:12: f: replication._helper (a private name of"
        " rig.interface.fleet.central.replication)",
        "rig/interface/fleet/probe.py:13: f: ._stop_drive (a name this module does not define)",
    ]


def test_private_finder_leaves_a_modules_own_names_alone() -> None:
    assert (
        probe_private(
            """
            import os
            from collections import namedtuple

            class Ledger:
                def _grow(self): ...

                @classmethod
                def build(cls, other):
                    self_made = cls()
                    self_made._grow()
                    other._grow()
                    cls._grow(self_made)
                    return super()._x, os._exit, namedtuple("P", "a")(1)._replace(a=2)
            """
        )
        == []
    )


def test_length_checks_count_from_the_def_line() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(78))
    at_limit = ast.parse(f"def f():\n{body}\n    return 1\n")  # 80 lines
    below = ast.parse(f"def f():\n{body}\n")  # 79 lines
    [(name, node)] = list(functions(at_limit))
    assert name == "f" and (node.end_lineno or 0) - node.lineno + 1 == MAX_FUNCTION_LINES
    [(_, short)] = list(functions(below))
    assert (short.end_lineno or 0) - short.lineno + 1 == MAX_FUNCTION_LINES - 1
    nested = ast.parse("class A:\n    def m(self):\n        def inner(): ...\n")
    assert [n for n, _ in functions(nested)] == ["A.m", "A.m.inner"]


def test_c_length_counts_from_the_name_line_to_the_brace() -> None:
    body = "\n".join(f"\tx += {i};" for i in range(MAX_C_FUNCTION_LINES - 3))
    at_limit = f"static int\nf(int x)\n{{\n{body}\n}}\n"  # name line to brace: 120 lines
    below = at_limit.replace("\tx += 0;\n", "")
    [violation] = long_c_functions("probe.c", at_limit)
    assert (violation.key, violation.where) == ("probe.c:f", "probe.c:2")
    assert long_c_functions("probe.c", below) == []
    assert [str(p.relative_to(ROOT)) for p in c_files() if p.name == "sched.c"] == [
        "firmware/core/sched.c"
    ]
    assert FIXTURES / "faultcore.py" in fixture_files()
