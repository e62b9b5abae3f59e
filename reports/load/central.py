"""The report's dataset read from the fleet's central PostgreSQL (rig/interface/fleet/central/)
instead of SQLite stores: the same `Dataset` (reports/load/dataset.py), so the analysis and every
page are the same. A campaign's source is `central:<station>`; its station reads
`<station>: <board>`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from reports.load import binned
from reports.load.binned import DELAY_BINS_MS
from reports.load.counted import add_counts
from reports.load.cuts import CUT_STATUSES, CutTable, TableBuilder
from reports.load.dataset import (
    CHUNK,
    EXAMPLES_PER_DRIVE,
    ROW_COLUMNS,
    TIMING_COLUMNS,
    CampaignData,
    Dataset,
    DriveData,
    HealthRow,
    decode,
)
from reports.load.run_parts import RunPart, SummarisedCuts
from rig.check import exposure, failures
from rig.check.failures import COUNTER_ANOMALY

Filter = Callable[[dict[str, Any]], bool]
Row = dict[str, Any]


class CentralReads(Protocol):
    """What the report reads from the fleet's central database: reports/ sits below
    rig/interface/fleet/ (docs/decisions.md, "Reports sit between the programs and the
    campaign"), so the fleet's `CentralStore` (rig/interface/fleet/central/reads.py) is handed
    in."""

    @property
    def closed(self) -> bool: ...
    def reopened(self) -> CentralReads: ...
    def close(self) -> None: ...
    def campaign_rows(self) -> list[Row]: ...
    def drive_rows(self) -> list[Row]: ...
    def cut_columns(
        self, station: str, uid: int, channel: int, chunk: int
    ) -> Iterator[list[tuple[Any, ...]]]: ...
    def cut_aggregates(
        self,
        bins_per_e: float,
        floor_ms: float,
        delay_edges: Sequence[float],
        drives: Sequence[tuple[str, int, int]] | None = None,
    ) -> list[Row]: ...
    def cuts_through(self, station: str, uid: int, channel: int, seq: int) -> int: ...
    def timing_of_campaign(self, station: str, uid: int) -> dict[str, float | int | None]: ...
    def drive_class_totals(self, station: str, uid: int, channel: int) -> list[Row]: ...
    def drive_lost_after(self, station: str, uid: int, channel: int) -> list[Row]: ...
    def health_of(self, station: str, uid: int, channel: int) -> list[Row]: ...
    def rail_of(self, station: str, uid: int, channel: int) -> list[Row]: ...
    def endurance_of(self, station: str, uid: int, channel: int) -> list[Row]: ...
    def findings_of(
        self,
        station: str,
        uid: int,
        channel: int,
        *,
        failures_only: bool = False,
        cls: str | None = None,
        limit: int | None = None,
    ) -> list[Row]: ...


EXAMPLE_COLUMNS = (
    *("class", "failure", "lba_first", "lba_count", "expected_gen", "observed_gen"),
    *("expected_op", "observed_op", "detail"),
)


def read(
    central: CentralReads,
    *,
    campaign: Filter | None = None,
    drive: Filter | None = None,
    cut_rows: bool = False,
) -> Dataset:
    """Every replicated campaign (or those `campaign` accepts) and their drives (or those
    `drive` accepts, given a drive row); `cut_rows`: cuts.csv lists their cycles, streamed
    from the server a chunk at a time when it is written (docs/decisions.md, "The central report
    states figures from the server's aggregates")."""
    label = "central"
    data = Dataset(sources=[label], campaigns=[], runs=[])
    campaigns: dict[tuple[str, int], CampaignData] = {}
    for row in central.campaign_rows():
        if campaign is not None and not campaign(row):
            continue
        c = campaign_of(row, label)
        campaigns[(row["station"], row["uid"])] = c
        data.campaigns.append(c)
        data.timing[(c.source, c.campaign_id)] = central.timing_of_campaign(
            row["station"], row["uid"]
        )
    rows = [
        row
        for row in central.drive_rows()
        if (row["station"], row["campaign_uid"]) in campaigns and (drive is None or drive(row))
    ]
    keys = [(r["station"], r["campaign_uid"], r["channel"]) for r in rows]
    aggregates = _aggregates(central, None if campaign is None and drive is None else keys)
    for row in rows:
        owner = campaigns[(row["station"], row["campaign_uid"])]
        run = DriveData(
            owner,
            row["channel"],
            row["channel"],
            row["model"],
            row["serial"],
            row["wwn"],
            row["firmware"],
            row["profile"],
            row["status"],
        )
        key = (row["station"], row["campaign_uid"], row["channel"])
        _fill(central, run, *key)
        run.cuts = _summarised(central, key, aggregates.get(key, []), cut_rows)
        data.runs.append(run)
    return data


def campaign_of(row: Any, label: str = "central") -> CampaignData:
    """A campaign row of the central database as the report's CampaignData."""
    criteria = decode(row["criteria"])
    return CampaignData(
        f"{label}:{row['station']}",
        row["local_id"],
        row["name"],
        f"{row['station']}: {row['board']}",
        row["status"],
        row["started_at"],
        row["ended_at"],
        row["seed"],
        decode_config(row["config"]),
        criteria if isinstance(criteria, dict) else {},
    )


def decode_config(text: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _tables(
    central: CentralReads, key: tuple[str, int, int], per_chunk: bool
) -> Iterator[CutTable]:
    """The drive's cycles as columns, read a chunk at a time (ms computed by the server), with
    the failure classes the station recorded in each: one table, or one per chunk."""
    builder, codes = TableBuilder(), {None: 0}
    for rows in central.cut_columns(*key, CHUNK):
        columns = list(zip(*rows, strict=True))
        values = dict(
            zip(
                ("seq", *ROW_COLUMNS, *TIMING_COLUMNS),
                columns[:1] + columns[2:12] + columns[13:15],
                strict=True,
            )
        )
        for text in set(columns[12]) - codes.keys():
            codes[text] = builder.code_of_classes(frozenset(str(text).split(",")))
        builder.add(values, columns[1], [codes[t] for t in columns[12]])
        if per_chunk:
            yield builder.done()
            builder, codes = TableBuilder(), {None: 0}
    if not per_chunk:
        yield builder.done()


def _aggregates(
    central: CentralReads, keys: list[tuple[str, int, int]] | None
) -> dict[tuple[str, int, int], list[Row]]:
    """The server's aggregates of every drive's cycles (one pass over the cycle table), or of
    those drives' only (`keys`: a campaign's or a model's page), by drive."""
    by_drive: dict[tuple[str, int, int], list[Row]] = {}
    if keys is not None and not keys:
        return by_drive
    edges = [e for e in DELAY_BINS_MS if math.isfinite(e)]
    for r in central.cut_aggregates(binned.BINS_PER_E, binned.FLOOR_MS, edges, keys):
        by_drive.setdefault((r["station"], r["campaign_uid"], r["channel"]), []).append(r)
    return by_drive


def _summarised(
    central: CentralReads, key: tuple[str, int, int], rows: list[Row], cut_rows: bool
) -> Any:
    """A drive's cuts as its aggregates (reports.load.run_parts.SummarisedCuts): the counts, sums
    and place of death of its RunPart, its return-time bins and delay bins (and its rows
    streamed for cuts.csv, `cut_rows`)."""
    part = RunPart(0, {}, [frozenset()], {}, None, 0, 0, 0, 0, 0, {})
    returns, delays = binned.LogHistogram(), binned.DelayCounts()
    first_dead = None
    bins = len(DELAY_BINS_MS) - 1
    for r in rows:
        n = int(r["n"])
        if r["kind"] == "status":
            status, text = r["status"], r["failure_classes"]
            part.statuses[status] = part.statuses.get(status, 0) + n
            part.bytes_written += int(r["bytes_written"] or 0)
            if status not in CUT_STATUSES:
                continue
            classes = frozenset(text.split(",")) if text is not None else frozenset()
            if classes not in part.class_sets:
                part.class_sets.append(classes)
            part.class_counts[classes] = part.class_counts.get(classes, 0) + n
            pair = (classes, exposure.from_text(r.get("exposed")))  # (None: not replicated)
            part.exposure_counts[pair] = part.exposure_counts.get(pair, 0) + n
            part.cuts += n
            part.blocks_checked += int(r["blocks_checked"] or 0)
            part.full_scans += int(r["full_scans"] or 0)
            part.blocks_unchecked += int(r["blocks_unchecked"] or 0)
            if r["first_dead"] is not None:  # (a group per set of classes: the first of all)
                first_dead = min(first_dead or r["first_dead"], r["first_dead"])
        elif r["kind"] == "return" and r["rbin"] is not None:
            returns.add_bin(r["rbin"], n, r["low"], r["high"], r["total"])
        else:
            ack = r["kind"] == "ack"
            k, column = (r["abin"], "ack_to_cut_ms") if ack else (r["fbin"], "flush_to_cut_ms")
            if k is not None:
                delays.add(column, int(k) - 1, bins, n, bool(r["failed"]))
    part.returns = returns.n
    part.class_sets.sort(key=lambda s: (len(s), failures.ordered(s)))  # (not the rows' order)
    if first_dead is not None:
        part.dead_at = central.cuts_through(*key, first_dead)
    return SummarisedCuts(
        part,
        returns,
        delays,
        lambda: _whole(central, key),
        (lambda: _rows_of(central, key, True)) if cut_rows else None,
    )


def _whole(central: CentralReads, key: tuple[str, int, int]) -> CutTable:
    """A drive's cut rows as one table (read to the end: its cursor and any new connection
    closed)."""
    [table] = _rows_of(central, key, False)
    return table


def _rows_of(
    central: CentralReads, key: tuple[str, int, int], per_chunk: bool
) -> Iterator[CutTable]:
    """A drive's cut rows, read when something asks for them one by one (after the read's
    connection was closed, on a new one)."""
    if not central.closed:
        yield from _tables(central, key, per_chunk)
        return
    again = central.reopened()
    try:
        yield from _tables(again, key, per_chunk)
    finally:
        again.close()


def _fill(central: CentralReads, run: DriveData, station: str, uid: int, channel: int) -> None:
    """A drive's figures from the central summaries (never from its finding rows, but the first
    failure findings and the counter anomalies, which the report lists one by one)."""
    for f in central.drive_class_totals(station, uid, channel):
        if f["failure"]:
            run.findings[f["class"]] = run.findings.get(f["class"], 0) + int(f["n"])
            run.blocks[f["class"]] = run.blocks.get(f["class"], 0) + int(f["blocks"] or 0)
        else:
            run.allowed_losses += int(f["n"])
    for r in central.drive_lost_after(station, uid, channel):
        add_counts(
            run.lost_ack if r["since"] == "ack" else run.lost_flush, [(r["ms"], int(r["n"]))]
        )
    # the store's columns of a finding (less its row ids, which are the station's own)
    run.examples = [
        {"cycle": f["seq"], **{k: decode(f[k]) for k in EXAMPLE_COLUMNS}}
        for f in central.findings_of(
            station, uid, channel, failures_only=True, limit=EXAMPLES_PER_DRIVE
        )
    ]
    if any(c == COUNTER_ANOMALY for c in run.findings):  # (listed one by one: few)
        for f in central.findings_of(station, uid, channel, cls=COUNTER_ANOMALY):
            detail = decode(f["detail"])
            if isinstance(detail, dict):
                run.anomalies.append(dict(detail, seq=f["seq"]))
    for h in central.health_of(station, uid, channel):
        fields = decode(h["fields"])
        if isinstance(fields, dict):
            run.health.append(HealthRow(h["after_seq"], h["source"], fields))
    for r in central.rail_of(station, uid, channel):
        samples = decode(r["samples"])
        run.rail.append(
            {
                "seq": r["seq"],
                "hi_us": r["hi_us"],
                "lo_us": r["lo_us"],
                "v0": r["v0"],
                "min_v": r["min_v"],
                "end": r["end_reason"],
                "dt_us": r["sample_dt_us"],
                "samples": samples if isinstance(samples, list) else [],
                "hi_threshold": r["hi_threshold"],
                "lo_threshold": r["lo_threshold"],
            }
        )
    for e in central.endurance_of(station, uid, channel):
        record = dict(e["row"]) if isinstance(e["row"], dict) else {}
        record = {k: decode(v) for k, v in record.items()}
        record["_table"] = "endurance_interval"
        run.intervals.append(record)
