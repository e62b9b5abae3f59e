"""The campaign's own writes and reads beside the record phase (rig/campaign/recording.py,
campaign/endurance/endurance.py, campaign/resume.py): criteria, begun cycles, endurance intervals,
resume reads."""

from __future__ import annotations

import json
import sqlite3
import zlib
from dataclasses import asdict
from typing import Any

from rig.store.connection import StoreConnection, save_lba_state
from rig.store.rows import IntervalRow


class CampaignRows(StoreConnection):
    """The campaign's rows beside the record phase: criteria, begun cycles, endurance, resume."""

    def set_criteria(self, campaign_id: int, criteria: dict[str, Any]) -> None:
        """The campaign's pass/fail criteria, as the report judges them."""
        with self.transaction() as db:
            db.execute(
                "UPDATE campaign SET criteria = ? WHERE id = ?",
                (json.dumps(criteria, sort_keys=True), campaign_id),
            )

    def begin_cycle(self, drive_id: int, seq: int, started_at: float, cut_delay_ns: int) -> None:
        """Written before any I/O of a cycle: a resume finds a cycle begun and never recorded."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO cycle_start (drive_id, seq, started_at, cut_delay_ns)"
                " VALUES (?,?,?,?)",
                (drive_id, seq, started_at, cut_delay_ns),
            )

    def has_health(self, drive_id: int, after_seq: int) -> bool:
        """Whether a health snapshot taken after cycle `after_seq` is stored."""
        rows = self.query(
            "SELECT 1 FROM health WHERE drive_id = ? AND after_seq = ?", (drive_id, after_seq)
        )
        return bool(rows)

    def endurance_so_far(self, drive_id: int) -> tuple[int, int, list[float]]:
        """A drive's last endurance interval number, its host bytes written so far, and the
        throughput of every write interval in order (an endurance run continues from them)."""
        last = self.query(
            "SELECT COALESCE(MAX(seq), 0) AS seq, COALESCE(MAX(host_bytes_total), 0) AS bytes"
            " FROM endurance_interval WHERE drive_id = ?",
            (drive_id,),
        )[0]
        rows = self.query(
            "SELECT mb_per_s FROM endurance_interval WHERE drive_id = ? AND kind = 'write'"
            " ORDER BY seq",
            (drive_id,),
        )
        return int(last["seq"]), int(last["bytes"]), [float(r["mb_per_s"]) for r in rows]

    def precondition_passes_done(self, drive_id: int) -> int:
        """A drive's preconditioning passes recorded as complete (a pass a stop cut short is
        recorded with `complete: false`; one a kill cut short is not recorded at all)."""
        rows = self.query(
            "SELECT detail FROM endurance_interval WHERE drive_id = ? AND kind = 'precondition'",
            (drive_id,),
        )
        return sum(bool(json.loads(r["detail"]).get("complete", True)) for r in rows)

    def endurance_details(self, drive_id: int) -> list[dict[str, Any]]:
        """The `detail` of every write interval of a drive, in order (its PTS round figures:
        a resumed endurance run rebuilds its steady-state bookkeeping from them)."""
        rows = self.query(
            "SELECT detail FROM endurance_interval WHERE drive_id = ? AND kind = 'write'"
            " ORDER BY seq",
            (drive_id,),
        )
        return [json.loads(r["detail"]) for r in rows]

    def record_interval(self, row: IntervalRow, after_cycle: int, lba_state: bytes) -> None:
        """One endurance interval and the expected state after it, atomically (a resume
        continues from that state)."""
        values = asdict(row)
        values["detail"] = json.dumps(row.detail, sort_keys=True)
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO endurance_interval ({', '.join(values)})"
                f" VALUES ({', '.join('?' * len(values))})",
                tuple(values.values()),
            )
            save_lba_state(db, row.drive_id, after_cycle, lba_state)

    def record_resume_scan(
        self, drive_id: int, host_ns: int, detail: dict[str, Any], after_cycle: int, state: bytes
    ) -> None:
        """A resume's read-back of a drive with no interrupted cycle: its event and the state
        rebuilt from it, atomically."""
        with self.transaction() as db:
            db.execute(
                "INSERT INTO event (drive_id, host_ns, kind, detail) VALUES (?,?,?,?)",
                (drive_id, host_ns, "resume_scan", json.dumps(detail, sort_keys=True)),
            )
            save_lba_state(db, drive_id, after_cycle, state)

    def mark_resumed(self, campaign_id: int) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE campaign SET status = 'running', ended_at = NULL, resumes = resumes + 1"
                " WHERE id = ?",
                (campaign_id,),
            )

    def drive_on_channel(self, campaign_id: int, channel: int) -> sqlite3.Row | None:
        rows = self.query(
            "SELECT * FROM drive WHERE campaign_id = ? AND channel = ?", (campaign_id, channel)
        )
        return rows[0] if rows else None

    def lba_state_of(self, drive_id: int) -> bytes | None:
        """The drive's expected state as last stored, if any."""
        rows = self.query("SELECT state FROM lba_state WHERE drive_id = ?", (drive_id,))
        return bytes(rows[0]["state"]) if rows else None

    def cycle_totals(self, drive_id: int) -> sqlite3.Row:
        """Per drive: the last recorded seq, the most writes of a cycle, cycles that count
        (all but interrupted ones), rig errors, cycles with failures, time spent in cycles."""
        return self.query(
            "SELECT COALESCE(MAX(seq), 0) AS last, COALESCE(MAX(writes), 0) AS most,"
            " SUM(status != 'interrupted') AS counted, SUM(status = 'error') AS errors,"
            " SUM(status != 'interrupted' AND failures > 0) AS failing,"
            " COALESCE(SUM(CASE WHEN status != 'interrupted' THEN ended_at - started_at END), 0)"
            " AS elapsed FROM cycle WHERE drive_id = ?",
            (drive_id,),
        )[0]

    def cut_outcomes(self, campaign_id: int) -> list[sqlite3.Row]:
        """Every cycle of the campaign in the order it was recorded: (channel, model, status,
        failure_classes, exposed), for a resumed sequential plan (rig/campaign/settle.py)."""
        return self.query(
            "SELECT d.channel, d.model, c.status, c.failure_classes, c.exposed FROM cycle c"
            " JOIN drive d ON d.id = c.drive_id WHERE d.campaign_id = ? ORDER BY c.id",
            (campaign_id,),
        )

    def last_begun_after(self, drive_id: int, seq: int) -> sqlite3.Row | None:
        """(seq, started_at, cut_delay_ns) of the last cycle begun after `seq`, if any."""
        rows = self.query(
            "SELECT seq, started_at, cut_delay_ns FROM cycle_start WHERE drive_id = ? AND seq > ?"
            " ORDER BY seq DESC LIMIT 1",
            (drive_id, seq),
        )
        return rows[0] if rows else None

    def health_raw(self, health_id: int) -> str:
        row = self.query("SELECT raw FROM health WHERE id = ?", (health_id,))
        return zlib.decompress(row[0]["raw"]).decode() if row else ""
