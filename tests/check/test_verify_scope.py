"""The checker's scope per cut: the writes at risk plus a sample, independent of the region's
size; the whole region only on the scheduled full scans."""

from __future__ import annotations

from pathlib import Path

from tests import scoring


def _blocks_checked(tmp_path: Path, region_mib: int, full_scan_every: int) -> list[tuple]:
    text = scoring.campaign_text(["honest"], 12, full_scan_every=full_scan_every)
    text = text.replace("region_mib = 2", f"region_mib = {region_mib}")
    text = text.replace("sample_blocks = 0", "sample_blocks = 32")
    _, _, store = scoring.run(tmp_path / f"scope{region_mib}-{full_scan_every}.sqlite", text)
    rows = store.query(
        "SELECT c.seq, c.full_scan, c.blocks_checked, c.writes, d.region_blocks"
        " FROM cycle c JOIN drive d ON d.id = c.drive_id ORDER BY c.seq"
    )
    return [tuple(r) for r in rows]


def test_check_cost_follows_writes_at_risk_not_region_size(tmp_path: Path) -> None:
    small = _blocks_checked(tmp_path, 2, 0)
    large = _blocks_checked(tmp_path, 64, 0)
    assert not any(r[1] for r in small + large)
    mean = lambda rows: sum(r[2] for r in rows) / len(rows)  # noqa: E731
    assert large[0][4] == 32 * small[0][4]
    # 32 times the region, about the same number of blocks read per cut
    assert mean(large) < 2 * mean(small)
    assert all(r[2] < r[4] for r in large)


def test_full_scans_run_on_schedule(tmp_path: Path) -> None:
    rows = _blocks_checked(tmp_path, 8, 4)
    assert [r[0] for r in rows if r[1]] == [4, 8, 12]
    for seq, full, checked, _, region in rows:
        assert (checked == region) == bool(full), seq
