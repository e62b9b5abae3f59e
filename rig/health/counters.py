"""Decoding of what tools print: bounded JSON, and counters in more than one shape.

NVMe SMART counters are 128-bit. smartctl prints them as JSON numbers while they fit in 53 bits
and adds `KEY_s` (decimal string) and `KEY_le` (little-endian byte array) when they may not
(always with `--json=v`); nvme-cli 2.x prints every 128-bit counter as a decimal string. This
module reads all of those shapes and nothing else: anything unexpected is None, never a guess.

Every number is bounded to what its field can hold (`bits`), non-negative where the field is,
and read from ASCII digits only (`str.isdigit()` accepts "²" and other Unicode digits). JSON is
bounded in size and nesting depth *before* it is parsed, and integers longer than any field can
hold are not converted at all (Python refuses ints above 4,300 digits, and converting a long
one costs quadratic time), so no tool output can make the parser raise anything but
`ToolOutputError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rig.health.errors import ToolOutputError

UINT8_MAX = (1 << 8) - 1
UINT16_MAX = (1 << 16) - 1
UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1
UINT128_MAX = (1 << 128) - 1

# smartctl -x of an ATA drive with full logs is ~200 KB; nothing honest comes near this.
MAX_JSON_CHARS = 8 << 20
# smartctl's deepest objects are 5 levels; nvme-cli's 3.
MAX_JSON_DEPTH = 32
# 2**128 has 39 decimal digits; a number longer than this cannot be a counter of any field.
MAX_INT_DIGITS = 40

_DECIMAL = re.compile(r"[0-9]{1,40}", re.ASCII)
_HEX = re.compile(r"0[xX]([0-9a-fA-F]{1,32})", re.ASCII)
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_EMPTY_PAIR = re.compile(r"\[\]|\{\}")


class OutOfRange:
    """Stands in for a JSON integer too long for any field: no reader accepts it."""

    def __repr__(self) -> str:
        return "<integer out of range>"


OUT_OF_RANGE = OutOfRange()


def _parse_int(text: str) -> int | OutOfRange:
    return OUT_OF_RANGE if len(text) > MAX_INT_DIGITS + 1 else int(text)


def nesting_depth_within(text: str, limit: int) -> bool:
    """True when the JSON brackets of `text` (outside strings) nest at most `limit` deep.

    Pairs are peeled innermost first, one level per pass, each pass in C (re); an unbalanced
    text stops early and is left for the JSON decoder to report.
    """
    skeleton = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(limit):
        if not skeleton:
            return True
        skeleton, peeled = _EMPTY_PAIR.subn("", skeleton)
        if not peeled:
            return True
    return not skeleton


def load_json_object(text: Any, what: str) -> dict[str, Any]:
    """The JSON object a tool printed; ToolOutputError for anything else.

    Bounded before parsing: at most MAX_JSON_CHARS characters and MAX_JSON_DEPTH levels.
    """
    if not isinstance(text, str):
        raise ToolOutputError(f"{what}: output is a {type(text).__name__}, not text")
    if not text.strip():
        raise ToolOutputError(f"{what} printed nothing")
    if len(text) > MAX_JSON_CHARS:
        raise ToolOutputError(f"{what}: output of {len(text)} characters is too long to be JSON")
    if not nesting_depth_within(text, MAX_JSON_DEPTH):
        raise ToolOutputError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        doc = json.loads(text, parse_int=_parse_int)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        head = text[:60].replace("\n", " ")
        where = f" at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        raise ToolOutputError(
            f"{what}: output is not JSON (truncated or garbage){where}: {head!r}"
        ) from exc
    if not isinstance(doc, dict):
        raise ToolOutputError(f"{what}: JSON is a {type(doc).__name__}, not an object")
    return doc


def as_uint(value: Any, bits: int = 128) -> int | None:
    """A non-negative integer that fits in `bits`, from a JSON int, an ASCII decimal or 0x-hex
    string, or a little-endian byte list; None for anything else."""
    number: int | None = None
    if isinstance(value, bool):  # bool is an int subclass; a flag is not a counter
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip().replace(",", "")
        if _DECIMAL.fullmatch(text):  # ASCII only: rejects signs, blanks, floats, "²"
            number = int(text)
        elif match := _HEX.fullmatch(text):
            number = int(match.group(1), 16)
    elif (
        isinstance(value, list)
        and 0 < len(value) <= 16
        and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value)
    ):
        number = int.from_bytes(bytes(value), "little")
    if number is None or number < 0 or number >> bits:
        return None
    return number


def as_int(value: Any, bits: int) -> int | None:
    """A signed JSON integer that fits in `bits` (two's complement range), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    half = 1 << (bits - 1)
    return value if -half <= value < half else None


def counter(obj: Mapping[str, Any] | None, key: str, bits: int = 128) -> int | None:
    """Read `key` from a JSON object, preferring the exact forms over a possibly rounded number.

    Order: `KEY_le` (exact bytes), `KEY_s` (exact decimal), then `KEY` itself. A plain number
    above 2**53 may have lost precision in a JSON producer that went through a double; the
    string and byte forms exist precisely for that case.
    """
    if not isinstance(obj, Mapping):
        return None
    for variant in (f"{key}_le", f"{key}_s", key):
        if variant in obj:
            value = as_uint(obj[variant], bits)
            if value is not None:
                return value
    return None


def get_path(obj: Any, *path: str) -> Any:
    """Walk nested JSON objects; None as soon as a step is missing or not an object."""
    for step in path:
        if not isinstance(obj, Mapping) or step not in obj:
            return None
        obj = obj[step]
    return obj
