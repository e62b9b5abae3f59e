"""The rows the campaign hands the store to record (docs/schema.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RailSenseRow:
    """One cycle's rail-sense capture (table rail_sense, docs/schema.md)."""

    channel: int
    edge_mcu_us: int
    edge_ns: int | None
    edge_error_ns: int | None
    hi_threshold: int
    lo_threshold: int
    window_ms: int
    v0: int | None
    hi_us: int | None
    lo_us: int | None
    min_v: int | None
    end_reason: str
    sample_dt_us: int | None
    samples: tuple[int, ...] = ()


@dataclass(frozen=True)
class CycleRow:
    drive_id: int
    seq: int
    status: str
    cut_delay_ns: int
    started_at: float
    error: str = ""
    write_start_ns: int | None = None
    cut_ns: int | None = None
    cut_error_ns: int | None = None
    gone_ns: int | None = None
    back_ns: int | None = None
    writes: int = 0
    writes_acked: int = 0
    writes_durable: int = 0
    flushes: int = 0
    bytes_written: int = 0
    blocks_checked: int = 0
    blocks_unchecked: int = 0  # meant to be read, left unread by a read budget (not a failure)
    nondurable_writes: int = 0
    nondurable_survived: int = 0
    failures: int = 0
    full_scan: int = 0  # 1: this cycle checked the whole test region
    unserializable_writes: int = 0  # durable writes lost behind a later survivor (FAST'13)
    last_ack_to_cut_ns: int | None = None  # -1: no write acknowledged before the cut
    last_flush_to_cut_ns: int | None = None  # -1: no flush completed before the cut
    realized_delay_ns: int | None = None  # the edge minus the event the cut was timed from
    timed_from: str = ""  # that event (first_write | ack | flush | idle | ...; "" unknown)
    delay_error_ns: int | None = None  # bound of the realized delay (the clock mapping's)
    delay_in_range: int | None = None  # 1: within the requested range, 0: outside, None: n/a
    exposed: str | None = None  # classes the cut was a trial of (rig/check/exposure.py)


@dataclass(frozen=True)
class IntervalRow:
    """One `endurance_interval` row (docs/schema.md)."""

    drive_id: int
    seq: int
    started_at: float
    seconds: float
    writes: int
    failed_writes: int
    bytes_written: int
    host_bytes_total: int
    tbw_fraction: float | None
    mb_per_s: float
    iops: float
    lat_p50_us: float | None
    lat_p99_us: float | None
    lat_p999_us: float | None
    lat_max_us: float | None
    lat_samples: int
    fill_fraction: float
    steady: int
    verified_blocks: int
    failures: int
    kind: str
    detail: dict[str, Any]
    interval_no: int | None


# One power-on of a cycle (table power_on): n, on_ns, back_ns, ready_ns, cut_ns, state_at_cut
PowerOnRow = tuple[int, int, int | None, int | None, int | None, str]
