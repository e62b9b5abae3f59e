"""A report's drive runs reduced for the analysis (docs/decisions.md, "A report holds nothing per
cut between analysis and write"): each run's table read once, one
run at a time, into counts and sums (`RunPart`); a set of runs (a model, a drive, a firmware) as
their parts (`RunCuts`); a model's delay points and return times made when read."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reports.load.binned import BinnedDelays, BinnedReturns, DelayCounts, LogHistogram
from reports.load.cuts import (
    CUT_STATUSES,
    Cut,
    CutTable,
    DelayPoints,
    FloatArray,
    SpilledCuts,
    StoredDelayPoints,
    StoredReturns,
    column_chunks,
    table_of,
)
from reports.load.dataset import DriveData
from rig.check import failures
from rig.check.exposure import is_exposed


@dataclass
class RunPart:
    """One run's cycles reduced, in one pass over its table, to what the analysis states of
    them: counts, sums and where it died. A report holds these for every run at once, never the
    runs' tables nor a value per cut: the return times are read again from the
    table when a quantile, a chart or report.json needs them (`return_times`)."""

    cuts: int  # cycles with status ok or dead
    class_counts: dict[frozenset[str], int]  # cuts per set of failure classes
    class_sets: list[frozenset[str]]  # the sets the table knows, in its order
    statuses: dict[str, int]  # cycles per status, cuts or not
    dead_at: int | None  # the cut (1-based, among the run's cuts) the drive died at
    returns: int  # cuts with status ok that have a return time
    bytes_written: int  # over every cycle
    blocks_checked: int  # over the cuts
    full_scans: int
    blocks_unchecked: int
    # cuts per (set of failure classes, set of classes exposed to; None: not known)
    exposure_counts: dict[tuple[frozenset[str], frozenset[str] | None], int]

    @classmethod
    def of(cls, cuts: Iterable[Cut]) -> RunPart:
        """The run's part, from its columns a piece at a time (reports.load.cuts.column_chunks)."""
        source = _source(cuts)
        statuses, sets = source.statuses, source.class_sets
        cut_codes = [i for i, s in enumerate(statuses) if s in CUT_STATUSES]
        ok = [i for i, s in enumerate(statuses) if s == "ok"]
        dead = statuses.index("dead") if "dead" in statuses else None
        per_set = np.zeros(len(sets), np.int64)
        per_status = np.zeros(len(statuses), np.int64)
        seen, dead_at, returns = 0, None, 0
        sums = dict.fromkeys(SUMMED, 0)
        exposed_sets = source.exposed_sets
        per_pair = np.zeros(len(sets) * len(exposed_sets), np.int64)
        names = ("status", "classes", "exposed", "return_ms", *SUMMED)
        for c in column_chunks(source, names):
            m = np.isin(c["status"], cut_codes)
            per_set += np.bincount(c["classes"][m], minlength=len(sets))
            pair = c["classes"][m].astype(np.int64) * len(exposed_sets) + c["exposed"][m]
            per_pair += np.bincount(pair, minlength=len(per_pair))
            per_status += np.bincount(c["status"], minlength=len(statuses))
            if dead is not None and dead_at is None:
                found = np.flatnonzero(c["status"][m] == dead)
                dead_at = seen + int(found[0]) + 1 if len(found) else None
            seen += int(m.sum())
            back = c["return_ms"][m & np.isin(c["status"], ok)]
            returns += int((~np.isnan(back)).sum())
            sums["bytes_written"] += int(c["bytes_written"].sum())
            for name in SUMMED[1:]:  # (over the cuts)
                sums[name] += int(c[name][m].sum())
        counts: dict[frozenset[str], int] = {}
        for i, s in enumerate(sets):
            counts[s] = counts.get(s, 0) + int(per_set[i])
        return cls(
            cuts=seen,
            class_counts=counts,
            class_sets=list(sets),
            statuses={name: int(per_status[i]) for i, name in enumerate(statuses)},
            dead_at=dead_at,
            returns=returns,
            bytes_written=sums["bytes_written"],
            blocks_checked=sums["blocks_checked"],
            full_scans=sums["full_scan"],
            blocks_unchecked=sums["blocks_unchecked"],
            exposure_counts={
                (sets[i // len(exposed_sets)], exposed_sets[i % len(exposed_sets)]): int(n)
                for i, n in enumerate(per_pair)
                if n
            },
        )


SUMMED = ("bytes_written", "blocks_checked", "full_scan", "blocks_unchecked")


def _source(cuts: Iterable[Cut]) -> SpilledCuts | CutTable:
    """What column_chunks reads a run's columns from: its spilled files, or a table."""
    return cuts if isinstance(cuts, SpilledCuts) else table_of(cuts)


class SummarisedCuts(Sequence[Cut]):
    """A run's cuts known by their aggregates (the central report: docs/decisions.md, "The
    central report states figures from the server's aggregates"): its RunPart, its return
    times per bin and its cuts per delay bin, made by the server; the rows are read
    (`load`) only where something asks for them one by one (a sequential plan's order, a
    report given stores beside the central database), never for the counts and charts."""

    def __init__(
        self,
        part: RunPart,
        returns: LogHistogram,
        delays: DelayCounts,
        load: Callable[[], CutTable],
        listed: Callable[[], Iterator[CutTable]] | None = None,
    ) -> None:
        self.part, self.returns, self.delays, self._load = part, returns, delays, load
        self.listed = listed  # its rows a chunk at a time for cuts.csv (None: not listed)

    def table(self) -> CutTable:
        return self._load()

    def __len__(self) -> int:
        return sum(self.part.statuses.values())

    def __getitem__(self, index: Any) -> Any:
        return self.table()[index]

    def __iter__(self) -> Iterator[Cut]:
        return iter(self.table())


class RunParts:
    """Each run's RunPart, made once per report from its table (read one run at a time)."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[DriveData, RunPart]] = {}

    def of(self, run: DriveData) -> RunPart:
        if id(run) not in self.made:  # (the run is kept with it: its id stays its own)
            cuts = run.cuts
            part = cuts.part if isinstance(cuts, SummarisedCuts) else RunPart.of(cuts)
            self.made[id(run)] = (run, part)
        return self.made[id(run)][1]


@dataclass
class RunCuts:
    """The cut rows (status ok or dead) of some drive runs, in order, as their RunParts."""

    runs: list[DriveData]
    parts: list[RunPart]

    @classmethod
    def of(cls, runs: Iterable[DriveData], parts: RunParts) -> RunCuts:
        runs = list(runs)
        return cls(runs, [parts.of(r) for r in runs])

    @property
    def count(self) -> int:
        return sum(p.cuts for p in self.parts)

    def where(self, keep: Callable[[frozenset[str]], bool]) -> int:
        """Cuts whose set of failure classes `keep` accepts."""
        return sum(n for p in self.parts for s, n in p.class_counts.items() if keep(s))

    def exposure(self, cls: str) -> tuple[int, int, int]:
        """For one class: cuts exposed to it (a cut of unknown exposure counts, as before
        exposure was kept), failing cuts of it among them, and cuts of unknown exposure."""
        exposed = failing = unknown = 0
        for p in self.parts:
            for (found, seen), n in p.exposure_counts.items():
                if (trial := is_exposed(seen, cls)) is False:
                    continue
                exposed += n
                failing += n * (cls in found)
                unknown += n * (trial is None)
        return exposed, failing, unknown

    def returns(self) -> StoredReturns:
        """Return times of cuts with status ok that have one, in order: made from the runs'
        tables when read (one set's in memory at a time: reports.load.cuts.StoredReturns); runs
        known by their aggregates only: their histogram (reports.load.binned.BinnedReturns)."""
        runs = self.runs
        summarised = [r.cuts for r in runs if isinstance(r.cuts, SummarisedCuts)]
        if summarised and len(summarised) == len(runs):
            histogram = LogHistogram()
            for s in summarised:
                histogram.add(s.returns)
            return BinnedReturns(histogram)

        def pieces() -> Iterator[FloatArray]:
            for r in runs:
                yield from return_pieces(r.cuts)

        return StoredReturns(
            lambda: cat(list(pieces())), sum(p.returns for p in self.parts), pieces
        )

    def cycles(self, status: str) -> int:
        """Cycles of this status, cuts or not."""
        return sum(p.statuses.get(status, 0) for p in self.parts)

    def delays(self) -> DelayPoints:
        """Every cut's delays and outcome, made from the runs' tables when read (one model's
        in memory at a time: reports.load.cuts.StoredDelayPoints)."""
        # class-set codes in one canonical order (no failure first), not in the order the rows
        # came: a store and the fleet's database give the same analysis of the same cuts
        sets: set[frozenset[str]] = {frozenset()}
        for p in self.parts:
            sets.update(p.class_sets)
        order = sorted(sets, key=lambda s: (len(s), failures.ordered(s)))
        lists = [failures.ordered(s) for s in order]
        runs = self.runs
        summarised = [r.cuts for r in runs if isinstance(r.cuts, SummarisedCuts)]
        if summarised and len(summarised) == len(runs):
            return BinnedDelays(DelayCounts.summed(s.delays for s in summarised), lists)

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

        def pieces() -> Iterator[DelayPoints]:
            codes = {s: i for i, s in enumerate(order)}
            for r in runs:
                source = _source(r.cuts)
                cut_codes = [i for i, s in enumerate(source.statuses) if s in CUT_STATUSES]
                remap = np.array([codes[s] for s in source.class_sets] or [0], np.int32)
                for c in column_chunks(source, ("status", "classes", *DELAY_COLUMNS)):
                    m = np.isin(c["status"], cut_codes)
                    ack, flush, delay = (c[name][m] for name in DELAY_COLUMNS)
                    yield DelayPoints(ack, flush, delay, remap[c["classes"][m]], lists)

        return StoredDelayPoints(make, self.count, lists, pieces)


DELAY_COLUMNS = ("ack_to_cut_ms", "flush_to_cut_ms", "cut_delay_ms")


def return_pieces(cuts: Iterable[Cut]) -> Iterator[FloatArray]:
    """The run's return times of cuts with status ok that have one, in order, a piece of its
    table at a time."""
    source = _source(cuts)
    ok = [i for i, s in enumerate(source.statuses) if s == "ok"]
    for c in column_chunks(source, ("status", "return_ms")):
        values = c["return_ms"][np.isin(c["status"], ok)]
        yield values[~np.isnan(values)]


def _joined(arrays: list[FloatArray]) -> FloatArray:
    """The arrays end to end; one array as it is (not copied: a model of one drive)."""
    return arrays[0] if len(arrays) == 1 else cat(arrays)


def cat(arrays: list[FloatArray]) -> FloatArray:
    return np.concatenate(arrays) if arrays else np.empty(0, np.float64)
