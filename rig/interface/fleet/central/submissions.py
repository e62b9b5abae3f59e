"""Submissions and their drive claims: what dispatch writes, and what a station's agent reads and
reports of the campaigns submitted to it (with its heartbeat and inventory)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg

from rig.errors import UserError
from rig.interface.fleet.central.connection import CentralConnection, Row

LIVE = ("queued", "running")  # submission states that hold their drives' claims


def drive_key(model: str, serial: str, wwn: str) -> str:
    """A physical drive across the fleet: its WWN where it has one, else model and serial."""
    from rig.drive.identity import normalise_wwn

    return f"wwn:{normalise_wwn(wwn)}" if wwn else f"sn:{model}|{serial}"


class AgentQueries(CentralConnection):
    """What a station's agent reads and writes: its heartbeat, inventory and submissions."""

    def my_station(self) -> str:
        row = self._one("SELECT fleet.my_station() AS name")
        if not row or not row["name"]:
            raise UserError("this database role is no station's (rig fleet add-station)")
        return str(row["name"])

    def heartbeat(
        self,
        station: str,
        agent: str,
        *,
        interval_s: float = 5.0,
        kind: str = "",
        recorded: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        """The agent is alive, beats every `interval_s` (the view says stale after a few missed
        beats), runs stations of `kind`; `recorded`: per live submission, the cycle rows its
        store holds and its cycles less interrupted ones (progress as far as the centre knows)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE fleet.station SET last_seen = now(), agent = %s, heartbeat_s = %s,"
                " kind = %s WHERE name = %s",
                (agent, interval_s, kind, station),
            )
            with db.cursor() as cur:
                cur.executemany(
                    "UPDATE fleet.submission SET recorded_rows = %s, recorded_cycles = %s,"
                    " recorded_at = now() WHERE id = %s",
                    [(rows, cycles, sid) for sid, (rows, cycles) in (recorded or {}).items()],
                )
        self._commit()

    def publish_inventory(self, station: str, drives: Sequence[dict[str, str]]) -> None:
        """The drives this station holds now (replaces what it published before)."""
        with self.transaction() as db:
            db.execute("DELETE FROM fleet.inventory WHERE station = %s", (station,))
            with db.cursor() as cur:
                cur.executemany(
                    "INSERT INTO fleet.inventory (station, drive_key, model, serial, wwn, firmware)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [
                        (
                            station,
                            drive_key(d["model"], d["serial"], d.get("wwn", "")),
                            d["model"],
                            d["serial"],
                            d.get("wwn", ""),
                            d.get("firmware", ""),
                        )
                        for d in drives
                    ],
                )
        self._commit()

    def submission(self, submission_id: int) -> Row | None:
        row = self._one("SELECT * FROM fleet.submission WHERE id = %s", (submission_id,))
        self._commit()
        return row

    def submission_started(self, submission_id: int) -> None:
        self._all(
            "UPDATE fleet.submission SET status = 'running', started_at = coalesce(started_at,"
            " now()) WHERE id = %s AND status = 'queued'",
            (submission_id,),
        )
        self._commit()

    def finish_submission(
        self,
        submission_id: int,
        status: str,
        exit_code: int | None,
        message: str,
        final: tuple[int, int] | None = None,
    ) -> None:
        """The campaign ended (or never ran): its state, and its drives are free again. `final`:
        the cycle rows and cycles its store holds at the end (the view says `done` once the
        centre holds as many rows)."""
        rows, cycles = final if final is not None else (None, None)
        with self.transaction() as db:
            db.execute(
                "UPDATE fleet.submission SET status = %s, exit_code = %s, message = %s,"
                " ended_at = now(), final_rows = %s,"
                " recorded_rows = coalesce(%s, recorded_rows),"
                " recorded_cycles = coalesce(%s, recorded_cycles),"
                " recorded_at = CASE WHEN %s::bigint IS NULL THEN recorded_at ELSE now() END"
                " WHERE id = %s",
                (status, exit_code, message, rows, rows, cycles, rows, submission_id),
            )
            db.execute(
                "UPDATE fleet.claim SET released_at = now() WHERE submission_id = %s"
                " AND released_at IS NULL",
                (submission_id,),
            )
        self._commit()


class DispatchQueries(CentralConnection):
    """Submitting and stopping campaigns: a submission claims its drives fleet-wide."""

    def station_holding(self, keys: Sequence[str]) -> str:
        """The one station whose inventory holds every drive named."""
        rows = self._all(
            "SELECT station, array_agg(drive_key) AS keys FROM fleet.inventory"
            " WHERE drive_key = ANY(%s) GROUP BY station",
            (list(keys),),
        )
        self._commit()
        whole = [r["station"] for r in rows if set(r["keys"]) >= set(keys)]
        if len(whole) == 1:
            return str(whole[0])
        if len(whole) > 1:
            raise UserError(f"the drives are in the inventory of several stations: {whole}")
        held = {k for r in rows for k in r["keys"]}
        missing = [k for k in keys if k not in held]
        if missing:
            raise UserError(f"no station holds {', '.join(missing)}")
        raise UserError(
            "the campaign's drives are on different stations; one campaign, one station"
        )

    def station_kind(self, station: str) -> str:
        """The station kind a station's agent published ('' = it runs the campaign's own)."""
        row = self._one("SELECT kind FROM fleet.station WHERE name = %s", (station,))
        self._commit()
        return str(row["kind"]) if row else ""

    def create_submission(
        self, name: str, config: str, station: str, keys: Sequence[str], planned: int
    ) -> int:
        """A submission and its drive claims, atomically: refused if any drive is claimed by a
        campaign still queued or running anywhere in the fleet."""
        try:
            with self.transaction() as db:
                row = db.execute(
                    "INSERT INTO fleet.submission (name, config, station, drive_keys,"
                    " cycles_planned) VALUES (%s, %s, %s, %s, %s) RETURNING id",
                    (name, config, station, list(keys), planned),
                ).fetchone()
                assert row is not None
                submission_id = int(row["id"])
                with db.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO fleet.claim (drive_key, submission_id, station)"
                        " VALUES (%s, %s, %s)",
                        [(k, submission_id, station) for k in keys],
                    )
        except psycopg.errors.UniqueViolation as error:
            self._db.rollback()
            holders = self.claim_holders(keys)
            raise UserError(
                "drive already claimed by a live campaign: "
                + ", ".join(f"{k} (submission {s})" for k, s in holders.items())
            ) from error
        self._commit()
        return submission_id

    def claim_holders(self, keys: Sequence[str]) -> dict[str, int]:
        rows = self._all(
            "SELECT drive_key, submission_id FROM fleet.claim WHERE drive_key = ANY(%s)"
            " AND released_at IS NULL",
            (list(keys),),
        )
        self._commit()
        return {r["drive_key"]: int(r["submission_id"]) for r in rows}

    def set_job(self, submission_id: int, job_id: int) -> None:
        self._all("UPDATE fleet.submission SET job_id = %s WHERE id = %s", (job_id, submission_id))
        self._commit()

    def request_stop(self, submission_id: int) -> Row:
        row = self._one(
            "UPDATE fleet.submission SET stop_requested = true WHERE id = %s RETURNING *",
            (submission_id,),
        )
        self._commit()
        if row is None:
            raise UserError(f"no submission {submission_id}")
        return row
