"""The central store: the fleet's PostgreSQL database (schema `fleet`), and all of its SQL.

One `CentralStore` (one connection), made of parts along the roles that use it: `connection`
(connect, link options, query helpers), `admin` (schema and login roles), `submissions` (what
dispatch and a station's agent write and read of submissions and claims), `replication` (what a
station ships), `reads` (what dashboards and reports read) and `aggregates` (the report's
per-drive aggregates of the cut rows). Stations write only what their own
SQLite store already holds (the store stays the source of truth); rows are keyed by natural keys
(station, campaign media id, channel, seq), so shipping the same cycle twice changes nothing.
"""

from __future__ import annotations

from rig.interface.fleet.central.admin import STATION_NAME, SchemaAdmin, station_role
from rig.interface.fleet.central.aggregates import CutAggregates
from rig.interface.fleet.central.connection import (
    LINK_OPTIONS,
    CentralUnavailable,
    Row,
    with_link_options,
)
from rig.interface.fleet.central.reads import ReadQueries
from rig.interface.fleet.central.replication import (
    CYCLE_COLUMNS,
    FINDING_COLUMNS,
    RAIL_COLUMNS,
    Cursors,
    ReplicationBatch,
    ReplicationQueries,
    as_json_text,
)
from rig.interface.fleet.central.submissions import LIVE, AgentQueries, DispatchQueries, drive_key


class CentralStore(
    SchemaAdmin, AgentQueries, ReplicationQueries, DispatchQueries, ReadQueries, CutAggregates
):
    """One connection to the central database."""


__all__ = [
    "CYCLE_COLUMNS",
    "FINDING_COLUMNS",
    "LINK_OPTIONS",
    "LIVE",
    "RAIL_COLUMNS",
    "STATION_NAME",
    "CentralStore",
    "CentralUnavailable",
    "Cursors",
    "ReplicationBatch",
    "Row",
    "as_json_text",
    "drive_key",
    "station_role",
    "with_link_options",
]
