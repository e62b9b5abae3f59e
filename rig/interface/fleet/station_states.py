"""Station transitions, computed once: the states seen at the last look and what changed at this
one. Both watchers of the fleet's stations use it: `freshness.StaleWatch` (a notifier's hook:
every change, nothing at the first poll) and `station_watch.StationWatch` (`station_offline`
notices: each fall from online, a station silent at the first look included). What a state is
(online, stale, never seen) is `freshness.station_state`'s to say; this only compares."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class Seen(Protocol):
    """What a look needs of a station (`freshness.StationStatus` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def last_seen_s(self) -> float | None: ...


@dataclass(frozen=True)
class Transition:
    """A station changed state: `before` -> `after` (online, stale, never seen)."""

    station: str
    before: str
    after: str
    last_seen_s: float | None


class StationStates:
    """The state of each station at the last look. A station seen for the first time is taken
    to have been in `assumed` before (None: it is new and changes nothing). A station missing
    from a look keeps its last state: seen again, it is compared with that."""

    def __init__(self, assumed: str | None = None) -> None:
        self.assumed = assumed
        self.last: dict[str, str] = {}

    def look(self, stations: Iterable[Seen]) -> list[Transition]:
        """What changed since the last look, in the order of `stations`."""
        changed = []
        for s in stations:
            before = self.last.get(s.name, self.assumed)
            if before is not None and before != s.state:
                changed.append(Transition(s.name, before, s.state, s.last_seen_s))
            self.last[s.name] = s.state
        return changed
