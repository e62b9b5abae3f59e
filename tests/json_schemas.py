"""The `--json` documents against their published schemas (docs/json/*.schema.json) and their
field-by-field description (docs/json.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

DOCS = Path(__file__).resolve().parents[1] / "docs"


def schema_of(name: str) -> dict[str, Any]:
    """The JSON Schema of `name` (e.g. rig.status/1): docs/json/rig.status-1.schema.json."""
    schema: dict[str, Any] = json.loads(
        (DOCS / "json" / f"{name.replace('/', '-')}.schema.json").read_text()
    )
    Draft202012Validator.check_schema(schema)
    return schema


def validate(document: dict[str, Any]) -> None:
    """Raises jsonschema.ValidationError where `document` breaks the schema it names."""
    Draft202012Validator(schema_of(document["schema"])).validate(document)


def schema_fields(name: str) -> set[str]:
    """Every field path the schema defines: `drives[].criteria.confidence`, ..."""
    schema = schema_of(name)

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        return resolve(schema["$defs"][ref.rsplit("/", 1)[1]]) if ref else node

    def walk(node: dict[str, Any], prefix: str) -> set[str]:
        node = resolve(node)
        found: set[str] = set()
        for alternative in node.get("oneOf", []):
            found |= walk(alternative, prefix)
        if node.get("type") == "array" and "items" in node:
            found |= walk(node["items"], prefix + "[]")
        for key, sub in node.get("properties", {}).items():
            path = f"{prefix}.{key}" if prefix else key
            found |= {path} | walk(sub, path)
        return found

    return walk(schema, "")


def documented_fields(name: str) -> set[str]:
    """The field paths docs/json.md's section for `name` describes (its table's first column)."""
    text = (DOCS / "json.md").read_text()
    start = text.index(f"`{name}`\n")
    end = text.find("\n## ", start)
    section = text[start : end if end >= 0 else len(text)]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE))
