"""The documents point only into the repository, and at files that are there (pure file reading):

- every link of README.md and docs/*.md (`[text](target)`, `![alt](target)`, `[name]: target`,
  `href=`/`src=`) that is not a URL or an anchor names a file or folder inside the repository:
  never an absolute path, never one that climbs out of it (`../shared/...`);
- every backticked path that looks like a repository file (`rig/...py`, `docs/...md`, ...; in
  inline code or a fenced block) exists;
- the table of docs/architecture.md, "The layers", lists the layers of tests/test_layers.py's
  `LAYERS`, in that order;
- every citation of the design, docs/architecture.md followed by a quoted heading (in code,
  comments, tests, benches and docs), names a heading the page has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.test_layers import LAYERS

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "architecture.md"

TOP = "rig|reports|tests|fixtures|bench|firmware|hardware|docs"
EXTENSIONS = "py|c|h|md|toml|json|html|j2|yaml|sh|csv|lock|png|svg|pdf"
REPO_PATH = re.compile(rf"(?<![\w/.-])((?:{TOP})/[\w/.-]*[\w-]\.(?:{EXTENSIONS}))(?![\w.-])")
FENCE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINKS = (
    re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^)]*)?\)"),
    re.compile(r"^[ \t]{0,3}\[[^\]]+\]:[ \t]*<?(\S+?)>?(?:[ \t].*)?$", re.M),
    re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']"""),
)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CLIMBS_OUT = re.compile(r"(?<![\w/.-])((?:\.\./)+[\w./-]+)")
# docs/architecture.md, "Heading" (or ("Heading")), the heading possibly wrapped onto a comment line
CITATION = re.compile(
    r'docs/([\w-]+)\.md(?:,\s*|\s+\(?|\()"((?:[^"\n]|\n[ \t]*(?:#|\*|//)?[ \t]*)+?)"'
)
CITING = ("rig", "reports", "tests", "bench", "fixtures", "firmware", "hardware", "docs")
CITING_SUFFIXES = {".py", ".md", ".c", ".h", ".j2", ".toml"}
SELF = (DESIGN, Path(__file__).resolve())  # the page's own prose, and this file's examples


@dataclass(frozen=True)
class Problem:
    doc: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.what}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def name_of(doc: Path) -> str:
    return str(doc.relative_to(ROOT)) if doc.is_relative_to(ROOT) else str(doc)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def code_spans(text: str) -> list[tuple[int, str]]:
    """(offset, content) of every fenced block and every inline code span outside them."""
    spans = [(m.start(2), m.group(2)) for m in FENCE.finditer(text)]
    rest = FENCE.sub(lambda m: " " * len(m.group(0)), text)  # offsets kept
    return spans + [(m.start(2), m.group(2)) for m in INLINE_CODE.finditer(rest)]


def without_code(text: str) -> str:
    """The text with code blanked (same offsets), so a `[x](y)` inside code is no link."""
    for offset, content in code_spans(text):
        text = text[:offset] + " " * len(content) + text[offset + len(content) :]
    return text


def link_problems(doc: Path, text: str, root: Path = ROOT) -> list[Problem]:
    found = []
    prose = without_code(text)
    for pattern in LINKS:
        for m in pattern.finditer(prose):
            target = m.group(1)
            if SCHEME.match(target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0].split("?", 1)[0]
            where = line_of(text, m.start(1))
            if path.startswith("/"):
                found.append(Problem(name_of(doc), where, f"link to an absolute path: {target}"))
                continue
            resolved = (doc.parent / path).resolve()
            if not resolved.is_relative_to(root):
                found.append(Problem(name_of(doc), where, f"link outside the repository: {target}"))
            elif not resolved.exists():
                found.append(Problem(name_of(doc), where, f"link to a missing file: {target}"))
    return found


def path_problems(doc: Path, text: str, root: Path = ROOT) -> list[Problem]:
    found = []
    for offset, content in code_spans(text):
        for m in REPO_PATH.finditer(content):
            if not (root / m.group(1)).exists():
                where = line_of(text, offset + m.start(1))
                found.append(Problem(name_of(doc), where, f"no such file: {m.group(1)}"))
        for m in CLIMBS_OUT.finditer(content):
            if not (doc.parent / m.group(1)).resolve().is_relative_to(root):
                where = line_of(text, offset + m.start(1))
                what = f"a path outside the repository: {m.group(1)}"
                found.append(Problem(name_of(doc), where, what))
    return found


def headings(text: str) -> set[str]:
    return {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}


def citations(text: str) -> list[tuple[int, str, str]]:
    """(line, doc, heading) of every citation of a docs/ page by heading in `text`."""
    return [
        (
            line_of(text, m.start()),
            m.group(1),
            re.sub(r"\s*\n[ \t]*(?:#|\*|//)?[ \t]*", " ", m.group(2)).strip(),
        )
        for m in CITATION.finditer(text)
    ]


def names_a_heading(cited: str, known: set[str]) -> bool:
    """A heading is cited by its name: the whole heading, or the part before its detail (a
    parenthesis or a colon: "Exposure" names "Exposure: which classes a cut was a trial of")."""
    return any(h == cited or h.startswith((cited + " (", cited + ":")) for h in known)


def citing_files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    for top in CITING:
        found += [
            p
            for p in sorted((ROOT / top).rglob("*"))
            if p.suffix in CITING_SUFFIXES and ".venv" not in p.parts and p not in SELF
        ]
    return [p for p in found if p.is_file()]


def layer_table(text: str) -> list[str]:
    """The first column of the table under "## The layers" (backticks stripped)."""
    section = text.split("\n## The layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [row.split("|")[1].strip().strip("`") for row in rows]


# -- the checks --------------------------------------------------------------------------------


def test_links_stay_inside_the_repository_and_resolve() -> None:
    found = [str(p) for doc in documents() for p in link_problems(doc, doc.read_text())]
    assert not found, "links that do not resolve inside the repository:\n" + "\n".join(found)


def test_backticked_repository_paths_exist() -> None:
    found = [str(p) for doc in documents() for p in path_problems(doc, doc.read_text())]
    assert not found, "backticked paths that are not in the tree:\n" + "\n".join(found)


def test_the_architecture_lists_the_layers_in_order() -> None:
    assert layer_table(DESIGN.read_text()) == [names[0] for names in LAYERS]


def test_citations_of_the_docs_name_their_headings() -> None:
    """docs/architecture.md, "Heading" (and any docs/ page cited so) names a heading it has."""
    known = {p.stem: headings(p.read_text()) for p in (ROOT / "docs").glob("*.md")}
    found = [
        f"{name_of(path)}:{line}: docs/{doc}.md has no heading {heading!r}"
        for path in citing_files()
        for line, doc, heading in citations(path.read_text(errors="replace"))
        if not names_a_heading(heading, known.get(doc, set()))
    ]
    assert not found, "citations of docs pages by heading:\n" + "\n".join(found)


# -- the checks catch what they are for ---------------------------------------------------------


def test_a_link_outside_or_missing_is_found() -> None:
    doc = ROOT / "README.md"
    text = (
        "intro\n[the design](../shared/design.md), [abs](/work/x.md)\n"
        "[gone](docs/no-such-page.md#a), [ok](docs/architecture.md#the-layers), [web](https://x.org)\n"
        "`[not a link](../shared/in-code.md)`\n"
    )
    assert [(p.line, p.what.split(":")[0]) for p in link_problems(doc, text)] == [
        (2, "link outside the repository"),
        (2, "link to an absolute path"),
        (3, "link to a missing file"),
    ]


def test_a_stale_backticked_path_is_found() -> None:
    doc = ROOT / "docs" / "architecture.md"
    text = (
        "`rig/interface/cli.py` and `rig/cli.py`, `reports/render/templates/model.html.j2`,\n"
        "```\nsee tests/test_layers.py and bench/no_such_bench.py\n```\n"
        "`../../outside.md`, `verify_reads.py` (bare: not checked), rig/schema.py (prose)\n"
    )
    assert [(p.line, p.what) for p in path_problems(doc, text)] == [
        (3, "no such file: bench/no_such_bench.py"),
        (1, "no such file: rig/cli.py"),
        (5, "a path outside the repository: ../../outside.md"),
    ]


def test_a_citation_is_read_across_a_wrapped_comment() -> None:
    text = '# docs/architecture.md, "The\n    # layers"; (docs/architecture.md ("Safety rules"))'
    expected = [(1, "architecture", "The layers"), (2, "architecture", "Safety rules")]
    assert citations(text) == expected
