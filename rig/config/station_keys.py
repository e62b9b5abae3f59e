"""What every station has in a campaign file, shared by rig/config/campaign.py and every station
kind (rig/station/kinds/): the kinds subclass `StationSpec` and read their keys through
rig/config/tables.py's `Table` without importing rig/config/campaign.py, which is handed them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from rig.config.tables import Table
from rig.errors import UserError


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

    def place(self, board: str, channel: int, where: str) -> tuple[str, int]:
        """A [[drive]]'s `board` and `channel` as (the board's name, the station channel: the
        key the store, the progress and the power switch use). A station of one switch has no
        board names (""): its channel is the drive's. Kinds with several boards override this."""
        if board:
            raise UserError(f"campaign: {where}.board: a {self.kind} station names no boards")
        return "", channel

    def simulated_block_devices(self) -> bool:
        """Whether the drives this station simulates (a kind with `simulated_drives`) are block
        devices all the same, nodes a discard can be sent to. Drives on the real bus always are."""
        return False


class KindRules(Protocol):
    """What reading a campaign file (rig/config/campaign.py) needs of a station kind: a row of the
    kinds' table the caller hands in (rig/station/backends.py:STATION_KINDS, through
    rig/config/campaign_file.py), since the kinds build stations from its `Campaign`."""

    @property
    def settings(self) -> Callable[[Table, StationSpec], StationSpec]: ...

    @property
    def simulated_drives(self) -> bool: ...

    @property
    def cut_kinds(self) -> tuple[str, ...]: ...  # the [cut] kinds its switch can make

    def own_keys(self) -> tuple[str, ...]: ...
