"""Everything a report shows, read from one or more SQLite stores (never from logs or live state).

Stores are opened read-only: a report never migrates or otherwise changes a store, which may come
from another station or from an older rig. Tables and columns are looked up before use, so a store
without, say, health snapshots yields a report whose health section says the data is absent.
Several stores merge: a drive is one physical drive (same model and serial, or WWN) across every
campaign and station it took part in, and the same campaign given twice is refused rather than
counted twice.
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
import tomllib
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from reports.load import cut_shapes
from reports.load.counted import add_counts
from reports.load.cuts import Cut, CutTable, SpillBuilder, TableBuilder
from reports.load.spill_owner import SpillFolder
from reports.load.stored_exposure import StoredExposure
from rig.check.failures import COUNTER_ANOMALY
from rig.errors import UserError
from rig.store import StoreReader, lost_after_ms

EXAMPLES_PER_DRIVE = 20
__all__ = ["Cut", "CutTable"]  # a Cut is read from here too (tests, central)
NOT_DONE = -1  # rig.io.ledger: completion time of a request that never completed


@dataclass
class CampaignData:
    source: str  # the store file
    campaign_id: int
    name: str
    station: str
    status: str
    started_at: float
    ended_at: float | None
    seed: int
    config: dict[str, Any]  # the campaign file, parsed ({} if it no longer parses)
    criteria: dict[str, Any]  # the campaign.criteria column (store v3+), {} where absent


@dataclass
class HealthRow:
    after_seq: int  # the cycle it was read after; 0 = before the first cut
    source: str  # smartctl | nvme-cli | ...
    fields: dict[str, Any]  # the typed snapshot fields (docs/health.md)


@dataclass
class DriveData:
    """One drive in one campaign (a `drive` row)."""

    campaign: CampaignData
    drive_id: int
    channel: int
    model: str
    serial: str
    wwn: str
    firmware: str
    profile: str
    status: str
    cuts: Sequence[Cut] = field(default_factory=CutTable)  # a CutTable as loaded
    findings: dict[str, int] = field(default_factory=dict)  # failure findings per class
    blocks: dict[str, int] = field(default_factory=dict)  # blocks in failure findings per class
    allowed_losses: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # first failure findings
    health: list[HealthRow] = field(default_factory=list)  # snapshots, by after_seq
    anomalies: list[dict[str, Any]] = field(default_factory=list)  # counter_anomaly details
    # lost durable writes per time from their acknowledgement and from their covering flush to
    # the cut (ms, rounded by rig.store.lost_after_ms -> lost writes): millions at scale
    lost_ack: dict[float, int] = field(default_factory=dict)
    lost_flush: dict[float, int] = field(default_factory=dict)
    intervals: list[dict[str, Any]] = field(default_factory=list)  # endurance intervals, if any
    rail: list[dict[str, Any]] = field(default_factory=list)  # rail fall measurements, if any
    # each shaped cut's drawn shape (reports/load/cut_shapes.py); None: its source does not carry
    # them (the central database, not yet: docs/reports.md "Brownout map")
    shapes: cut_shapes.CutShapes | None = None

    @property
    def key(self) -> str:
        """The physical drive: the same drive in several campaigns or stations is one drive."""
        return f"{self.model}|{self.serial}" if self.serial else f"{self.model}|wwn:{self.wwn}"


@dataclass
class Dataset:
    sources: list[str]
    campaigns: list[CampaignData]
    runs: list[DriveData]
    # tables a store holds that this report version does not read, per store
    unread_tables: dict[str, list[str]] = field(default_factory=dict)
    # where the cuts fell against their plan, per (campaign source, id), as a source other than
    # a store file read it (the central database: reports/load/central.py); a store's is read from
    # the file by reports/render/timing.py
    timing: dict[tuple[str, int], dict[str, float | int | None]] = field(default_factory=dict)


# tables this report reads, or that hold nothing a report shows (cycle_start: resume bookkeeping;
# a crashed cycle reaches the report as an `interrupted` cycle row; power_on: each cycle's last
# return is its cycle row's, shown; a recovery burst's power-ons are not shown yet)
KNOWN_TABLES = {
    *("campaign", "drive", "cycle", "finding", "event", "ledger", "lba_state", "health"),
    *("rail_sense", "cycle_start", "finding_total", "lost_after", "cycle_total", "power_on"),
    "exposure_total",  # (rig status's sums; the report counts cycle.exposed itself)
}


def load(paths: Iterable[str]) -> Dataset:
    paths = list(paths)
    if not paths:
        raise UserError("no store given")
    data = Dataset(sources=[], campaigns=[], runs=[])
    seen: dict[tuple[object, ...], str] = {}
    spill = SpillFolder()  # each drive's cut columns wait there, not in memory
    for path in paths:
        db = StoreReader(path)
        try:
            _load_store(db, path, data, seen, spill)
        finally:
            db.close()
    return data


def _parse_config(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _load_store(
    db: StoreReader,
    path: str,
    data: Dataset,
    seen: dict[tuple[object, ...], str],
    spill: SpillFolder,
) -> None:
    data.sources.append(path)
    tables = db.tables()
    extra = sorted(t for t in tables - KNOWN_TABLES if not t.startswith("sqlite_"))
    campaigns: dict[int, CampaignData] = {}
    for row in db.campaigns():
        identity = (row["name"], row["seed"], row["started_at"], row["station"])
        if identity in seen:
            raise UserError(
                f"{path}: campaign {row['name']!r} started at {row['started_at']:.0f} is also in"
                f" {seen[identity]}; give each store once"
            )
        seen[identity] = path
        campaign = CampaignData(
            path,
            row["id"],
            row["name"],
            row["station"],
            row["status"],
            row["started_at"],
            row["ended_at"],
            row["seed"],
            _parse_config(row["config"]),
            _criteria_column(row),
        )
        campaigns[row["id"]] = campaign
        data.campaigns.append(campaign)
    has_ledger = "ledger" in tables
    for row in db.drives():
        run = DriveData(
            campaigns[row["campaign_id"]],
            row["id"],
            row["channel"],
            row["model"],
            row["serial"],
            row["wwn"],
            row["firmware"],
            row["profile"],
            row["status"],
        )
        if "health" in tables and {"after_seq", "fields"} <= db.columns("health"):
            run.health = _load_health(db, run.drive_id)  # (before the cuts: their exposure)
        _load_cuts(db, run, has_ledger, "finding" in tables, spill, row["block_size"])
        data.runs.append(run)
    for table, attr in _optional_tables(db, tables).items():
        extra = [t for t in extra if t != table]
        _attach_rows(db, table, attr, data.runs, path)
    if "finding" in tables:
        _attach_finding_totals(db, [r for r in data.runs if r.campaign.source == path])
    if "rail_sense" in tables:
        _attach_rail_sense(db, [r for r in data.runs if r.campaign.source == path])
    runs = [r for r in data.runs if r.campaign.source == path]
    shapes = cut_shapes.read(db, [r.drive_id for r in runs])
    for run in runs:
        run.shapes = shapes[run.drive_id]
    data.unread_tables[path] = extra


def _criteria_column(row: sqlite3.Row) -> dict[str, Any]:
    if "criteria" not in row.keys():  # noqa: SIM118 (sqlite3.Row)
        return {}
    value = _decode(row["criteria"])
    return value if isinstance(value, dict) else {}


def _load_cuts(
    db: StoreReader,
    run: DriveData,
    has_ledger: bool,
    has_finding: bool,
    spill: SpillFolder,
    bs: int,
) -> None:
    if has_finding:
        run.examples = [
            {k: _decode(f[k]) for k in f.keys()}  # noqa: SIM118 (sqlite3.Row)
            for f in db.failure_examples(run.drive_id, EXAMPLES_PER_DRIVE)
        ]
        run.anomalies = [
            dict(_decode(f["detail"]), seq=f["seq"])
            for f in db.findings_of_class(run.drive_id, COUNTER_ANOMALY)
            if isinstance(_decode(f["detail"]), dict)
        ]
    builder = SpillBuilder(spill)  # each chunk to files: the drive's cuts never whole here
    healthy = {h.after_seq for h in run.health}
    exposure = StoredExposure(db, has_ledger, bs, healthy)
    _cut_table(db, run.drive_id, has_ledger, has_finding, builder, exposure)
    run.cuts = builder.spilled()


CHUNK = 8_192  # cycle rows read at a time: Python objects for one chunk only (~6 MB)
# the per-cut columns of StoreReader.cut_columns, after id, seq and status
ROW_COLUMNS = (
    *("cut_delay_ms", "return_ms", "gone_ms", "ack_to_cut_ms", "flush_to_cut_ms", "started_at"),
    *("bytes_written", "blocks_checked", "full_scan", "blocks_unchecked"),
)
TIMING_COLUMNS = ("realized_delay_ms", "delay_error_ms")  # after them, at the rows' end


def _cut_table(
    db: StoreReader, drive_id: int, has_ledger: bool, has_finding: bool, builder: TableBuilder,
    exposure: StoredExposure | None = None,
) -> None:  # fmt: skip
    """The drive's cycles as columns into `builder`, read a chunk at a time. v8 stores carry the
    delays in the cycle row: a ledger is decoded only for a cycle without them (recorded by an
    older rig)."""
    codes: dict[str | None, int] = {None: 0}
    cursor = db.cut_columns(drive_id, has_finding)
    while rows := cursor.fetchmany(CHUNK):
        columns = list(zip(*rows, strict=True))
        values: dict[str, Sequence[Any]] = dict(
            zip(
                ("seq", *ROW_COLUMNS, *TIMING_COLUMNS),
                columns[1:2] + columns[3:13] + columns[18:20],
                strict=True,
            )
        )
        if has_ledger and any(columns[14]):
            values["ack_to_cut_ms"], values["flush_to_cut_ms"] = _ledger_delays(db, columns)
        for text in set(columns[15]) - codes.keys():
            codes[text] = builder.code_of_classes(frozenset(str(text).split(",")))
        exposed = exposure.of_chunk(columns) if exposure else columns[16]
        builder.add(values, columns[2], [codes[t] for t in columns[15]], exposed)


def _ledger_delays(
    db: StoreReader, columns: list[tuple[Any, ...]]
) -> tuple[list[float | None], list[float | None]]:
    """Ack and flush to cut of a chunk's cycles, from the write log of those without the v8
    delay columns (recorded by an older rig)."""
    ack, flush = list(columns[6]), list(columns[7])
    rows = zip(columns[0], columns[13], columns[14], strict=True)
    for i, (cycle_id, cut_ns, no_delays) in enumerate(rows):
        if no_delays and cut_ns is not None:
            blob = db.ledger_blob(cycle_id)
            if blob is not None:
                ack[i], flush[i] = _last_ack_and_flush(blob, cut_ns)
    return ack, flush


def _load_health(db: StoreReader, drive_id: int) -> list[HealthRow]:
    rows = []
    for h in db.health_of(drive_id):
        fields = _decode(h["fields"])
        if isinstance(fields, dict):
            rows.append(HealthRow(h["after_seq"], h["source"], fields))
    return rows


LEDGER_COLUMNS = ("complete_ns", "status", "flush_complete_ns", "flush_status")
_NPY_HEADER = re.compile(
    rb"'descr':\s*'([<>|]?[a-z]\d+)',\s*'fortran_order':\s*False,\s*'shape':\s*\((\d*),?\)"
)


def _npz_columns(blob: bytes, names: tuple[str, ...]) -> dict[str, npt.NDArray[Any]]:
    """The named 1-D arrays of an .npz, read directly: np.load parses every header with
    ast.literal_eval, which made it most of a report's time over thousands of cuts. Anything
    but a plain 1-D little-endian array goes through np.load."""
    result: dict[str, npt.NDArray[Any]] = {}
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        for name in names:
            data = archive.read(f"{name}.npy")
            major = data[6]
            size = int.from_bytes(data[8:10] if major == 1 else data[8:12], "little")
            start = 10 if major == 1 else 12
            match = _NPY_HEADER.search(data[start : start + size])
            if data[:6] != b"\x93NUMPY" or match is None:
                return dict(np.load(io.BytesIO(blob)))
            dtype = np.dtype(match.group(1).decode())
            count = int(match.group(2) or 1)
            result[name] = np.frombuffer(data, dtype, count, offset=start + size)
    return result


def _last_ack_and_flush(blob: bytes, cut_ns: int) -> tuple[float | None, float | None]:
    """Time from the last acknowledged write and the last completed flush to the cut, from the
    cycle's columnar write log (rig.io.ledger.CycleLog)."""
    try:
        arrays = _npz_columns(blob, LEDGER_COLUMNS)
        done = arrays["complete_ns"]
        ok = (arrays["status"] == 0) & (done != NOT_DONE) & (done < cut_ns)
        f_done = arrays["flush_complete_ns"]
        f_ok = (arrays["flush_status"] == 0) & (f_done != NOT_DONE) & (f_done < cut_ns)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile):
        return None, None  # a ledger this report version cannot read: no delay for this cut
    ack = (cut_ns - int(done[ok].max())) / 1e6 if ok.any() else None
    flush = (cut_ns - int(f_done[f_ok].max())) / 1e6 if f_ok.any() else None
    return ack, flush


def _optional_tables(db: StoreReader, tables: set[str]) -> dict[str, str]:
    """Tables added by later rig versions that this report reads, if the store has them:
    table -> the DriveData list it fills. Each must have a drive_id column."""
    wanted = {
        "endurance_interval": "intervals",
        "interval": "intervals",
    }
    return {
        table: attr
        for table, attr in wanted.items()
        if table in tables and "drive_id" in db.columns(table)
    }


def _attach_finding_totals(db: StoreReader, runs: list[DriveData]) -> None:
    """Findings and blocks per class, allowed losses, and the lost durable writes' times from
    ack and flush to the cut, of every drive: one pass over the findings each (there may be
    tens of millions)."""
    by_id = {r.drive_id: r for r in runs}
    for f in db.finding_totals():
        run = by_id.get(f["drive_id"])
        if run is None:
            continue
        if f["failure"]:
            run.findings[f["class"]] = run.findings.get(f["class"], 0) + f["n"]
            run.blocks[f["class"]] = run.blocks.get(f["class"], 0) + (f["blocks"] or 0)
        else:
            run.allowed_losses += f["n"]
    for drive_id, since, ms, n in db.lost_after_counts():
        run = by_id.get(drive_id)
        if run is not None:
            add_counts(run.lost_ack if since == "ack" else run.lost_flush, [(ms, n)])


def _attach_rail_sense(db: StoreReader, runs: list[DriveData]) -> None:
    """The relay board's rail-sense captures (store v4 `rail_sense`, one row per sensed cycle)."""
    by_id = {r.drive_id: r for r in runs}
    for row in db.rail_sense():
        run = by_id.get(row["drive_id"])
        if run is None:
            continue
        samples = _decode(row["samples"])
        run.rail.append(
            {
                "seq": row["seq"],
                "hi_us": row["hi_us"],
                "lo_us": row["lo_us"],
                "v0": row["v0"],
                "min_v": row["min_v"],
                "end": row["end_reason"],
                "dt_us": row["sample_dt_us"],
                "samples": samples if isinstance(samples, list) else [],
                "hi_threshold": row["hi_threshold"],
                "lo_threshold": row["lo_threshold"],
            }
        )


def _attach_rows(db: StoreReader, table: str, attr: str, runs: list[DriveData], path: str) -> None:
    by_id = {r.drive_id: r for r in runs if r.campaign.source == path}
    for row in db.rows_of(table):
        run = by_id.get(row["drive_id"])
        if run is None:
            continue
        record = {
            k: _decode(row[k])
            for k in row.keys()  # noqa: SIM118 (sqlite3.Row iterates values)
            if k != "drive_id"
        }
        record["_table"] = table
        getattr(run, attr).append(record)


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def decode(value: Any) -> Any:
    """A column that may hold JSON text, decoded (as the store loader decodes it)."""
    return _decode(value)


def count_lost_after(run: DriveData, detail: Any) -> None:
    """A lost durable write finding's times since its ack and flush (its detail), counted into
    the run as a store's `lost_after` rows count them (the same rounding)."""
    detail = _decode(detail)
    if isinstance(detail, dict):
        for key, into in (("ack_to_cut_ns", run.lost_ack), ("flush_to_cut_ns", run.lost_flush)):
            ms = lost_after_ms(detail.get(key))
            if ms is not None:
                into[ms] = into.get(ms, 0) + 1


def merge(parts: Iterable[Dataset]) -> Dataset:
    """Datasets of several sources as one; a campaign found in two of them (a station's store
    given beside the central database it replicated to) is refused rather than counted twice."""
    merged = Dataset(sources=[], campaigns=[], runs=[])
    seen: dict[tuple[object, ...], str] = {}
    for part in parts:
        for campaign in part.campaigns:
            identity = (campaign.name, campaign.seed, campaign.started_at)
            if identity in seen and seen[identity] != campaign.source:
                raise UserError(
                    f"campaign {campaign.name!r} started at {campaign.started_at:.0f} is in"
                    f" {seen[identity]} and in {campaign.source}; give each once"
                )
            seen[identity] = campaign.source
        merged.sources += part.sources
        merged.campaigns += part.campaigns
        merged.runs += part.runs
        merged.unread_tables.update(part.unread_tables)
        merged.timing.update(part.timing)
    return merged
