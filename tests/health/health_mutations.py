"""Mutations of real tool outputs, as a drive or a tool in a bad state could print them.

Used by the fuzz property (test_health_fuzz.py) and by the tests of single findings. A
mutation is either textual (truncation, a deleted or inserted slice, a flipped character) or
structural: one value somewhere in the JSON replaced by a hostile one, written as raw JSON text
so that numbers no Python int could print (4,301 digits) and nesting deeper than the recursion
limit can be produced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from health_paths import REAL_SMARTCTL, RECORDED
from hypothesis import strategies as st

PLACEHOLDER = "\u0000__HOSTILE__\u0000"

# Raw JSON fragments, each one of the shapes found in real tool output or a close relative.
HOSTILE_FRAGMENTS: tuple[str, ...] = (
    "9" * 4301,  # over Python's int digit limit
    "-" + "9" * 4400,
    "1" + "0" * 40,  # just over 128 bits
    str(2**128),
    str(2**64),
    "-1",
    "-512",
    "0",
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "3.5",
    "true",
    "false",
    "null",
    "5",
    '"\u00b2"',  # a digit to str.isdigit(), not to int()
    '"\u0663\u0663"',  # Arabic-Indic digits
    '"9e999999"',  # decimal.Overflow once multiplied
    '"-9e999999"',
    '"NaN"',
    '"0x' + "f" * 4000 + '"',  # 4,000 hex digits
    '"' + "9" * 5000 + '"',
    '"\ud800"',  # a lone surrogate
    '""',
    '" "',
    '"1,2,3"',
    "[]",
    "{}",
    "[256, -1]",
    "[" + ",".join(["255"] * 40) + "]",
    '{"value": "\u00b2"}',
    '{"string": 5}',
    "[" * 5000 + "]" * 5000,  # deeper than the recursion limit
    '{"a":' * 3000 + "1" + "}" * 3000,
)


def real_smartctl_files() -> list[Path]:
    return sorted(REAL_SMARTCTL.glob("*.json"))


def recorded_files() -> dict[str, list[Path]]:
    """Recorded outputs of the other tools, by the parser that reads them."""
    return {
        "nvme id-ctrl": sorted((RECORDED / "nvme" / "id-ctrl").glob("*.json")),
        "nvme smart-log": sorted((RECORDED / "nvme" / "smart-log").glob("*.json")),
        "nvme get-feature": sorted((RECORDED / "nvme" / "get-feature").glob("*.txt")),
        "nvme ocp": sorted((RECORDED / "nvme" / "ocp").glob("*.json")),
        "nvme show-regs": sorted((RECORDED / "nvme" / "show-regs").glob("*.json")),
        "smartctl recorded": sorted((RECORDED / "smartctl").glob("*.json")),
        "sg_inq": sorted((RECORDED / "sg_inq").glob("*.txt")),
        "sg_vpd": sorted((RECORDED / "sg_vpd").glob("*.txt")),
        "hdparm": sorted((RECORDED / "hdparm").glob("*.txt")),
        "sdparm": sorted((RECORDED / "sdparm").glob("*.txt")),
    }


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path (keys and indexes) to a value inside a JSON document, root excluded."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield (*prefix, i)
            yield from paths(value, (*prefix, i))


def replace_at(text: str, path: tuple[Any, ...], fragment: str | None) -> str:
    """`text` (JSON) with the value at `path` replaced by raw JSON `fragment`; None deletes a
    key (or a list item)."""
    doc = json.loads(text)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if fragment is None:
        del parent[path[-1]]
        return json.dumps(doc, indent=1)
    parent[path[-1]] = PLACEHOLDER
    return json.dumps(doc, indent=1).replace(json.dumps(PLACEHOLDER), fragment)


@st.composite
def textual_mutation(draw: st.DrawFn, text: str) -> str:
    kind = draw(st.sampled_from(["truncate", "delete", "insert", "flip"]))
    at = draw(st.integers(0, len(text)))
    if kind == "truncate":
        return text[:at]
    if kind == "delete":
        return text[:at] + text[at + draw(st.integers(1, 64)) :]
    if kind == "insert":
        junk = draw(st.text(min_size=1, max_size=16) | st.sampled_from(HOSTILE_FRAGMENTS))
        return text[:at] + junk + text[at:]
    return text[:at] + draw(st.characters()) + text[at + 1 :]


@st.composite
def structural_mutation(draw: st.DrawFn, text: str) -> str:
    doc = json.loads(text)
    every = list(paths(doc))
    if not every:
        return text
    changed = text
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(every))
        fragment = draw(st.sampled_from((*HOSTILE_FRAGMENTS, None)))
        try:
            changed = replace_at(changed, path, fragment)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced that path's parent
        except (ValueError, RecursionError):
            break  # the text holds a fragment json cannot read back: mutate no further
    return changed


def mutated(text: str, structural: bool) -> st.SearchStrategy[str]:
    if structural:
        return structural_mutation(text) | textual_mutation(text)
    return textual_mutation(text)
