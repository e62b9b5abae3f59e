"""The readers behind tests/test_structure.py: which files each rule reads, and the `ast` (and
lizard, for C) walks that find a rule's violations. Nothing here runs the code it reads.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import lizard

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

MAX_C_FUNCTION_LINES = 120  # a C function (name line to closing brace) must be shorter
SKIPPED_PARTS = {".venv", ".git", "build"}


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


# -- the files each rule reads ----------------------------------------------------------------


def rig_files() -> list[Path]:
    return sorted(p for p in RIG.rglob("*.py") if ".venv" not in p.parts)


def reports_files() -> list[Path]:
    return sorted(p for p in (ROOT / "reports").rglob("*.py") if ".venv" not in p.parts)


def sql_checked_files() -> list[Path]:
    """rig/ and reports/: a report reads the store through its named reads too."""
    return rig_files() + reports_files()


def checked_files() -> list[Path]:
    """What the private-name rule covers: rig/ and reports/ (the length rules read every Python
    file, `python_files`)."""
    return rig_files() + reports_files()


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def python_files() -> list[Path]:
    """Every Python file of the repository: those git tracks, and new ones it does not ignore
    (so a file is checked before it is added). Without git (an exported tree), every *.py."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.py"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        found = ROOT.rglob("*.py")
    else:
        found = (ROOT / name for name in listed.decode().split("\0") if name)
    return sorted(
        {p for p in found if p.is_file() and not SKIPPED_PARTS & set(p.relative_to(ROOT).parts)}
    )


def c_files() -> list[Path]:
    found = (p for pattern in ("*.c", "*.h") for p in ROOT.rglob(pattern))
    return sorted(p for p in found if not SKIPPED_PARTS & set(p.relative_to(ROOT).parts))


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


# -- (c) file and function length -------------------------------------------------------------


def long_file(path: Path) -> list[Violation]:
    """The file, if it has MAX_FILE_LINES lines or more."""
    lines = len(path.read_text().splitlines())
    if lines < MAX_FILE_LINES:
        return []
    where = f"{rel(path)}:{MAX_FILE_LINES}"  # the first line past the limit
    return [Violation(rel(path), where, f"the file has {lines} lines")]


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


def long_functions(path: Path) -> list[Violation]:
    """The file's functions (methods, nested ones) of MAX_FUNCTION_LINES lines or more."""
    found = []
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
