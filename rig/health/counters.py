"""Decoding of counters that tools print in more than one shape.

NVMe SMART counters are 128-bit. smartctl prints them as JSON numbers while they fit in 53 bits
and adds `KEY_s` (decimal string) and `KEY_le` (little-endian byte array) when they may not
(always with `--json=v`); nvme-cli 2.x prints every 128-bit counter as a decimal string. This
module reads all of those shapes and nothing else: anything unexpected is None, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UINT128_MAX = (1 << 128) - 1


def as_uint(value: Any) -> int | None:
    """A non-negative integer from a JSON int, a decimal string or a little-endian byte list."""
    if isinstance(value, bool):  # bool is an int subclass; a flag is not a counter
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str):
        text = value.strip().replace(",", "")
        if text.isdigit():  # rejects signs, blanks and floats
            return int(text)
        if text.lower().startswith("0x"):
            try:
                return int(text, 16)
            except ValueError:
                return None
        return None
    if (
        isinstance(value, list)
        and value
        and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value)
    ):
        return int.from_bytes(bytes(value), "little")
    return None


def counter(obj: Mapping[str, Any] | None, key: str) -> int | None:
    """Read `key` from a JSON object, preferring the exact forms over a possibly rounded number.

    Order: `KEY_le` (exact bytes), `KEY_s` (exact decimal), then `KEY` itself. A plain number
    above 2**53 may have lost precision in a JSON producer that went through a double; the
    string and byte forms exist precisely for that case.
    """
    if not obj:
        return None
    for variant in (f"{key}_le", f"{key}_s", key):
        if variant in obj:
            value = as_uint(obj[variant])
            if value is not None and value <= UINT128_MAX:
                return value
    return None


def get_path(obj: Any, *path: str) -> Any:
    """Walk nested JSON objects; None as soon as a step is missing or not an object."""
    for step in path:
        if not isinstance(obj, Mapping) or step not in obj:
            return None
        obj = obj[step]
    return obj
