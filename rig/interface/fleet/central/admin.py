"""The central database's schema and its login roles (run as the database owner)."""

from __future__ import annotations

import re

from psycopg import sql

from rig.errors import UserError
from rig.interface.fleet.central import summaries
from rig.interface.fleet.central.connection import CentralConnection
from rig.interface.fleet.migrations import (
    DRIVE_BACKFILL,
    MIGRATIONS,
    SCHEMA_VERSION,
    SUMMARY_BACKFILL,
)

STATION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


def station_role(station: str) -> str:
    return f"rig_station_{station}"


class SchemaAdmin(CentralConnection):
    """Migrations, stations and users."""

    def schema_version(self) -> int:
        row = self._one("SELECT to_regclass('fleet.schema_version') IS NOT NULL AS present")
        if not row or not row["present"]:
            return 0
        found = self._one("SELECT max(version) AS v FROM fleet.schema_version")
        return int(found["v"] or 0) if found else 0

    def queue_schema_present(self) -> bool:
        """procrastinate's tables (rig.interface.fleet.dispatch) are in the database."""
        row = self._one("SELECT to_regclass('public.procrastinate_jobs') IS NOT NULL AS present")
        self._commit()
        return bool(row and row["present"])

    def migrate(self) -> int:
        """Bring the schema to this rig's version (one transaction per step, serialized by an
        advisory lock so two callers cannot both apply a step). Returns the version."""
        with self.transaction() as db:
            db.execute("SELECT pg_advisory_xact_lock(816001)")
            db.execute("CREATE SCHEMA IF NOT EXISTS fleet")
            db.execute(
                "CREATE TABLE IF NOT EXISTS fleet.schema_version"
                " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise UserError(
                f"central database has schema v{version}, newer than this rig (v{SCHEMA_VERSION})"
            )
        for number in range(version, SCHEMA_VERSION):
            with self.transaction() as db:
                db.execute("SELECT pg_advisory_xact_lock(816001)")
                if self.schema_version() > number:
                    continue
                db.execute(MIGRATIONS[number])
                if number + 1 == SUMMARY_BACKFILL:  # from the rows an older database holds
                    with db.cursor() as cur:
                        summaries.rebuild_days(cur)
                if number + 1 == DRIVE_BACKFILL:
                    with db.cursor() as cur:
                        summaries.rebuild_drives(cur)
                db.execute("INSERT INTO fleet.schema_version (version) VALUES (%s)", (number + 1,))
        self._commit()
        return self.schema_version()

    def rebuild_summaries(self) -> None:
        """The summaries made again from every cycle and finding row (the scale bench, after
        copying rows by SQL; the v4 migration does the same for an older database)."""
        with self.transaction() as db, db.cursor() as cur:
            summaries.rebuild(cur)
        self._commit()

    def analyze_summaries(self) -> None:
        """Fresh planner statistics of the summary tables (after they were made again whole:
        a model's rows are then read through its index range, not a scan of the table)."""
        with self.transaction() as db:
            db.execute("ANALYZE fleet.day_cycles, fleet.day_class, fleet.day_lost_after")
        self._commit()

    def add_station(self, name: str, password: str) -> str:
        """A station and its login role (member of rig_station). Returns the role."""
        if not STATION_NAME.match(name):
            raise UserError(f"station name {name!r}: use a-z, 0-9 and _ (a letter first)")
        role = station_role(name)
        with self.transaction() as db:
            if self._one("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)):
                db.execute(
                    sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(password)
                    )
                )
            else:
                db.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE rig_station").format(
                        sql.Identifier(role), sql.Literal(password)
                    )
                )
            db.execute(
                "INSERT INTO fleet.station (name, role) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (name, role),
            )
        self._commit()
        return role

    def add_user(self, name: str, password: str, kind: str) -> None:
        """A login role for people and tools: kind 'reader' (dashboard, reports) or 'dispatch'
        (submit and stop campaigns)."""
        if kind not in ("reader", "dispatch"):
            raise UserError(f"user kind {kind!r}: reader or dispatch")
        if not STATION_NAME.match(name):
            raise UserError(f"user name {name!r}: use a-z, 0-9 and _ (a letter first)")
        with self.transaction() as db:
            verb = (
                "ALTER"
                if self._one("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,))
                else "CREATE"
            )
            db.execute(
                sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )
            db.execute(
                sql.SQL("GRANT {} TO {}").format(
                    sql.Identifier(f"rig_{kind}"), sql.Identifier(name)
                )
            )
        self._commit()
