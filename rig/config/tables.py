"""Reading campaign files (TOML): the text read and parsed, typed access to one table, and the
helpers every section's reader shares, each with its one-line error.

A leaf (it imports nothing of the rig but rig.errors): each package reads its own section with
these (rig/io/workload.py `settings`, rig/window/spec.py, rig/power/shapes.py, ...), and
rig/config/campaign.py assembles the sections into a `Campaign`. See docs/campaign.md for every key.
Unknown keys are errors (a typo must not silently fall back to a default in a destructive tool).
"""

from __future__ import annotations

import tomllib
from typing import Any

from rig.errors import UserError


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: cannot read campaign file: {error}") from error


def parse_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{where}: not valid TOML: {error}") from error


class Table:
    """Typed access to one TOML table that remembers which keys were used."""

    def __init__(self, where: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise UserError(f"campaign: {where} must be a table")
        self.where = where
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is None:
                raise UserError(f"campaign: {self.where} needs '{key}'")
            return default
        value = self.data[key]
        bad_bool = isinstance(value, bool) and bool not in _as_tuple(kind)
        if bad_bool or not isinstance(value, kind):
            raise UserError(f"campaign: {self.where}.{key} has the wrong type ({value!r})")
        return value

    def number(self, key: str, default: float | None, low: float, high: float) -> Any:
        value = self.get(key, (int, float), default)
        if not low <= value <= high:
            raise UserError(f"campaign: {self.where}.{key} = {value} is outside {low}..{high}")
        return value

    def whole(self, key: str, default: int | None, low: int, high: int) -> int:
        """A whole number: 0.5 is refused, never truncated."""
        value = self.number(key, default, low, high)
        if isinstance(value, float) and not value.is_integer():
            raise UserError(f"campaign: {self.where}.{key} = {value} is not a whole number")
        return int(value)

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise UserError(f"campaign: {self.where} has unknown key '{unknown[0]}'")

    def integer(self, key: str, default: int | None, low: int, high: int) -> int:
        """An integer as written: 1000.5 and 1000.0 are both refused."""
        value = self.number(key, default, low, high)
        if not isinstance(value, int):
            raise UserError(f"campaign: {self.where}.{key} must be a whole number")
        return value

    def table(self, key: str) -> Table:
        """A sub-table (`[station.rail_sense]`), with its own unknown-key check."""
        return Table(f"{self.where[:-1]}.{key}]", self.get(key, dict))

    def choice(self, key: str, choices: tuple[str, ...]) -> str:
        """A string key from a fixed list; the first choice is the default."""
        value: str = self.get(key, str, choices[0])
        if value not in choices:
            raise UserError(f"campaign: {self.where}.{key} must be one of {', '.join(choices)}")
        return value

    def range_ms(self, key: str, default: list[float]) -> tuple[float, float]:
        value = self.get(key, list, default)
        if (
            len(value) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            or not (0 <= value[0] <= value[1] <= 3_600_000)
        ):
            raise UserError(
                f"campaign: {self.where}.{key} must be [low, high] milliseconds, low <= high"
            )
        return float(value[0]), float(value[1])


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


SIZE_UNITS = (("mib", 1 << 20), ("kib", 1 << 10), ("bytes", 1))


def size(table: Table, stem: str, default: int, low: int) -> int:
    """A size in bytes from exactly one of `<stem>_mib`, `<stem>_kib`, `<stem>_bytes`, each a
    whole number of its unit (alignment needs offsets finer than a MiB: a 512-byte offset is
    `<stem>_bytes = 512`, never `<stem>_mib = 0.0005` rounded)."""
    given = [
        (f"{stem}_{unit}", scale) for unit, scale in SIZE_UNITS if f"{stem}_{unit}" in table.data
    ]
    if len(given) > 1:
        raise UserError(f"campaign: {table.where} gives both {given[0][0]} and {given[1][0]}")
    if not given:
        return default
    key, scale = given[0]
    value = table.number(key, None, low, (1 << 52) // scale)
    if isinstance(value, float) and not value.is_integer():
        finer = [f"{stem}_{unit}" for unit, s in SIZE_UNITS if s < scale][:1]
        hint = f" (give {finer[0]})" if finer else ""
        raise UserError(f"campaign: {table.where}.{key} = {value} is not a whole number{hint}")
    return int(value) * scale
