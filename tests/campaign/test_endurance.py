"""Endurance mode through the production campaign code on the simulated rig: measured intervals
(throughput, latency percentiles, host bytes and TBW), verification on its cadence, interleaved
cuts and retention checks; and the steady-state rule on known series."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fixtures import sim_station
from rig.campaign.endurance import endurance, intervals
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.errors import UserError
from rig.io.ledger import CycleLog
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text
from tests.older_stores import downgrade_to_v10

ENDURANCE = """
[endurance]
intervals = 4
interval_s = 0.3
verify_every = 2
cut_every = 2
retention_every = 3
retention_off_s = 0.05
tbw_tb = 1
"""


def run(tmp_path: Path, profile: str) -> Store:
    text = campaign_text([profile], cycles=10, extra="", flush_every=2)
    campaign = campaign_file.parse(text.replace("[cut]", ENDURANCE + "[cut]"))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "e.sqlite"))
    run_campaign(campaign, station, store, Observer())
    return store


def test_intervals_cuts_and_retention_are_recorded(tmp_path: Path) -> None:
    store = run(tmp_path, "plp")
    rows = store.query("SELECT * FROM endurance_interval ORDER BY seq")
    assert [r["kind"] for r in rows] == ["write", "write", "write", "retention", "write"]
    # write intervals numbered 1..4 by themselves; the retention check takes no interval number
    assert [r["interval_no"] for r in rows] == [1, 2, 3, None, 4]
    writes = [r for r in rows if r["kind"] == "write"]
    total = 0
    for r in writes:
        total += r["bytes_written"]
        assert r["host_bytes_total"] == total
        assert r["tbw_fraction"] == pytest.approx(total / 1e12)
        assert r["writes"] > 0 and r["mb_per_s"] > 0 and r["iops"] > 0
        assert r["lat_samples"] == r["writes"] > 0
        stated = [r[k] for k in ("lat_p50_us", "lat_p99_us", "lat_p999_us") if r[k] is not None]
        assert stated == sorted(stated) and stated[-1] <= r["lat_max_us"]
        assert (r["lat_p999_us"] is None) is (r["lat_samples"] < 10_000)
        assert 0 < r["fill_fraction"] <= 1
    # verification on every 2nd write interval; retention reads back every block with data
    assert [r["verified_blocks"] > 0 for r in writes] == [False, True, False, True]
    retention = rows[3]
    assert retention["verified_blocks"] > 0 and retention["failures"] == 0
    # the real time the drive was off (retention_off_s = 0.05, plus leaving and returning)
    assert 0.05 <= retention["seconds"] < 30
    assert json.loads(retention["detail"])["off_s"] == 0.05
    assert all(r["failures"] == 0 for r in rows)  # a drive with power-loss protection
    cycles = store.query("SELECT seq, status FROM cycle ORDER BY seq")
    assert [c["seq"] for c in cycles] == [1, 2]  # a cut after write intervals 2 and 4
    store.close()


def test_retention_check_finds_what_a_lying_flush_lost(tmp_path: Path) -> None:
    store = run(tmp_path, "lying-flush")
    retention = store.query("SELECT * FROM endurance_interval WHERE kind = 'retention'")[0]
    detail = json.loads(retention["detail"])
    assert retention["failures"] > 0
    # data flushed before the power-off and not written since: the checker calls its loss
    # collateral damage (retroactive loss of durable data), never an allowed outcome
    assert detail["findings"].get("collateral_damage", 0) > 0
    store.close()


@pytest.mark.parametrize(
    ("series", "steady"),
    [
        ([100, 101, 99, 100, 100], True),
        ([100, 90, 80, 70, 60], False),  # a trend: slope excursion above 10%
        ([100, 130, 100, 130, 100], False),  # range above 20% of the average
        ([500, 100, 101, 99, 100, 100], True),  # only the last window counts
        ([100, 100, 100, 100], False),  # fewer intervals than the window
    ],
)
def test_steady_state_rule(series: list[float], steady: bool) -> None:
    assert intervals.steady_state(series, 5) is steady


def test_endurance_keys_are_checked() -> None:
    base = campaign_text(["plp"], cycles=1)
    with pytest.raises(UserError, match=r"\[endurance\] needs intervals"):
        campaign_file.parse(base.replace("[cut]", "[endurance]\ninterval_s = 1\n[cut]"))
    with pytest.raises(UserError, match=r"\[endurance\]\.discard"):
        campaign_file.parse(
            base.replace("[cut]", "[endurance]\nintervals = 1\ndiscard = 'x'\n[cut]")
        )
    with pytest.raises(UserError, match=r"\[endurance\]\.discard needs a block device"):
        campaign_file.parse(
            base.replace("[cut]", "[endurance]\nintervals = 1\ndiscard = 'blkdiscard'\n[cut]")
        )
    with pytest.raises(UserError, match=r"\[endurance\]\.steady_window"):
        campaign_file.parse(
            base.replace("[cut]", "[endurance]\nintervals = 1\nsteady_window = 1\n[cut]")
        )


def _log_of(latencies_us: list[float]) -> CycleLog:
    log = CycleLog()
    for i, us in enumerate(latencies_us):
        gens = np.array([i + 1], dtype=np.uint32)
        log.add_write(0, i, i, gens, 1_000_000, 1_000_000 + int(us * 1000), 0, False)
    return log


@pytest.mark.parametrize(
    ("n", "stated"),
    [
        (0, (False, False, False)),
        (1, (True, False, False)),
        (999, (True, False, False)),
        (1_000, (True, True, False)),
        (9_999, (True, True, False)),
        (10_000, (True, True, True)),
    ],
)
def test_a_percentile_needs_the_samples_to_support_it(n: int, stated: tuple[bool, ...]) -> None:
    # one slow write in every thousand: with too few samples p99.9 would be that one write
    latencies = [5_000.0 if i % 1000 == 999 else 100.0 + i % 7 for i in range(n)]
    p50, p99, p999, worst, samples = intervals.latency_us(_log_of(latencies))
    assert samples == n
    assert (p50 is not None, p99 is not None, p999 is not None) == stated
    if n:
        assert worst == max(latencies)
    if p999 is not None:
        assert p999 == pytest.approx(np.percentile(latencies, 99.9))


def test_a_failed_write_is_no_latency_sample() -> None:
    log = _log_of([100.0] * 1_000)
    log.add_write(0, 1_000, 1_000, np.array([2_000], dtype=np.uint32), 0, 10**9, -5, False)
    assert intervals.latency_us(log)[4] == 1_000


def test_a_v9_store_gets_its_write_intervals_numbered(tmp_path: Path) -> None:
    """Rows recorded before v10 numbered retention checks among the intervals (seq); the
    migration gives the write rows their own numbers and the retention rows none."""
    path = tmp_path / "old.sqlite"
    store = Store(str(path))
    cid = store.new_campaign("c", "toml", 1, "simulated")
    ident = {"model": "m", "serial": "s", "wwn": "", "firmware": ""}
    did = store.add_drive(cid, 0, ident, 1 << 30, 4096, (0, 100))
    store.close()
    downgrade_to_v10(path)
    db = sqlite3.connect(path)  # back to the v9 shape of the store
    db.execute("ALTER TABLE endurance_interval DROP COLUMN interval_no")  # v10
    db.execute("ALTER TABLE endurance_interval DROP COLUMN lat_samples")
    db.execute("PRAGMA user_version = 9")
    for seq, kind in enumerate(["write", "write", "retention", "write"], 1):
        db.execute(
            "INSERT INTO endurance_interval (drive_id, seq, started_at, seconds, writes,"
            " failed_writes, bytes_written, host_bytes_total, mb_per_s, iops, fill_fraction,"
            " steady, kind) VALUES (?, ?, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, ?)",
            (did, seq, kind),
        )
    db.commit()
    db.close()
    store = Store(str(path))
    rows = store.query("SELECT interval_no FROM endurance_interval ORDER BY seq")
    store.close()
    assert [r["interval_no"] for r in rows] == [1, 2, None, 3]


def test_a_sequential_stream_is_stored_and_a_resume_goes_on_from_it(tmp_path: Path) -> None:
    """Each write interval of a sequential workload stores where its stream stopped; an
    endurance run built on that store (as a resume builds it) goes on from the last one, not
    from each stripe's start."""
    text = campaign_text(["plp"], cycles=10, extra="sequential = true", flush_every=2)
    table = "[endurance]\nintervals = 3\ninterval_s = 0.2\nverify_every = 0\n"
    campaign = campaign_file.parse(text.replace("[cut]", table + "[cut]"))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "e.sqlite"))
    run_campaign(campaign, station, store, Observer())
    details = [json.loads(r["detail"]) for r in store.query(
        "SELECT detail FROM endurance_interval WHERE kind = 'write' ORDER BY seq"
    )]  # fmt: skip
    points = [d["sequential_at"] for d in details]
    assert len(points) == 3 and all(len(p) == 4 for p in points)  # one per worker's stripe
    # the stored position is where the interval's stream stopped: it moves on
    assert points[0] != [0, 0, 0, 0] and points[1] != points[0] and points[2] != points[1]
    (drive_id,) = [r["id"] for r in store.query("SELECT id FROM drive")]
    spec = campaign.endurance
    assert spec is not None
    resumed = endurance.EnduranceRun(SimpleNamespace(store=store, drive_id=drive_id), spec)  # type: ignore[arg-type]
    assert resumed.sequential_at == points[-1]
    store.close()
