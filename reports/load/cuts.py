"""A drive's cuts as columns: one numpy array per figure a report uses, so a store of
millions of cuts costs about 90 bytes per cut in memory instead of a Python object per cut.

A missing value (no return recorded, no write before the cut...) is NaN in a float column; the
cut's status and its set of failure classes are small codes into per-table vocabularies. A
`CutTable` still reads as a sequence of `Cut` objects (made on demand) for small callers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from reports.load.spill_owner import SpillFolder

CUT_STATUSES = ("ok", "dead")
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# column name -> dtype; the float columns hold NaN where the Cut's field is None
COLUMNS: dict[str, Any] = {
    "seq": np.int64,
    "cut_delay_ms": np.float64,
    "return_ms": np.float64,
    "gone_ms": np.float64,
    "ack_to_cut_ms": np.float64,
    "flush_to_cut_ms": np.float64,
    "started_at": np.float64,
    "bytes_written": np.int64,
    "blocks_checked": np.int64,
    "full_scan": np.bool_,
    "blocks_unchecked": np.int64,
    "realized_delay_ms": np.float64,
    "delay_error_ms": np.float64,
}
Values = Mapping[str, Sequence[Any]]  # a chunk's columns by name
Texts = Sequence[str | None] | None  # a chunk's `cycle.exposed` texts (None: not known)
OPTIONAL = (
    *("return_ms", "gone_ms", "ack_to_cut_ms", "flush_to_cut_ms"),
    *("realized_delay_ms", "delay_error_ms"),
)


@dataclass
class Cut:
    """One cycle of one drive, as a report sees it."""

    seq: int
    status: str  # ok | dead | error | interrupted | ...
    cut_delay_ms: float
    failure_classes: frozenset[str]
    return_ms: float | None  # cut edge to the drive back on the bus
    gone_ms: float | None  # cut edge to the drive gone from the bus
    ack_to_cut_ms: float | None  # last acknowledged write completion before the cut
    flush_to_cut_ms: float | None  # last completed flush before the cut
    started_at: float
    bytes_written: int
    blocks_checked: int
    full_scan: bool  # store v3: the cut's check read the whole test region
    blocks_unchecked: int = 0  # store v9: meant to be read, left unread by a read budget
    realized_delay_ms: float | None = None  # store v14: the edge minus its trigger event
    delay_error_ms: float | None = None  # (that figure's bound: the clock mapping's)

    @property
    def is_cut(self) -> bool:
        return self.status in CUT_STATUSES

    @property
    def failed(self) -> bool:
        return bool(self.failure_classes)


def _optional(value: float) -> float | None:
    return None if value != value else value  # NaN: no value


@dataclass
class CutTable(Sequence[Cut]):
    """Cuts in cycle order: `columns[name]` per COLUMNS, `status` and `classes` codes into
    `statuses` and `class_sets` (code 0 is the empty set: no failure)."""

    columns: dict[str, npt.NDArray[Any]] = field(
        default_factory=lambda: {k: np.empty(0, t) for k, t in COLUMNS.items()}
    )
    status: npt.NDArray[np.int16] = field(default_factory=lambda: np.empty(0, np.int16))
    classes: npt.NDArray[np.int32] = field(default_factory=lambda: np.empty(0, np.int32))
    statuses: list[str] = field(default_factory=list)
    class_sets: list[frozenset[str]] = field(default_factory=lambda: [frozenset()])
    # per cut a code into `exposed_sets`: the classes it was a trial of (code 0: not known)
    exposed: npt.NDArray[np.int32] = field(default_factory=lambda: np.empty(0, np.int32))
    exposed_sets: list[frozenset[str] | None] = field(default_factory=lambda: [None])

    def __len__(self) -> int:
        return len(self.status)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row = {k: v[index].item() for k, v in self.columns.items()}
        for name in OPTIONAL:
            row[name] = _optional(row[name])
        return Cut(
            status=self.statuses[int(self.status[index])],
            failure_classes=self.class_sets[int(self.classes[index])],
            **row,
        )

    def __iter__(self) -> Iterator[Cut]:
        return (self[i] for i in range(len(self)))

    def status_mask(self, *names: str) -> npt.NDArray[np.bool_]:
        codes = [i for i, s in enumerate(self.statuses) if s in names]
        return np.isin(self.status, codes)

    @property
    def is_cut(self) -> npt.NDArray[np.bool_]:
        return self.status_mask(*CUT_STATUSES)

    @property
    def failed(self) -> npt.NDArray[np.bool_]:
        return self.classes != 0

    def count_status(self, status: str) -> int:
        return int(self.status_mask(status).sum())


class TableBuilder:
    """Accumulates a CutTable from chunks of rows (bounded Python lists per chunk)."""

    def __init__(self) -> None:
        self.table = CutTable()
        self.chunks: dict[str, list[npt.NDArray[Any]]] = {k: [] for k in COLUMNS}
        self.status_chunks: list[npt.NDArray[np.int16]] = []
        self.class_chunks: list[npt.NDArray[np.int32]] = []
        self.exposed_chunks: list[npt.NDArray[np.int32]] = []
        self.exposed_code: dict[str | None, int] = {None: 0}
        self.status_code: dict[str, int] = {}
        self.class_code: dict[frozenset[str], int] = {frozenset(): 0}

    def code_of_classes(self, classes: frozenset[str]) -> int:
        code = self.class_code.get(classes)
        if code is None:
            code = self.class_code[classes] = len(self.table.class_sets)
            self.table.class_sets.append(classes)
        return code

    def add(
        self, values: Values, statuses: Sequence[str], classes: Sequence[int], exposed: Texts = None
    ) -> None:
        """One chunk: a sequence per COLUMNS name (None allowed in float columns), the statuses,
        the class-set codes (from code_of_classes) and each cut's exposure as the store keeps
        it (`cycle.exposed`; None or absent: not known)."""
        for name, dtype in COLUMNS.items():
            self.chunks[name].append(np.array(values[name], dtype=dtype))
        self.status_chunks.append(self.status_codes(statuses))
        self.class_chunks.append(np.array(classes, dtype=np.int32))
        self.exposed_chunks.append(self.exposed_codes(exposed, len(statuses)))

    def exposed_codes(self, exposed: Texts, n: int) -> npt.NDArray[np.int32]:
        texts = exposed if exposed is not None else [None] * n
        for text in set(texts) - self.exposed_code.keys():
            self.exposed_code[text] = len(self.table.exposed_sets)
            self.table.exposed_sets.append(frozenset(c for c in str(text).split(",") if c))
        return np.array([self.exposed_code[t] for t in texts], np.int32)

    def status_codes(self, statuses: Sequence[str]) -> npt.NDArray[np.int16]:
        codes = []
        for s in statuses:
            code = self.status_code.get(s)
            if code is None:
                code = self.status_code[s] = len(self.table.statuses)
                self.table.statuses.append(s)
            codes.append(code)
        return np.array(codes, dtype=np.int16)

    def done(self) -> CutTable:
        t = self.table
        for name, dtype in COLUMNS.items():
            if self.chunks[name]:
                t.columns[name] = np.concatenate(self.chunks[name]).astype(dtype, copy=False)
        if self.status_chunks:
            t.status = np.concatenate(self.status_chunks)
            t.classes = np.concatenate(self.class_chunks)
            t.exposed = np.concatenate(self.exposed_chunks)
        self.chunks.clear()
        return t


class Resident:
    """One value kept in memory at a time, by key: what a report reads per drive or per model
    one after the other, so only one of them is in memory however many there are."""

    def __init__(self) -> None:
        self.key: object = None
        self.value: Any = None

    def get(self, key: object, make: Callable[[], Any]) -> Any:
        if self.key is not key:
            self.key, self.value = None, None  # (the old one goes before the new one is made)
            self.value, self.key = make(), key
        return self.value


_TABLES = Resident()  # the spilled run table last read
_DELAYS = Resident()  # the stored delay points last read
_RETURNS = Resident()  # the stored return times last read


def let_go() -> None:
    """Forget the resident table, delay points and return times (read again from their files
    when asked): for a caller done with them, so that what it makes next is not made beside
    them."""
    _TABLES.get(None, lambda: None)
    _DELAYS.get(None, lambda: None)
    _RETURNS.get(None, lambda: None)


class SpillBuilder(TableBuilder):
    """A TableBuilder that appends each chunk's columns to files (raw arrays, one per column)
    instead of keeping them: a drive's cuts are never whole in memory while read."""

    def __init__(self, spill: SpillFolder) -> None:
        super().__init__()
        self.spill, self.stem, self.rows = spill, spill.base(), 0

    def add(
        self, values: Values, statuses: Sequence[str], classes: Sequence[int], exposed: Texts = None
    ) -> None:
        for name, dtype in COLUMNS.items():
            _append(f"{self.stem}.{name}", np.array(values[name], dtype=dtype))
        _append(f"{self.stem}.status", self.status_codes(statuses))
        _append(f"{self.stem}.classes", np.array(classes, dtype=np.int32))
        _append(f"{self.stem}.exposed", self.exposed_codes(exposed, len(statuses)))
        self.rows += len(statuses)

    def spilled(self) -> SpilledCuts:
        # a drive without cycles has empty files
        for name in (*COLUMNS, "status", "classes", "exposed"):
            _append(f"{self.stem}.{name}", np.empty(0, np.int8))
        return SpilledCuts(self.spill, self.stem, self.rows, self.table)


def _append(path: str, values: npt.NDArray[Any]) -> None:
    with open(path, "ab") as out:
        values.tofile(out)


class _ColumnFiles(dict[str, npt.NDArray[Any]]):
    """A table's columns read from their files when first asked for: a pass that reads four
    columns holds four. Listing them (items, values) reads them all."""

    def __init__(self, stem: str) -> None:
        super().__init__()
        self.stem = stem

    def __missing__(self, name: str) -> npt.NDArray[Any]:
        if name not in COLUMNS:
            raise KeyError(name)
        value = self[name] = np.fromfile(f"{self.stem}.{name}", COLUMNS[name])
        return value

    def whole(self) -> dict[str, npt.NDArray[Any]]:
        return {name: self[name] for name in COLUMNS}

    def items(self) -> Any:
        return self.whole().items()

    def values(self) -> Any:
        return self.whole().values()


class SpilledCuts(Sequence[Cut]):
    """A drive's CutTable kept in files of a temporary folder: read back when used, one table
    in memory at a time (`_TABLES`) and of it only the columns read, so a report's memory does
    not grow with the drives' cuts (docs/decisions.md, "A report holds nothing per cut between
    analysis and write"). Reading 30 MB back takes milliseconds, a pass
    over the store's cycle rows seconds."""

    def __init__(self, spill: SpillFolder, stem: str, rows: int, vocabulary: CutTable) -> None:
        self.spill = spill  # keeps the folder while this table may be read
        self.stem, self.rows = stem, rows
        self.statuses, self.class_sets = vocabulary.statuses, vocabulary.class_sets
        self.exposed_sets = vocabulary.exposed_sets

    def table(self) -> CutTable:
        table: CutTable = _TABLES.get(self, self._load)
        return table

    def _load(self) -> CutTable:
        return CutTable(
            _ColumnFiles(self.stem),
            np.fromfile(f"{self.stem}.status", np.int16),
            np.fromfile(f"{self.stem}.classes", np.int32),
            self.statuses,
            self.class_sets,
            np.fromfile(f"{self.stem}.exposed", np.int32),
            self.exposed_sets,
        )

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, index: Any) -> Any:
        return self.table()[index]

    def __iter__(self) -> Iterator[Cut]:
        return iter(self.table())


ROWS_AT_A_TIME = 65_536  # rows of a table's columns read at a time by `column_chunks`
CODES: dict[str, Any] = {"status": np.int16, "classes": np.int32, "exposed": np.int32}


def column_chunks(
    cuts: Iterable[Cut], names: Sequence[str], rows: int | None = None
) -> Iterator[dict[str, npt.NDArray[Any]]]:
    """A table's columns (COLUMNS names, "status", "classes") `rows` (default ROWS_AT_A_TIME)
    rows at a time, in order: a spilled table's read from its files piece by piece (never
    whole in memory), another's sliced. Nothing for a table without rows."""
    rows = rows or ROWS_AT_A_TIME
    if isinstance(cuts, SpilledCuts):
        kinds = {n: np.dtype(CODES.get(n) or COLUMNS[n]) for n in names}
        for start in range(0, cuts.rows, rows):
            count = min(rows, cuts.rows - start)
            yield {
                n: np.fromfile(f"{cuts.stem}.{n}", kind, count, offset=start * kind.itemsize)
                for n, kind in kinds.items()
            }
        return
    t = table_of(cuts)
    coded: dict[str, npt.NDArray[Any]] = {"status": t.status, "classes": t.classes}
    coded["exposed"] = t.exposed
    whole = {n: coded[n] if n in coded else t.columns[n] for n in names}
    for start in range(0, len(t), rows):
        yield {n: v[start : start + rows] for n, v in whole.items()}


def table_of(cuts: Iterable[Cut]) -> CutTable:
    """A CutTable of Cut objects (a dataset built by hand, e.g. in a test)."""
    if isinstance(cuts, CutTable):
        return cuts
    if isinstance(cuts, SpilledCuts):
        return cuts.table()
    loaded = getattr(cuts, "table", None)  # a run known by its aggregates: its rows read now
    if callable(loaded):
        table: CutTable = loaded()
        return table
    builder = TableBuilder()
    cuts = list(cuts)
    if cuts:
        builder.add(
            {k: [getattr(c, k) for c in cuts] for k in COLUMNS},
            [c.status for c in cuts],
            [builder.code_of_classes(frozenset(c.failure_classes)) for c in cuts],
        )
    return builder.done()


@dataclass
class DelayPoint:
    ack_to_cut_ms: float | None
    flush_to_cut_ms: float | None
    cut_delay_ms: float
    failed: bool
    classes: list[str]


@dataclass
class DelayPoints(Sequence[DelayPoint]):
    """A model's cuts, in order: the delays and outcome of each (report.json lists them as
    DelayPoint objects), as columns; `classes` are codes into `class_lists` (0: no failure)."""

    ack_to_cut_ms: FloatArray
    flush_to_cut_ms: FloatArray
    cut_delay_ms: FloatArray
    classes: npt.NDArray[np.int32]
    class_lists: list[list[str]]

    def __len__(self) -> int:
        return len(self.classes)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        code = int(self.classes[index])
        return DelayPoint(
            _optional(float(self.ack_to_cut_ms[index])),
            _optional(float(self.flush_to_cut_ms[index])),
            float(self.cut_delay_ms[index]),
            code != 0,
            list(self.class_lists[code]),
        )

    def __iter__(self) -> Iterator[DelayPoint]:
        return (self[i] for i in range(len(self)))

    @property
    def failed(self) -> npt.NDArray[np.bool_]:
        return self.classes != 0

    def chunks(self) -> Iterator[DelayPoints]:
        """The points in order, a piece at a time (one piece: these)."""
        yield self


class StoredDelayPoints(DelayPoints):
    """A model's DelayPoints made when its columns are read (from its drives' spilled tables),
    one model's in memory at a time (`_DELAYS`): a report holds every model's analysis at once
    but draws and writes them one after the other. Its length and class lists are known
    without reading."""

    def __init__(
        self,
        make: Callable[[], DelayPoints],
        count: int,
        lists: list[list[str]],
        pieces: Callable[[], Iterator[DelayPoints]],
    ):
        # no dataclass fields set: reading one goes to __getattr__, hence to `make`
        self._make, self._count, self._lists, self._pieces = make, count, lists, pieces

    def chunks(self) -> Iterator[DelayPoints]:
        """The points in order, a piece of a run's table at a time, read from its files: a
        model's points are never whole in memory this way."""
        return self._pieces()

    def points(self) -> DelayPoints:
        points: DelayPoints = _DELAYS.get(self, self._make)
        return points

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "class_lists":
            return self._lists
        return getattr(self.points(), name)

    def __len__(self) -> int:
        return self._count


class StoredReturns:
    """A model's return times (ms, cut order; the cuts with status ok that have one) made
    from its drives' spilled tables when read, one model's in memory at a time (`_RETURNS`):
    a report holds every model's analysis at once, never every model's return times (issue
    27). Reads as the numpy array it stands for (len, slices, numpy functions)."""

    def __init__(
        self,
        make: Callable[[], FloatArray],
        count: int,
        pieces: Callable[[], Iterable[FloatArray]] | None = None,
    ) -> None:
        self._make, self._count = make, count
        self._pieces = pieces or (lambda: [self._make()])

    def pieces(self) -> Iterable[FloatArray]:
        """The values in order, a piece at a time (read from the files: none held)."""
        return self._pieces()

    def values(self) -> FloatArray:
        values: FloatArray = _RETURNS.get(self, self._make)
        return values

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        return self.values()[index]

    def __iter__(self) -> Iterator[float]:
        return iter(self.values())

    def __array__(self, dtype: Any = None, copy: Any = None) -> FloatArray:
        values = self.values()
        return values if dtype is None else values.astype(dtype, copy=False)

    def tolist(self) -> list[float]:
        listed: list[float] = self.values().tolist()
        return listed

    def __str__(self) -> str:  # (as the array's: a record dumped with default=str)
        return str(self.values())

    def __repr__(self) -> str:
        return repr(self.values())
