"""The building blocks of campaign-file schemas, shared by rig/config.py and every station kind
(rig/station/kinds/): typed access to one TOML table, and what every station has.

A leaf module (nothing of the rig's above it): the station kinds subclass `StationSpec` and read
their keys through `Table` without importing rig/config.py, which imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rig.errors import UserError


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


@dataclass(frozen=True)
class StationSpec:
    """The [station] keys every kind has; each kind (rig/station/kinds/) subclasses it with its
    own."""

    kind: str
    recover: str = "none"  # bus recovery of drives not back after power-on (rig/bus/recover.py)
    recover_wait_s: tuple[tuple[str, float], ...] = ()  # per transport, before recovering

    def label(self) -> str:
        """The station's name in the store and the progress lines."""
        return self.kind

    def simulated_block_devices(self) -> bool:
        """Whether the drives this station simulates (a kind with `simulated_drives`) are block
        devices all the same, nodes a discard can be sent to. Drives on the real bus always are."""
        return False


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


class KindRules(Protocol):
    """What reading a campaign file (rig/config.py) needs of a station kind: a row of the kinds'
    table the caller hands in (rig/station/backends.py:STATION_KINDS, through
    rig/station/campaign_file.py), since the kinds build stations from config's `Campaign`."""

    @property
    def settings(self) -> Callable[[Table, StationSpec], StationSpec]: ...

    @property
    def simulated_drives(self) -> bool: ...

    @property
    def cut_kinds(self) -> tuple[str, ...]: ...  # the [cut] kinds its switch can make

    def own_keys(self) -> tuple[str, ...]: ...
