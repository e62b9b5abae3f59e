"""The layout rules of the repository, read from the source with `ast` (nothing is run; the
readers are in tests/structure_rules.py):

- SQL lives only in the stores (checked in rig/ and reports/): the rig/store/ package for the
  station's SQLite, rig/interface/fleet/central/ and rig/interface/fleet/migrations.py for the
  fleet's PostgreSQL;
- no module reaches into another rig or reports module's underscore names;
- every Python file of the repository (rig/, reports/, fixtures/, tests/, bench/,
  hardware/tools/, ...: whatever git tracks) under 500 lines, every function under 80;
- every C function (firmware/, rig/native/, fixtures/) under 120 lines, measured by lizard.

Each check has an allow-list of today's known violators, emptied as the splits that fix them merge.
A violation not on its list fails the check; an entry that no longer matches anything fails
`test_allow_lists_hold_only_live_entries`, so the lists only shrink.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections.abc import Callable

import pytest

from tests.structure_rules import (
    MAX_C_FUNCTION_LINES,
    MAX_FILE_LINES,
    MAX_FUNCTION_LINES,
    ROOT,
    PrivateFinder,
    SqlFinder,
    Violation,
    c_files,
    checked_files,
    functions,
    in_sql_store,
    long_c_functions,
    long_file,
    long_functions,
    numbered,
    parse,
    python_files,
    rel,
    rig_module,
    sql_checked_files,
)

# Known violators today (entries go as the splits that fix them land). Keys are
# "file:function: what", with " #n" for the n-th of the same in one function, so a key holds
# across edits elsewhere in the file and one more of the same is still new.
SQL_ALLOWED: dict[str, str] = {}
PRIVATE_ALLOWED: dict[str, str] = {}
FILE_LENGTH_ALLOWED: dict[str, str] = {}
FUNCTION_LENGTH_ALLOWED: dict[str, str] = {}
C_FUNCTION_LENGTH_ALLOWED: dict[str, str] = {}


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


@functools.cache
def private_violations() -> list[Violation]:
    found: list[Violation] = []
    for path in checked_files():
        tree = parse(path)
        finder = PrivateFinder(path, tree)
        finder.visit(tree)
        found += numbered(finder.found)
    return found


@functools.cache
def file_length_violations() -> list[Violation]:
    return [v for path in python_files() for v in long_file(path)]


@functools.cache
def function_length_violations() -> list[Violation]:
    return [v for path in python_files() for v in long_functions(path)]


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
    assert checked <= {rel(p) for p in python_files()}


def test_length_checks_read_every_python_file() -> None:
    """Every folder with Python in it, the tests and this file included; nothing installed."""
    read = {rel(p) for p in python_files()}
    for name in (
        "rig/interface/cli.py",
        "reports/render/html.py",
        "fixtures/faultcore.py",
        "tests/test_structure.py",
        "tests/fleet/test_replication.py",
        "bench/fleet_replication.py",
        "hardware/tools/gen_schematic.py",
        "hardware/tools/schgen/build.py",
    ):
        assert name in read, name
    assert not [name for name in read if ".venv" in name.split("/")]


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
    assert ROOT / "fixtures" / "faultcore.py" in python_files()
