"""The record phase's writes: campaigns, drives, cycles with their findings, events, ledger and
rail-sense capture, health snapshots."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rig.check import failures
from rig.errors import UserError
from rig.store import cycle_sums, exposure_fill
from rig.store.connection import StoreConnection, save_lba_state
from rig.store.rows import CycleRow, PowerOnRow, RailSenseRow
from rig.store.schema import new_media_id
from rig.store.totals import CycleTotals, classes_text, rebuild


class RecordWrites(StoreConnection):
    """The record phase's writes (rig/campaign/recording.py)."""

    def new_campaign(self, name: str, config: str, seed: int, station: str) -> int:
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO campaign (name, config, seed, station, started_at, media_id)"
                " VALUES (?,?,?,?,?,?)",
                (name, config, seed, station, time.time(), new_media_id()),
            )
            return int(cursor.lastrowid or 0)

    def media_id(self, campaign_id: int) -> int:
        """The campaign id stored in every record header (docs/record-format.md)."""
        rows = self.query("SELECT media_id FROM campaign WHERE id = ?", (campaign_id,))
        if not rows or rows[0]["media_id"] is None:
            raise UserError(f"store has no campaign {campaign_id}")
        return int(rows[0]["media_id"])

    def end_campaign(self, campaign_id: int, status: str, power_not_safe: str = "") -> None:
        """The campaign's end; `power_not_safe`: the power switch's error when it could not
        be brought to its safe state at the end, kept as a `power_not_safe` event beside it."""
        with self.transaction() as db:
            db.execute(
                "UPDATE campaign SET ended_at = ?, status = ? WHERE id = ?",
                (time.time(), status, campaign_id),
            )
            if power_not_safe:
                detail = {"campaign_id": campaign_id, "error": power_not_safe}
                db.execute(
                    "INSERT INTO event (drive_id, host_ns, kind, detail) VALUES (?,?,?,?)",
                    (None, time.monotonic_ns(), "power_not_safe", json.dumps(detail)),
                )

    def add_drive(
        self,
        campaign_id: int,
        channel: int,
        identity: dict[str, str],
        size_bytes: int,
        block_size: int,
        region: tuple[int, int],
        profile: str = "",
    ) -> int:
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO drive (campaign_id, channel, model, serial, wwn, firmware, size_bytes,"
                " block_size, region_first_lba, region_blocks, profile)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    campaign_id,
                    channel,
                    identity["model"],
                    identity["serial"],
                    identity["wwn"],
                    identity["firmware"],
                    size_bytes,
                    block_size,
                    region[0],
                    region[1],
                    profile,
                ),
            )
            return int(cursor.lastrowid or 0)

    def set_drive_status(self, drive_id: int, status: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE drive SET status = ? WHERE id = ?", (status, drive_id))

    def record_cycle(
        self,
        row: CycleRow,
        findings: list[dict[str, Any]],
        events: list[tuple[int, str, dict[str, Any]]],
        ledger: bytes | None,
        lba_state: bytes | None,
        rail_sense: RailSenseRow | None = None,
        power_ons: Sequence[PowerOnRow] = (),
    ) -> int:
        """The record phase: the cycle, its findings, events, ledger, LBA state, rail-sense
        capture and power-ons, atomically, with the findings' share of the summaries
        (rig/store/totals.py)."""
        columns = [name for name in CycleRow.__dataclass_fields__]
        values = [getattr(row, name) for name in columns]
        counts = CycleTotals()
        rows = []
        for f in findings:
            failure = int(failures.is_failure(f["cls"]))  # KeyError: a class not in the table
            counts.add_finding(f, failure)
            rows.append(
                (
                    f["cls"],
                    failure,
                    f["lba_first"],
                    f["lba_count"],
                    f["expected_gen"],
                    f["observed_gen"],
                    f["expected_op"],
                    f["observed_op"],
                    json.dumps(f["detail"], sort_keys=True),
                )
            )
        classes = classes_text(c for c, failure in counts.totals if failure)
        with self.transaction() as db:
            cursor = db.execute(
                f"INSERT INTO cycle ({', '.join(columns)}, failure_classes, ended_at)"
                f" VALUES ({', '.join('?' * len(columns))}, ?, ?)",
                (*values, classes, time.time()),
            )
            cycle_id = int(cursor.lastrowid or 0)
            cycle_sums.add_cycle(db, cycle_id)
            if row.exposed is not None and row.status in ("ok", "dead"):  # (a cut)
                exposure_fill.add(db, row.drive_id, row.exposed, classes, 1)
            db.executemany(
                "INSERT INTO finding (cycle_id, class, failure, lba_first, lba_count, expected_gen,"
                " observed_gen, expected_op, observed_op, detail) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(cycle_id, *r) for r in rows],
            )
            counts.write(db, row.drive_id)
            db.executemany(
                "INSERT INTO event (drive_id, cycle_id, host_ns, kind, detail) VALUES (?,?,?,?,?)",
                [
                    (row.drive_id, cycle_id, ns, kind, json.dumps(detail, sort_keys=True))
                    for ns, kind, detail in events
                ],
            )
            if ledger is not None:
                db.execute(
                    "INSERT INTO ledger (cycle_id, writes) VALUES (?, ?)", (cycle_id, ledger)
                )
            if lba_state is not None:
                save_lba_state(db, row.drive_id, row.seq, lba_state)
            if rail_sense is not None:
                rail = asdict(rail_sense)
                rail["samples"] = json.dumps(list(rail_sense.samples))
                db.execute(
                    f"INSERT INTO rail_sense (cycle_id, {', '.join(rail)})"
                    f" VALUES (?, {', '.join('?' * len(rail))})",
                    (cycle_id, *rail.values()),
                )
            db.executemany(
                "INSERT INTO power_on (cycle_id, n, on_ns, back_ns, ready_ns, cut_ns,"
                " state_at_cut) VALUES (?,?,?,?,?,?,?)",
                [(cycle_id, *p) for p in power_ons],
            )
            return cycle_id

    def rebuild_summaries(self, title: str | None = None) -> None:
        """The v11 and v12 summaries made again from every finding and cycle row, as the
        migrations make them (rig/store/totals.py, cycle_sums.py): for a store whose rows were
        not all written here (the scale bench copies cycle and finding rows by SQL). `title`:
        show progress on stderr."""
        with self.transaction() as db:
            rebuild(db, title)
            cycle_sums.rebuild(db, title and f"{title} (cycle sums)")

    def add_event(
        self, drive_id: int | None, host_ns: int, kind: str, detail: dict[str, Any]
    ) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO event (drive_id, host_ns, kind, detail) VALUES (?,?,?,?)",
                (drive_id, host_ns, kind, json.dumps(detail, sort_keys=True)),
            )

    def add_health(
        self,
        drive_id: int,
        after_seq: int,
        host_ns: int,
        source: str,
        fields: dict[str, Any],
        raw: str,
    ) -> None:
        """One health snapshot; `raw` is kept compressed (read it with `health_raw`).

        Never fails on what a health parser returns: numbers too wide for JSON are kept as hex
        text, other values as their text, and raw text that is not valid Unicode (a lone
        surrogate) is kept with backslash escapes.
        """
        with self.transaction() as db:
            db.execute(
                "INSERT INTO health (drive_id, after_seq, host_ns, source, fields, raw)"
                " VALUES (?,?,?,?,?,?)",
                (
                    drive_id,
                    after_seq,
                    host_ns,
                    source,
                    json.dumps(_json_safe(fields), sort_keys=True, default=str),
                    zlib.compress(raw.encode("utf-8", errors="backslashreplace"), 6),
                ),
            )


def _json_safe(value: Any) -> Any:
    """`value` with every int that JSON text cannot carry safely (beyond 128 bits: Python
    refuses to print ints over 4,300 digits) as hex text."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >> 128:
        return hex(value)
    return value
