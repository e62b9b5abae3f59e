"""What the central report states of each drive's cuts, aggregated by the server in one pass
over the cycle table (docs/decisions.md, "The central report states figures from the server's
aggregates"): per drive, its cycles per status and set of failure
classes (with their sums), its cuts' return times per logarithmic bin (with their exact
minimum, maximum and sum), and its cuts per delay bin and outcome. A few thousand rows for ten
million cuts: the report never holds a value per cut."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rig.interface.fleet.central.connection import CentralConnection, Row
from rig.interface.fleet.central.reads import MS

# the columns as reports/load/dataset.py and CUT_COLUMNS compute them (ns as a double / 1e6)
_PER_CUT = f"""
SELECT station, campaign_uid, channel, seq, status, failure_classes, exposed,
    bytes_written, blocks_checked, full_scan, blocks_unchecked, ret,
    CASE WHEN ret IS NOT NULL THEN floor(ln(greatest(ret, %(floor)s)) * %(per_e)s)::integer
        END AS rbin,
    CASE WHEN cut THEN width_bucket(ack, %(edges)s::double precision[]) END AS abin,
    CASE WHEN cut THEN width_bucket(flush, %(edges)s::double precision[]) END AS fbin,
    failure_classes IS NOT NULL AS failed
FROM (SELECT *, status IN ('ok', 'dead') AS cut,
    CASE WHEN status = 'ok' AND back_ns >= cut_ns THEN (back_ns - cut_ns){MS} END AS ret,
    CASE WHEN last_ack_to_cut_ns >= 0 THEN last_ack_to_cut_ns{MS} END AS ack,
    CASE WHEN last_flush_to_cut_ns >= 0 THEN last_flush_to_cut_ns{MS} END AS flush
    FROM fleet.cycle {{where}}) c
"""
# (the return times' sum in numeric: exact, so it does not depend on the order the groups,
# split by exposure too, are added in)
# per drive and combination of keys first (hashed in parallel workers over a sequential scan: a
# few thousand groups), then the four groupings of those few rows
AGGREGATES = f"""
SELECT station, campaign_uid, channel,
    CASE GROUPING(status, failure_classes, exposed, rbin, abin, fbin, failed)
        WHEN 15 THEN 'status' WHEN 119 THEN 'return' WHEN 122 THEN 'ack' ELSE 'flush' END AS kind,
    status, failure_classes, exposed, rbin, abin, fbin, failed, sum(n) AS n,
    sum(bytes_written) AS bytes_written, sum(blocks_checked) AS blocks_checked,
    sum(full_scans) AS full_scans, sum(blocks_unchecked) AS blocks_unchecked,
    min(first_dead) AS first_dead, min(low) AS low, max(high) AS high,
    sum(total)::double precision AS total
FROM (SELECT station, campaign_uid, channel, status, failure_classes, exposed, rbin, abin, fbin,
    bool_or(failed) AS failed, count(*) AS n,
    sum(bytes_written) AS bytes_written, sum(blocks_checked) AS blocks_checked,
    count(*) FILTER (WHERE full_scan <> 0) AS full_scans,
    sum(blocks_unchecked) AS blocks_unchecked,
    min(seq) FILTER (WHERE status = 'dead') AS first_dead,
    min(ret) AS low, max(ret) AS high, sum(ret::numeric) AS total
    FROM ({_PER_CUT}) p
    GROUP BY station, campaign_uid, channel, status, failure_classes, exposed, rbin, abin, fbin) g
GROUP BY station, campaign_uid, channel,
    GROUPING SETS ((status, failure_classes, exposed), (rbin), (abin, failed), (fbin, failed))
"""
# The planner's estimate of the groups is millions (it cannot know that a drive's cycles fall in
# a few combinations), so left alone it sorts 10 M rows along the primary key (47 s at 10 M
# cuts, docs/performance.md section 7); hashing over a parallel sequential scan (SCANNED) takes
# 5.5 s. Some drives only (a dashboard page's): their rows through the primary key, hashed
# too. Set for the aggregates' transaction only.
HASHED: tuple[str, ...] = ("SET LOCAL work_mem = '64MB'", "SET LOCAL enable_sort = off")
HASHED += ("SET LOCAL enable_incremental_sort = off",)
SCANNED = tuple(f"SET LOCAL enable_{p} = off" for p in ("indexscan", "indexonlyscan", "bitmapscan"))
SOME = (
    "WHERE (station, campaign_uid, channel) IN (SELECT * FROM"
    " unnest(%(stations)s::text[], %(uids)s::bigint[], %(channels)s::integer[]))"
)
# (`kind`, by the set's GROUPING(...): a bit per column left out, status the highest:
# 0b001111 = 15 status and classes, 0b110111 = 55 return bin, 0b111010 = 58 ack bin and outcome,
# 0b111100 = 60 flush bin and outcome)


class CutAggregates(CentralConnection):
    """The report's per-drive aggregates of the cycle table."""

    def cut_aggregates(
        self,
        bins_per_e: float,
        floor_ms: float,
        delay_edges: Sequence[float],
        drives: Sequence[tuple[str, int, int]] | None = None,
    ) -> list[Row]:
        """Every drive's rows of the four groupings (`kind`: status, return, ack, flush): its
        cycles per status and failure classes (NULL: none), with their sums and the first dead
        cycle; its ok cuts' return times per bin, with their min, max and sum; its cuts per
        delay bin (ack, flush) and outcome (`failed`). Return bins are
        floor(ln(max(ms, floor_ms)) * bins_per_e); delay bins width_bucket over the finite
        `delay_edges` (1: the first edge up to the second). `drives`: (station, campaign
        uid, channel) of the drives wanted, None for all."""
        params: dict[str, Any] = {
            "per_e": bins_per_e,
            "floor": floor_ms,
            "edges": list(delay_edges),
        }
        if drives is not None:
            params["stations"], params["uids"], params["channels"] = (
                [d[i] for d in drives] for i in range(3)
            )
        for setting in HASHED + (SCANNED if drives is None else ()):
            self._all(setting)
        return self._read(AGGREGATES.replace("{where}", SOME if drives is not None else ""), params)

    def cuts_through(self, station: str, uid: int, channel: int, seq: int) -> int:
        """The drive's cuts (status ok or dead) up to and with cycle `seq` (its primary key's
        range)."""
        row = self._one(
            "SELECT count(*) AS n FROM fleet.cycle WHERE station = %s AND campaign_uid = %s"
            " AND channel = %s AND seq <= %s AND status IN ('ok', 'dead')",
            (station, uid, channel, seq),
        )
        return int(row["n"]) if row else 0
