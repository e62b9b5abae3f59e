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
import os
import re
import sqlite3
import tomllib
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rig.errors import UserError
from rig.failures import COUNTER_ANOMALY, LOST_DURABLE
from rig.store import SCHEMA_VERSION

# Cycle statuses that are power cuts of the drive (a dead drive's last cut counts: it failed).
CUT_STATUSES = ("ok", "dead")
EXAMPLES_PER_DRIVE = 20
NOT_DONE = -1  # rig.ledger: completion time of a request that never completed


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

    @property
    def is_cut(self) -> bool:
        return self.status in CUT_STATUSES

    @property
    def failed(self) -> bool:
        return bool(self.failure_classes)


@dataclass
class Campaign:
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
class DriveRun:
    """One drive in one campaign (a `drive` row)."""

    campaign: Campaign
    drive_id: int
    channel: int
    model: str
    serial: str
    wwn: str
    firmware: str
    profile: str
    status: str
    cuts: list[Cut] = field(default_factory=list)
    findings: dict[str, int] = field(default_factory=dict)  # failure findings per class
    blocks: dict[str, int] = field(default_factory=dict)  # blocks in failure findings per class
    allowed_losses: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # first failure findings
    health: list[HealthRow] = field(default_factory=list)  # snapshots, by after_seq
    anomalies: list[dict[str, Any]] = field(default_factory=list)  # counter_anomaly details
    # per lost durable write: ms from its acknowledgement and from its covering flush to the cut
    lost_after: list[tuple[float | None, float | None]] = field(default_factory=list)
    intervals: list[dict[str, Any]] = field(default_factory=list)  # endurance intervals, if any
    rail: list[dict[str, Any]] = field(default_factory=list)  # rail fall measurements, if any

    @property
    def key(self) -> str:
        """The physical drive: the same drive in several campaigns or stations is one drive."""
        return f"{self.model}|{self.serial}" if self.serial else f"{self.model}|wwn:{self.wwn}"


@dataclass
class Dataset:
    sources: list[str]
    campaigns: list[Campaign]
    runs: list[DriveRun]
    # tables a store holds that this report version does not read, per store
    unread_tables: dict[str, list[str]] = field(default_factory=dict)


# tables this report reads, or that hold nothing a report shows (cycle_start: resume bookkeeping;
# a crashed cycle reaches the report as an `interrupted` cycle row)
KNOWN_TABLES = {
    *("campaign", "drive", "cycle", "finding", "event", "ledger", "lba_state", "health"),
    *("rail_sense", "cycle_start"),
}


def load(paths: Iterable[str]) -> Dataset:
    paths = list(paths)
    if not paths:
        raise UserError("no store given")
    data = Dataset(sources=[], campaigns=[], runs=[])
    seen: dict[tuple[object, ...], str] = {}
    for path in paths:
        db = _open_read_only(path)
        try:
            _load_store(db, path, data, seen)
        finally:
            db.close()
    return data


def _open_read_only(path: str) -> sqlite3.Connection:
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such store")
    try:
        db = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = _tables(db)
    except sqlite3.DatabaseError as error:
        raise UserError(f"{path}: not a rig store ({error})") from error
    if version > SCHEMA_VERSION:
        db.close()
        raise UserError(f"{path}: store has schema v{version}, newer than this rig")
    if not {"campaign", "drive", "cycle"} <= tables:
        db.close()
        raise UserError(f"{path}: not a rig store (no campaign, drive and cycle tables)")
    return db


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f'PRAGMA table_info("{table}")')}


def _parse_config(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _load_store(
    db: sqlite3.Connection, path: str, data: Dataset, seen: dict[tuple[object, ...], str]
) -> None:
    data.sources.append(path)
    tables = _tables(db)
    extra = sorted(t for t in tables - KNOWN_TABLES if not t.startswith("sqlite_"))
    campaigns: dict[int, Campaign] = {}
    for row in db.execute("SELECT * FROM campaign ORDER BY id"):
        identity = (row["name"], row["seed"], row["started_at"], row["station"])
        if identity in seen:
            raise UserError(
                f"{path}: campaign {row['name']!r} started at {row['started_at']:.0f} is also in"
                f" {seen[identity]}; give each store once"
            )
        seen[identity] = path
        campaign = Campaign(
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
    for row in db.execute("SELECT * FROM drive ORDER BY campaign_id, channel"):
        run = DriveRun(
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
        _load_cuts(db, run, has_ledger, "finding" in tables)
        if "health" in tables and {"after_seq", "fields"} <= _columns(db, "health"):
            run.health = _load_health(db, run.drive_id)
        data.runs.append(run)
    for table, attr in _optional_tables(db, tables).items():
        extra = [t for t in extra if t != table]
        _attach_rows(db, table, attr, data.runs, path)
    if "rail_sense" in tables:
        _attach_rail_sense(db, [r for r in data.runs if r.campaign.source == path])
    data.unread_tables[path] = extra


def _criteria_column(row: sqlite3.Row) -> dict[str, Any]:
    if "criteria" not in row.keys():  # noqa: SIM118 (sqlite3.Row)
        return {}
    value = _decode(row["criteria"])
    return value if isinstance(value, dict) else {}


def _load_cuts(db: sqlite3.Connection, run: DriveRun, has_ledger: bool, has_finding: bool) -> None:
    classes: dict[int, set[str]] = {}
    if has_finding:
        for f in db.execute(
            "SELECT f.cycle_id, f.class, f.failure, COUNT(*) AS n, SUM(f.lba_count) AS blocks"
            " FROM finding f JOIN cycle c ON c.id = f.cycle_id WHERE c.drive_id = ?"
            " GROUP BY f.cycle_id, f.class, f.failure",
            (run.drive_id,),
        ):
            if f["failure"]:
                classes.setdefault(f["cycle_id"], set()).add(f["class"])
                run.findings[f["class"]] = run.findings.get(f["class"], 0) + f["n"]
                run.blocks[f["class"]] = run.blocks.get(f["class"], 0) + (f["blocks"] or 0)
            else:
                run.allowed_losses += f["n"]
        run.examples = [
            {k: _decode(f[k]) for k in f.keys()}  # noqa: SIM118 (sqlite3.Row)
            for f in db.execute(
                "SELECT c.seq AS cycle, f.* FROM finding f JOIN cycle c ON c.id = f.cycle_id"
                " WHERE c.drive_id = ? AND f.failure = 1 ORDER BY f.id LIMIT ?",
                (run.drive_id, EXAMPLES_PER_DRIVE),
            )
        ]
        for f in db.execute(
            "SELECT f.detail FROM finding f JOIN cycle c ON c.id = f.cycle_id"
            " WHERE c.drive_id = ? AND f.class = ? AND f.failure = 1",
            (run.drive_id, LOST_DURABLE),
        ):
            detail = _decode(f["detail"])
            if isinstance(detail, dict):
                run.lost_after.append(
                    (
                        _ns_to_ms(detail.get("ack_to_cut_ns")),
                        _ns_to_ms(detail.get("flush_to_cut_ns")),
                    )
                )
        run.anomalies = [
            dict(_decode(f["detail"]), seq=f["seq"])
            for f in db.execute(
                "SELECT c.seq, f.detail FROM finding f JOIN cycle c ON c.id = f.cycle_id"
                " WHERE c.drive_id = ? AND f.class = ? ORDER BY c.seq, f.id",
                (run.drive_id, COUNTER_ANOMALY),
            )
            if isinstance(_decode(f["detail"]), dict)
        ]
    # v8 stores carry the delays in the cycle row: the ledger is read only for cycles without
    # them (recorded by an older rig), so a report over millions of cuts skips the blobs
    has_delays = "last_ack_to_cut_ns" in _columns(db, "cycle")
    ledger = (
        "CASE WHEN c.last_ack_to_cut_ns IS NULL THEN l.writes END" if has_delays else "l.writes"
    )
    ledger_sql = (
        f"SELECT c.*, {ledger} AS ledger FROM cycle c LEFT JOIN ledger l ON l.cycle_id = c.id"
        if has_ledger
        else "SELECT c.*, NULL AS ledger FROM cycle c"
    )
    for c in db.execute(f"{ledger_sql} WHERE c.drive_id = ? ORDER BY c.seq", (run.drive_id,)):
        cut_ns = c["cut_ns"]
        ack_ms = flush_ms = None
        if has_delays and c["last_ack_to_cut_ns"] is not None:
            ack_ms = _delay_ms(c["last_ack_to_cut_ns"])
            flush_ms = _delay_ms(c["last_flush_to_cut_ns"])
        elif c["ledger"] is not None and cut_ns is not None:
            ack_ms, flush_ms = _last_ack_and_flush(c["ledger"], cut_ns)
        run.cuts.append(
            Cut(
                seq=c["seq"],
                status=c["status"],
                cut_delay_ms=c["cut_delay_ns"] / 1e6,
                failure_classes=frozenset(classes.get(c["id"], ())),
                return_ms=_ms(c["back_ns"], cut_ns),
                gone_ms=_ms(c["gone_ns"], cut_ns),
                ack_to_cut_ms=ack_ms,
                flush_to_cut_ms=flush_ms,
                started_at=c["started_at"],
                bytes_written=c["bytes_written"],
                blocks_checked=c["blocks_checked"],
                full_scan=bool(c["full_scan"]) if "full_scan" in c.keys() else False,  # noqa: SIM118
                blocks_unchecked=c["blocks_unchecked"] if "blocks_unchecked" in c.keys() else 0,  # noqa: SIM118
            )
        )


def _load_health(db: sqlite3.Connection, drive_id: int) -> list[HealthRow]:
    rows = []
    for h in db.execute(
        "SELECT after_seq, source, fields FROM health WHERE drive_id = ? ORDER BY after_seq",
        (drive_id,),
    ):
        fields = _decode(h["fields"])
        if isinstance(fields, dict):
            rows.append(HealthRow(h["after_seq"], h["source"], fields))
    return rows


def _ns_to_ms(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value) / 1e6
    return None


def _ms(later_ns: int | None, cut_ns: int | None) -> float | None:
    if later_ns is None or cut_ns is None or later_ns < cut_ns:
        return None
    return (later_ns - cut_ns) / 1e6


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


def _delay_ms(ns: int | None) -> float | None:
    """A v8 delay column: -1 (nothing before the cut) and NULL read as no delay."""
    return ns / 1e6 if ns is not None and ns >= 0 else None


def _last_ack_and_flush(blob: bytes, cut_ns: int) -> tuple[float | None, float | None]:
    """Time from the last acknowledged write and the last completed flush to the cut, from the
    cycle's columnar write log (rig.ledger.CycleLog)."""
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


def _optional_tables(db: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    """Tables added by later rig versions that this report reads, if the store has them:
    table -> the DriveRun list it fills. Each must have a drive_id column."""
    wanted = {
        "endurance_interval": "intervals",
        "interval": "intervals",
    }
    return {
        table: attr
        for table, attr in wanted.items()
        if table in tables and "drive_id" in _columns(db, table)
    }


def _attach_rail_sense(db: sqlite3.Connection, runs: list[DriveRun]) -> None:
    """The relay board's rail-sense captures (store v4 `rail_sense`, one row per sensed cycle)."""
    by_id = {r.drive_id: r for r in runs}
    for row in db.execute(
        "SELECT c.drive_id, c.seq, r.* FROM rail_sense r JOIN cycle c ON c.id = r.cycle_id"
        " ORDER BY c.drive_id, c.seq"
    ):
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


def _attach_rows(
    db: sqlite3.Connection, table: str, attr: str, runs: list[DriveRun], path: str
) -> None:
    by_id = {r.drive_id: r for r in runs if r.campaign.source == path}
    for row in db.execute(f'SELECT * FROM "{table}" ORDER BY rowid'):
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


# -- for readers of other sources (reports/central.py: the fleet's PostgreSQL) ------------------


def cut_from_row(c: Any, classes: frozenset[str]) -> Cut:
    """A cut from a cycle row that has the v8 delay columns (any mapping of the cycle table's
    columns), with the failure classes its findings showed."""
    cut_ns = c["cut_ns"]
    return Cut(
        seq=c["seq"],
        status=c["status"],
        cut_delay_ms=c["cut_delay_ns"] / 1e6,
        failure_classes=classes,
        return_ms=_ms(c["back_ns"], cut_ns),
        gone_ms=_ms(c["gone_ns"], cut_ns),
        ack_to_cut_ms=_delay_ms(c["last_ack_to_cut_ns"]),
        flush_to_cut_ms=_delay_ms(c["last_flush_to_cut_ns"]),
        started_at=c["started_at"],
        bytes_written=c["bytes_written"],
        blocks_checked=c["blocks_checked"],
        full_scan=bool(c["full_scan"]),
    )


def decode(value: Any) -> Any:
    """A column that may hold JSON text, decoded (as the store loader decodes it)."""
    return _decode(value)


def lost_after(detail: Any) -> tuple[float | None, float | None] | None:
    """(ack, flush) to cut in ms from a lost durable write finding's detail."""
    detail = _decode(detail)
    if not isinstance(detail, dict):
        return None
    return _ns_to_ms(detail.get("ack_to_cut_ns")), _ns_to_ms(detail.get("flush_to_cut_ns"))


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
    return merged
