"""Endurance on the full-system twin through the production CLI: the rig trims its region with
BLKDISCARD on the twin's loop device (allowed on this twin: its drives are block devices), and
the 512e profile (512 B logical, 4 KiB physical in its identify) makes the rig warn about a
region that starts inside a physical block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sim.twin_helpers import campaign_text, run_twin

ENDURANCE = """
[endurance]
intervals = 2
interval_s = 0.5
verify_every = 1
discard = "blkdiscard"
"""


def _endurance_run(tmp_path: Path, offset_bytes: int) -> tuple[list[dict], list[dict], str]:
    text = campaign_text(f"align{offset_bytes}", ["512e"], cycles=1, label=f"al{offset_bytes}")
    text = text.replace("[campaign]\n", f"[campaign]\nregion_offset_bytes = {offset_bytes}\n")
    text = text.replace("[station]", ENDURANCE + "[station]")
    run = run_twin(tmp_path, text, quiet=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]

    def events(kind: str) -> list[dict]:
        rows = run.rows(
            "SELECT e.detail FROM event e JOIN drive d ON d.id = e.drive_id"
            " WHERE d.channel = 0 AND e.kind = ?",
            kind,
        )
        return [json.loads(detail) for (detail,) in rows]

    intervals = run.rows("SELECT writes, failures FROM endurance_interval ORDER BY seq")
    # on a loaded machine one short interval may complete no write: writes summed
    assert len(intervals) == 2 and sum(w for w, _ in intervals) > 0, intervals
    assert all(f == 0 for _, f in intervals), intervals  # a trimmed region is not lost data
    return events("alignment_warning"), events("discard"), run.stdout


@pytest.mark.parametrize("offset_bytes", [512, 4096])
def test_alignment_warning_on_a_512e_twin_drive(
    tmp_path: Path, twin: None, offset_bytes: int
) -> None:
    warnings, discards, stdout = _endurance_run(tmp_path, offset_bytes)
    # the rig's discard reached the twin's node (a punched hole: the run would have stopped)
    assert len(discards) == 1 and discards[0]["kind"] == "blkdiscard"
    assert "discarded the test region (blkdiscard)" in stdout
    if offset_bytes == 512:
        assert len(warnings) == 1
        assert "starts 512 B into a physical block" in warnings[0]["why"]
        assert "4096 B physical block" in warnings[0]["why"]
        # sysfs of a loop device says 512: the 4 KiB came from the drive's identify (smartctl)
        assert (warnings[0]["physical_block"], warnings[0]["source"]) == (4096, "identify")
        assert "warning: test region is not aligned" in stdout
    else:
        assert warnings == []
        assert "not aligned" not in stdout


CUTS_AND_RETENTION = """
[endurance]
intervals = 4
interval_s = 0.3
verify_every = 0
cut_every = 1
retention_every = 1
retention_off_s = 0.05
"""


def test_a_retention_power_off_between_cuts_is_no_counter_anomaly(
    tmp_path: Path, twin: None
) -> None:
    """A retention check powers the drive off between two cuts (flushed, not shut down): the
    twin's drive counts it as an unsafe shutdown and a power cycle, as a real one would. Health
    is read around every cut, so the next cut's delta spans one cut and one retention power-off:
    +2 is what the drive must show, not an anomaly (it was reported as one)."""
    text = campaign_text("retention", ["honest"], cycles=4, label="rt")
    run = run_twin(tmp_path, text.replace("[station]", CUTS_AND_RETENTION + "[station]"))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    kinds = [k for (k,) in run.rows("SELECT kind FROM endurance_interval ORDER BY seq")]
    assert kinds.count("retention") >= 2, kinds
    cuts = run.rows("SELECT count(*) FROM cycle WHERE status = 'ok'")[0][0]
    assert cuts >= 2
    anomalies = run.rows("SELECT detail FROM finding WHERE class = 'counter_anomaly'")
    assert anomalies == [], anomalies
    # the baseline and a snapshot after every cut: the comparisons above really ran
    snapshots = run.rows("SELECT count(*) FROM health")[0][0]
    assert snapshots >= cuts + 1, (snapshots, cuts)
    # the NVMe flavour's promise of zeroes after a deallocate, which smartctl does not print,
    # read through the twin's nvme shim (id-ns DLFEAT) as a station reads a real drive's
    promises = {json.loads(f).get("zeroes_after_discard") for (f,) in run.rows(
        "SELECT fields FROM health")}  # fmt: skip
    assert promises == {True}
