"""Sorted values given as (distinct value, how many): the lost-after times of a model (millions
of lost writes at scale, few distinct values; docs/decisions.md, "Per-cut outputs are streamed,
aggregates come from columns")."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any


class Counted(Sequence[float]):
    """Sorted values given as (distinct value, how many): a figure per lost write (millions at
    scale, few distinct) in memory per distinct value; reads as the sorted list it stands for."""

    def __init__(self, counts: Mapping[float, int] | None = None) -> None:
        items = sorted((v, n) for v, n in (counts or {}).items() if n > 0)
        self.values = [v for v, _ in items]
        self.counts = [n for _, n in items]
        self.total = sum(self.counts)

    def __len__(self) -> int:
        return self.total

    def __iter__(self) -> Iterator[float]:
        for v, n in zip(self.values, self.counts, strict=True):
            for _ in range(n):
                yield v

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(itertools.islice(self, *index.indices(self.total)))
        if index < 0:
            index += self.total
        if not 0 <= index < self.total:
            raise IndexError(index)
        for v, n in zip(self.values, self.counts, strict=True):
            if index < n:
                return v
            index -= n
        raise IndexError(index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Counted):
            return (self.values, self.counts) == (other.values, other.counts)
        return isinstance(other, list | tuple) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Counted({dict(zip(self.values, self.counts, strict=True))})"

    def mapped(self, f: Callable[[float], float]) -> Counted:
        """f (non-decreasing) of every value."""
        out: dict[float, int] = {}
        for v, n in zip(self.values, self.counts, strict=True):
            out[f(v)] = out.get(f(v), 0) + n
        return Counted(out)


def add_counts(into: dict[float, int], values: Iterable[tuple[float, int]]) -> None:
    for v, n in values:
        into[v] = into.get(v, 0) + n
