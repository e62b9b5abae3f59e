"""A used drive's old contents are not damage (rig/check/baseline.py): bytes that are no record
in blocks the campaign never wrote, read by its full scans, are found before the first cycle
and start as unknown, through the production campaign on in-process drives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fixtures import sim_station
from fixtures.virtual_drive import VirtualTarget
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.io import media
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text

PATTERN_LBAS = range(100, 132)  # an old tool's 0xA5 pattern
NOISE_LBAS = range(200, 204)  # random bytes (an old file system's data)
OTHER_CAMPAIGN_LBA = 300  # a valid record of another campaign: sound, never foreign


def _used_drive_campaign(tmp_path: Path, cut: str) -> tuple[Store, int]:
    text = campaign_text(["honest"], cycles=3).replace("[cut]\n", "[cut]\n" + cut)
    campaign = campaign_file.parse(text)
    station, drives = sim_station.build(campaign)
    target = VirtualTarget(drives[0])
    block = target.block_size
    for lba in PATTERN_LBAS:
        target.write(lba, np.full(block, 0xA5, dtype=np.uint8))
    noise = np.random.default_rng(7).integers(0, 256, len(NOISE_LBAS) * block, dtype=np.uint8)
    target.write(NOISE_LBAS[0], noise)
    old = media.WriteRecord(999, OTHER_CAMPAIGN_LBA, np.array([3], dtype=np.uint64), 0, 1, 1)
    target.write(OTHER_CAMPAIGN_LBA, media.build(old, block))
    target.flush()
    store = Store(str(tmp_path / "u.sqlite"))
    summaries = run_campaign(campaign, station, store, Observer())
    assert summaries[0].errors == 0
    return store, len(PATTERN_LBAS) + len(NOISE_LBAS)


def test_old_bytes_in_never_written_blocks_are_no_damage_on_full_scans(tmp_path: Path) -> None:
    store, foreign = _used_drive_campaign(tmp_path, "full_scan_every = 1\n")
    failing = store.query("SELECT class, lba_first, lba_count FROM finding WHERE failure = 1")
    assert not failing, failing  # (before the baseline: collateral damage on all 36)
    rows = store.query("SELECT detail FROM event WHERE kind = 'region_baseline'")
    assert len(rows) == 1
    detail = json.loads(rows[0][0])
    assert detail["foreign_blocks"] == foreign and detail["first_foreign_lba"] == 100
    assert detail["blocks_read"] == 4 * 1024 * 1024 // 4096
    scans = store.query("SELECT COUNT(*) FROM event WHERE kind = 'cut_context'")
    assert scans[0][0] == 3  # three cycles judged, each a full scan of the region


def test_a_lost_write_over_old_bytes_is_no_corruption(tmp_path: Path) -> None:
    """Without full scans the checks read only what the campaign wrote, but a write that was not
    durable at the cut may be lost and show the block's old bytes again: the old content the
    rules allow, not bit corruption (before the baseline: 4 such blocks in this campaign)."""
    store, foreign = _used_drive_campaign(tmp_path, "")
    rows = store.query("SELECT detail FROM event WHERE kind = 'region_baseline'")
    assert len(rows) == 1 and json.loads(rows[0][0])["foreign_blocks"] == foreign
    assert not store.query("SELECT 1 FROM finding WHERE failure = 1")


def test_a_region_declared_clean_is_not_read_first(tmp_path: Path) -> None:
    """`baseline = false`: the region is taken to hold zeroes or records (a fresh or erased
    drive) and nothing is read before the first cycle; old bytes a check reads are then judged
    as the drive's damage, which is why the baseline is the default."""
    store, _ = _used_drive_campaign(tmp_path, "baseline = false\nfull_scan_every = 1\n")
    assert not store.query("SELECT 1 FROM event WHERE kind = 'region_baseline'")
    damaged = store.query("SELECT DISTINCT class FROM finding WHERE failure = 1")
    assert "collateral_damage" in {r[0] for r in damaged}
