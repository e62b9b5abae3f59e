"""`rig run` refuses bad input with one clear line, a non-zero exit, and no write to any device."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rig.io import media
from rig.station import safety
from tests.cli_runner import rig
from tests.loopdev import attached, drop_partitions, loop_available, mounted

needs_loop = pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "ok")


def manual_campaign(tmp_path: Path, model: str, serial: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f"""
[campaign]
name = "refusal"
cycles = 3
[station]
kind = "manual"
[[drive]]
channel = 0
model = "{model}"
serial = "{serial}"
""")
    return path


def our_sectors(image: Path) -> int:
    """How many sectors of the image carry a rig record."""
    data = np.fromfile(image, dtype=np.uint8)
    return int((media.parse(data).state == media.VALID).sum())


def assert_one_line_refusal(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize(
    "text, words",
    [
        ("this is [not toml", ("not valid TOML",)),
        ("[campaign]\nname = 'x'\n", ("needs 'cycles'",)),
        (
            "[campaign]\nname='x'\ncycles=1\n[station]\nkind='simulated'\n[[drive]]\nchannel=0\n"
            "model='m'\nserial='s'\nprofile='plp'\n[workload]\nworkerz=3\n",
            ("unknown key 'workerz'",),
        ),
        (
            "[campaign]\nname='x'\ncycles=1\n[station]\nkind='warp-drive'\n",
            ("kind must be one of",),
        ),
        ("[campaign]\nname='x'\ncycles=-4\n", ("cycles = -4 is outside",)),
    ],
)
def test_malformed_campaign_files(tmp_path: Path, text: str, words: tuple[str, ...]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert_one_line_refusal(rig("run", str(path), cwd=tmp_path), *words)
    assert not list(tmp_path.glob("*.sqlite"))


def test_missing_campaign_file(tmp_path: Path) -> None:
    assert_one_line_refusal(rig("run", "nowhere.toml", cwd=tmp_path), "cannot read")


def test_unknown_drive_is_refused_before_any_io(tmp_path: Path) -> None:
    result = rig("run", str(manual_campaign(tmp_path, "No Such Model", "NOSUCH123")), cwd=tmp_path)
    assert_one_line_refusal(result, "not found on the bus", "NOSUCH123")


@needs_loop
def test_mounted_block_device_is_refused_and_untouched(tmp_path: Path) -> None:
    image = tmp_path / "fs.img"
    with image.open("wb") as handle:
        handle.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    with (
        attached(image, direct_io=False, sector_size=512) as devnode,
        mounted(devnode, tmp_path / "mnt") as where,
    ):
        reasons = safety.refusal_reasons(devnode, allow_wipe=True)
        assert any(r.startswith("mounted at") for r in reasons)
        result = rig(
            "run", str(manual_campaign(tmp_path, "Linux loop device", str(image))), cwd=tmp_path
        )
        assert_one_line_refusal(result, "refusing", devnode, f"mounted at {where}")
    assert our_sectors(image) == 0


@needs_loop
def test_filesystem_signature_is_refused_unless_the_campaign_allows_a_wipe(tmp_path: Path) -> None:
    image = tmp_path / "fs.img"
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    with attached(image, direct_io=False, sector_size=512) as devnode:
        assert safety.refusal_reasons(devnode) == ["holds a ext4 signature"]
        assert safety.refusal_reasons(devnode, allow_wipe=True) == []
        result = rig(
            "run", str(manual_campaign(tmp_path, "Linux loop device", str(image))), cwd=tmp_path
        )
        assert_one_line_refusal(result, "refusing", "ext4 signature")
    assert our_sectors(image) == 0


@needs_loop
def test_partitioned_device_is_refused(tmp_path: Path) -> None:
    image = tmp_path / "parts.img"
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    subprocess.run(
        ["sfdisk", "-q", str(image)],
        input="label: gpt\n,8M\n",
        text=True,
        check=True,
        capture_output=True,
    )
    with attached(image, direct_io=False, sector_size=512) as devnode:
        # partx adds the partitions itself (this kernel may not scan GPT); they outlive a detach,
        # so they are deleted again whatever happens
        subprocess.run(["partx", "-a", devnode], check=True, capture_output=True)
        try:
            reasons = safety.refusal_reasons(devnode)
        finally:
            drop_partitions(devnode)
        assert any(r.startswith("has partitions") for r in reasons), reasons
        assert "holds a gpt signature" in reasons


@needs_loop
def test_drives_lists_identity_and_safety_and_prints_a_stanza(tmp_path: Path) -> None:
    clean, used = tmp_path / "clean.img", tmp_path / "used.img"
    for image in (clean, used):
        with image.open("wb") as handle:
            handle.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(used)], check=True, capture_output=True)
    with (
        attached(clean) as clean_node,
        attached(used, direct_io=False, sector_size=512) as used_node,
    ):
        listing = rig("drives", cwd=tmp_path)
        assert listing.returncode == 0, listing.stderr
        lines = {line.split()[0]: line for line in listing.stdout.splitlines()[1:] if line}
        assert lines[clean_node].endswith(" yes")
        assert "no: holds a ext4 signature" in lines[used_node]
        stanza = rig("drives", "--stanza", clean_node, cwd=tmp_path)
        assert f'serial = "{clean}"' in stanza.stdout
        assert 'model = "Linux loop device"' in stanza.stdout


@needs_loop
def test_drives_shows_transport_and_a_claimed_drive_and_the_stanza_is_a_campaign_block(
    tmp_path: Path,
) -> None:
    from rig.config import campaign_file
    from rig.drive.identity import DriveIdentity
    from rig.station import locks

    image = tmp_path / "claimed.img"
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    identity = DriveIdentity("Linux loop device", str(image))
    with attached(image) as devnode, locks.claim(identity, "night run"):
        listing = rig("drives", cwd=tmp_path)
        line = next(x for x in listing.stdout.splitlines() if x.startswith(devnode + " "))
        assert line.split()[2] == "loop"
        assert line.endswith(f"no: claimed by a campaign (pid {os.getpid()}, campaign 'night run')")
        stanza = rig("drives", "--stanza", devnode, cwd=tmp_path).stdout
    campaign = campaign_file.parse(
        f"[campaign]\nname='x'\ncycles=1\n[station]\nkind='manual'\n{stanza}"
    )
    assert campaign.drives[0].identity == identity
