"""A drive's cut columns spilled to files (reports.load.cuts.SpillBuilder / SpilledCuts) read
back as the table an in-memory builder makes of the same chunks, one drive's table in memory at a
time, and the temporary folder goes when nothing refers to it."""

from __future__ import annotations

import gc
import math
import os
import random
from typing import Any

import numpy as np

from reports.load import cuts
from reports.load.cuts import (
    COLUMNS,
    OPTIONAL,
    CutTable,
    SpillBuilder,
    SpillFolder,
    TableBuilder,
    table_of,
)


def _chunk(rng: random.Random, rows: int, start: int) -> tuple[dict[str, list[Any]], list[str]]:
    values: dict[str, list[Any]] = {}
    for name, dtype in COLUMNS.items():
        if name == "seq":
            values[name] = list(range(start, start + rows))
        elif name in OPTIONAL:
            values[name] = [
                None if rng.random() < 0.2 else rng.uniform(0, 900) for _ in range(rows)
            ]
        elif dtype is np.float64:
            values[name] = [rng.uniform(0, 900) for _ in range(rows)]
        elif dtype is np.bool_:
            values[name] = [rng.random() < 0.5 for _ in range(rows)]
        else:
            values[name] = [rng.randrange(1 << 40) for _ in range(rows)]
    statuses = [rng.choice(("ok", "ok", "dead", "error", "interrupted")) for _ in range(rows)]
    return values, statuses


def _fill(builder: TableBuilder, seed: int, chunks: list[int]) -> None:
    rng = random.Random(seed)
    sets = [frozenset(), frozenset({"lost_durable_write"}), frozenset({"torn_write", "dead"})]
    start = 1
    for rows in chunks:
        values, statuses = _chunk(rng, rows, start)
        codes = [builder.code_of_classes(rng.choice(sets)) for _ in range(rows)]
        builder.add(values, statuses, codes)
        start += rows


def _same(a: CutTable, b: CutTable) -> None:
    assert len(a) == len(b) and a.statuses == b.statuses and a.class_sets == b.class_sets
    assert np.array_equal(a.status, b.status) and np.array_equal(a.classes, b.classes)
    for name in COLUMNS:
        assert a.columns[name].dtype == b.columns[name].dtype
        assert np.array_equal(a.columns[name], b.columns[name], equal_nan=True), name
    assert list(a)[-3:] == list(b)[-3:]  # as Cut objects too (NaN read as None)


def test_a_spilled_table_reads_back_as_the_table_in_memory() -> None:
    spill = SpillFolder()
    for seed, chunks in ((1, [700, 1, 300]), (2, [1]), (3, [])):
        in_memory, spilling = TableBuilder(), SpillBuilder(spill)
        _fill(in_memory, seed, chunks)
        _fill(spilling, seed, chunks)
        spilled = spilling.spilled()
        assert len(spilled) == sum(chunks)
        _same(table_of(spilled), in_memory.done())
        if chunks:
            cut = spilled[len(spilled) - 1]
            assert cut.return_ms is None or not math.isnan(cut.return_ms)


def test_one_drive_table_is_in_memory_at_a_time_and_only_the_columns_read() -> None:
    spill = SpillFolder()
    tables = []
    for seed in (4, 5):
        builder = SpillBuilder(spill)
        _fill(builder, seed, [500])
        tables.append(builder.spilled())
    first = tables[0].table()
    assert set(first.columns) == set()  # nothing read yet: no column in memory
    first.columns["return_ms"]
    assert set(first.columns) == {"return_ms"}
    assert tables[0].table() is first  # read again: the same arrays
    second = tables[1].table()
    assert tables[1].table() is second and second is not first  # the first is let go
    assert tables[0].table() is not first  # and read back from its files when asked again


def test_the_spill_folder_goes_with_the_last_table_that_refers_to_it() -> None:
    spill = SpillFolder()
    builder = SpillBuilder(spill)
    _fill(builder, 6, [10])
    spilled = builder.spilled()
    folder = spill.folder.name
    del spill, builder
    gc.collect()
    assert os.path.isdir(folder) and len(spilled) == 10
    cuts.let_go()  # (the resident slot may hold it)
    del spilled
    gc.collect()
    assert not os.path.exists(folder)
