"""A report's drive runs reduced for the analysis (issue 27): each run's table read once, one
run at a time, into counts, sums and return times (`RunPart`); a set of runs (a model, a drive,
a firmware) as their parts (`Cuts`); a model's delay points made when read."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from reports.cuts import (
    CutTable,
    DelayPoints,
    FloatArray,
    StoredDelayPoints,
    let_go,
    table_of,
)
from reports.dataset import DriveRun
from rig.check import failures


@dataclass
class RunPart:
    """One run's cycles reduced, in one pass over its table, to what the analysis states of
    them: counts, sums, the return times (every cut's, for exact quantiles) and where it died.
    A report holds these for every run at once, never the runs' tables (issue 27)."""

    cuts: int  # cycles with status ok or dead
    class_counts: dict[frozenset[str], int]  # cuts per set of failure classes
    class_sets: list[frozenset[str]]  # the sets the table knows, in its order
    statuses: dict[str, int]  # cycles per status, cuts or not
    dead_at: int | None  # the cut (1-based, among the run's cuts) the drive died at
    returns: FloatArray  # return times of the cuts with status ok that have one, in order
    bytes_written: int  # over every cycle
    blocks_checked: int  # over the cuts
    full_scans: int
    blocks_unchecked: int

    @classmethod
    def of(cls, t: CutTable) -> RunPart:
        m = t.is_cut
        hist = np.bincount(t.classes[m], minlength=len(t.class_sets))
        counts: dict[frozenset[str], int] = {}
        for i, s in enumerate(t.class_sets):
            counts[s] = counts.get(s, 0) + int(hist[i])
        dead_at = None
        if "dead" in t.statuses:
            found = np.flatnonzero(t.status[m] == t.statuses.index("dead"))
            dead_at = int(found[0]) + 1 if len(found) else None
        values = t.columns["return_ms"][m & t.status_mask("ok")]
        return cls(
            cuts=int(m.sum()),
            class_counts=counts,
            class_sets=list(t.class_sets),
            statuses={name: t.count_status(name) for name in t.statuses},
            dead_at=dead_at,
            returns=values[~np.isnan(values)],
            bytes_written=int(t.columns["bytes_written"].sum()),
            blocks_checked=int(t.columns["blocks_checked"][m].sum()),
            full_scans=int(t.columns["full_scan"][m].sum()),
            blocks_unchecked=int(t.columns["blocks_unchecked"][m].sum()),
        )


class RunParts:
    """Each run's RunPart, made once per report from its table (read one run at a time)."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[DriveRun, RunPart]] = {}

    def of(self, run: DriveRun) -> RunPart:
        if id(run) not in self.made:  # (the run is kept with it: its id stays its own)
            self.made[id(run)] = (run, RunPart.of(table_of(run.cuts)))
            let_go()  # (its columns read back from their files when next asked for)
        return self.made[id(run)][1]


@dataclass
class Cuts:
    """The cut rows (status ok or dead) of some drive runs, in order, as their RunParts."""

    runs: list[DriveRun]
    parts: list[RunPart]

    @classmethod
    def of(cls, runs: Iterable[DriveRun], parts: RunParts) -> Cuts:
        runs = list(runs)
        return cls(runs, [parts.of(r) for r in runs])

    @property
    def count(self) -> int:
        return sum(p.cuts for p in self.parts)

    def where(self, keep: Callable[[frozenset[str]], bool]) -> int:
        """Cuts whose set of failure classes `keep` accepts."""
        return sum(n for p in self.parts for s, n in p.class_counts.items() if keep(s))

    def returns(self) -> FloatArray:
        """Return times of cuts with status ok that have one."""
        return cat([p.returns for p in self.parts])

    def cycles(self, status: str) -> int:
        """Cycles of this status, cuts or not."""
        return sum(p.statuses.get(status, 0) for p in self.parts)

    def delays(self) -> DelayPoints:
        """Every cut's delays and outcome, made from the runs' tables when read (one model's
        in memory at a time: reports.cuts.StoredDelayPoints)."""
        # class-set codes in one canonical order (no failure first), not in the order the rows
        # came: a store and the fleet's database give the same analysis of the same cuts
        sets: set[frozenset[str]] = {frozenset()}
        for p in self.parts:
            sets.update(p.class_sets)
        order = sorted(sets, key=lambda s: (len(s), failures.ordered(s)))
        lists = [failures.ordered(s) for s in order]
        runs = self.runs

        def make() -> DelayPoints:
            codes = {s: i for i, s in enumerate(order)}
            columns: dict[str, list[FloatArray]] = {k: [] for k in DELAY_COLUMNS}
            mapped = []
            for r in runs:
                t = table_of(r.cuts)
                m = t.is_cut
                for name in DELAY_COLUMNS:
                    columns[name].append(t.columns[name][m])
                remap = np.array([codes[s] for s in t.class_sets] or [0], np.int32)
                mapped.append(remap[t.classes[m]])
            ack, flush, delay = (_joined(columns[name]) for name in DELAY_COLUMNS)
            return DelayPoints(
                ack,
                flush,
                delay,
                np.concatenate(mapped or [np.empty(0, np.int32)]).astype(np.int32),
                lists,
            )

        return StoredDelayPoints(make, self.count, lists)


DELAY_COLUMNS = ("ack_to_cut_ms", "flush_to_cut_ms", "cut_delay_ms")


def _joined(arrays: list[FloatArray]) -> FloatArray:
    """The arrays end to end; one array as it is (not copied: a model of one drive)."""
    return arrays[0] if len(arrays) == 1 else cat(arrays)


def cat(arrays: list[FloatArray]) -> FloatArray:
    return np.concatenate(arrays) if arrays else np.empty(0, np.float64)
