"""Discard of the test region: BLKDISCARD on a real loop device, `sg_unmap` and `nvme dsm`
invocations through fake executables on PATH; the alignment check; and an endurance campaign on
the loop station (real firmware, real loop devices) that trims its region first."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from rig.io import discard, media
from rig.io.blockio import DirectTarget
from tests.cli_runner import rig
from tests.loop_station import campaign_text, loop_station, requirements
from tests.loopdev import attached, loop_available

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.geteuid() != 0 or bool(loop_available()), reason="needs root and loop")
def test_blkdiscard_zeroes_the_range_on_a_loop_device(tmp_path: Path) -> None:
    image = tmp_path / "d.img"
    image.write_bytes(b"")
    os.truncate(image, 8 << 20)
    with attached(image) as node:
        target = DirectTarget(node)
        try:
            block = target.block_size
            data = media.aligned_buffer(32 * block)
            data[:] = 0xA5
            target.write(0, data)
            target.flush()
            discard.discard("blkdiscard", node, target.fileno(), 8, 16, block)
            back = target.read(0, 32)
        finally:
            target.close()
    blocks = back.reshape(32, block)
    assert (blocks[8:24] == 0).all()  # discarded: the loop device punched a hole
    assert (blocks[:8] == 0xA5).all() and (blocks[24:] == 0xA5).all()  # the rest untouched


def _fake_tool(bin_dir: Path, name: str, exit_code: int = 0, stderr: str = "") -> Path:
    """An executable that appends its argv to <name>.calls and exits as told."""
    calls = bin_dir / f"{name}.calls"
    script = bin_dir / name
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"open({str(calls)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    return calls


def test_sg_unmap_and_nvme_dsm_invocations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    sg = _fake_tool(tmp_path, "sg_unmap")
    nvme = _fake_tool(tmp_path, "nvme")
    discard.discard("sg_unmap", "/dev/sdz", -1, 2048, 131072, 512)
    discard.discard("nvme", "/dev/nvme9n1", -1, 256, 4096, 4096)
    assert sg.read_text() == "--lba=2048 --num=131072 /dev/sdz\n"
    assert nvme.read_text() == "dsm /dev/nvme9n1 --ad --slbs=256 --blocks=4096\n"


def test_a_range_larger_than_one_descriptor_is_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    sg = _fake_tool(tmp_path, "sg_unmap")
    discard.discard("sg_unmap", "/dev/sdz", -1, 10, discard.SG_UNMAP_MAX_BLOCKS + 5, 512)
    assert sg.read_text().splitlines() == [
        f"--lba=10 --num={discard.SG_UNMAP_MAX_BLOCKS} /dev/sdz",
        f"--lba={10 + discard.SG_UNMAP_MAX_BLOCKS} --num=5 /dev/sdz",
    ]


def test_an_nvme_dsm_range_fits_the_32_bit_length_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NVMe DSM range: "Length in Logical Blocks" is 32 bits, so 2**32 blocks need two ranges
    monkeypatch.setenv("PATH", str(tmp_path))
    nvme = _fake_tool(tmp_path, "nvme")
    discard.discard("nvme", "/dev/nvme9n1", -1, 7, 1 << 32, 512)
    assert nvme.read_text().splitlines() == [
        "dsm /dev/nvme9n1 --ad --slbs=7 --blocks=4294967295",
        f"dsm /dev/nvme9n1 --ad --slbs={7 + 0xFFFFFFFF} --blocks=1",
    ]


def test_tool_failures_are_rig_errors_with_the_tools_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    _fake_tool(tmp_path, "nvme", 1, "NVMe status: INVALID_FIELD: A reserved coded value\n")
    with pytest.raises(discard.DiscardError, match="exit 1: NVMe status: INVALID_FIELD"):
        discard.discard("nvme", "/dev/nvme9n1", -1, 0, 8, 4096)
    with pytest.raises(discard.DiscardError, match="sg_unmap is not installed"):
        discard.discard("sg_unmap", "/dev/sdz", -1, 0, 8, 512)


@pytest.mark.parametrize(
    ("first", "count", "logical", "physical", "warn"),
    [
        (0, 1024, 4096, 4096, ""),
        (8, 1024, 512, 4096, ""),
        (3, 1024, 512, 4096, "starts 1536 B into a physical block"),
        (8, 1027, 512, 4096, "ends 1536 B into a physical block"),
        (1, 1, 512, 512, ""),
    ],
)
def test_misalignment(first: int, count: int, logical: int, physical: int, warn: str) -> None:
    why = discard.misalignment(first, count, logical, physical)
    assert (warn in why) if warn else why == ""
    if warn:
        assert f"{physical} B physical block" in why


ENDURANCE = """
[endurance]
intervals = 3
interval_s = 0.4
verify_every = 1
discard = "blkdiscard"
"""


@pytest.mark.skipif(bool(requirements()), reason=requirements() or "ok")
def test_endurance_on_the_loop_station_trims_first(tmp_path: Path, udevd: None) -> None:
    with loop_station(tmp_path, 1) as station:
        text = campaign_text(station, 5).replace("[stop]", ENDURANCE + "\n[stop]")
        campaign = tmp_path / "campaign.toml"
        campaign.write_text(text)
        db = tmp_path / "e.sqlite"
        done = rig("run", str(campaign), "--db", str(db), "--quiet", cwd=REPO, timeout_s=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "discarded the test region (blkdiscard)" in done.stdout
    con = sqlite3.connect(db)
    events = con.execute("SELECT detail FROM event WHERE kind = 'discard'").fetchall()
    assert len(events) == 1 and json.loads(events[0][0])["blocks"] == 1024
    rows = con.execute(
        "SELECT writes, failures, verified_blocks, lat_p99_us, lat_samples"
        " FROM endurance_interval ORDER BY seq"
    ).fetchall()
    assert len(rows) == 3
    assert all(r[0] > 0 and r[1] == 0 and r[2] > 0 for r in rows)
    # p99 is stated exactly where the interval's samples support it (a loaded host writes less)
    assert all((r[3] is None) is (r[4] < 1_000) and (r[3] is None or r[3] > 0) for r in rows)
    con.close()


def test_ranges_fit_the_devices_own_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real drive refuses an UNMAP or DSM range above its limit (SCSI Block Limits VPD,
    NVMe DMRSL), which its driver shows in sysfs: the tools get ranges no larger."""
    monkeypatch.setenv("PATH", str(tmp_path))
    sg = _fake_tool(tmp_path, "sg_unmap")
    nvme = _fake_tool(tmp_path, "nvme")
    discard.discard("sg_unmap", "/dev/sdz", -1, 100, 10_000, 512, device_max=4096)
    assert sg.read_text().splitlines() == [
        "--lba=100 --num=4096 /dev/sdz",
        "--lba=4196 --num=4096 /dev/sdz",
        "--lba=8292 --num=1808 /dev/sdz",
    ]
    discard.discard("nvme", "/dev/nvme9n1", -1, 0, 3, 4096, device_max=2)
    assert nvme.read_text().splitlines() == [
        "dsm /dev/nvme9n1 --ad --slbs=0 --blocks=2",
        "dsm /dev/nvme9n1 --ad --slbs=2 --blocks=1",
    ]


@pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "loop devices work")
def test_the_limit_is_read_from_the_devices_queue(tmp_path: Path) -> None:
    image = tmp_path / "d.img"
    image.write_bytes(bytes(1 << 20))
    with attached(image) as node:
        name = os.path.basename(node)
        with open(f"/sys/class/block/{name}/queue/discard_max_hw_bytes") as handle:
            hw = int(handle.read())
        assert discard.device_limit_blocks(node, 4096) == hw // 4096
    assert discard.device_limit_blocks(str(tmp_path / "no-such-node"), 4096) == 0
