"""Refuse before writing: a campaign the rig cannot honour, a drive that is not
there, a store path it cannot use, a file that is not a store: one line on stderr, exit 2, and
no store, run log or other file left behind; `rig status` never creates, upgrades or writes a
store. Each test failed on the code before this change (see the commit message)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fixtures.profiles import profile
from rig.store import SCHEMA_VERSION, Store
from tests.cli_runner import rig
from tests.interface.test_cli_refusals import assert_one_line_refusal, manual_campaign
from tests.loopdev import attached, loop_available
from tests.older_stores import downgrade_to_v10

MIB = 1 << 20
needs_loop = pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "ok")


def sim_campaign(region: str, profile_name: str = "plp", cycles: int = 2) -> str:
    return f"""[campaign]
name = "refusal"
cycles = {cycles}
{region}
[station]
kind = "simulated"
[cut]
delay_ms = [1, 5]
off_ms = 5
[[drive]]
channel = 0
model = "RIGSIM Enterprise PLP"
serial = "SIMREF1"
profile = "{profile_name}"
"""


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def fingerprint(path: Path) -> tuple[bytes, int, int]:
    info = os.stat(path)
    return path.read_bytes(), info.st_size, info.st_mtime_ns


def test_a_region_larger_than_the_drive_is_refused_naming_both_sizes(tmp_path: Path) -> None:
    drive = profile("plp")
    drive_bytes = drive.capacity_blocks * drive.block_size
    region_mib = 2 * drive_bytes // MIB
    (tmp_path / "c.toml").write_text(sim_campaign(f"region_mib = {region_mib}"))
    before = files(tmp_path)
    result = rig("run", "c.toml", "--quiet", cwd=tmp_path)
    assert_one_line_refusal(result, "does not fit", f"{region_mib} MiB", f"{drive_bytes} B")
    assert files(tmp_path) == before  # no store, no run log


def test_the_default_region_on_a_smaller_drive_is_recorded_as_tested(tmp_path: Path) -> None:
    """No region named: 64 MiB or the whole drive, and the drive's row says which."""
    drive = profile("plp")
    drive_bytes = drive.capacity_blocks * drive.block_size
    offset_mib = drive_bytes // MIB - 16  # leaves 16 MiB, less than the default 64
    (tmp_path / "c.toml").write_text(sim_campaign(f"region_offset_mib = {offset_mib}"))
    result = rig("run", "c.toml", "--quiet", cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    store = Store(str(tmp_path / "refusal.sqlite"), read_only=True)
    try:
        (row,) = store.all_drives()
    finally:
        store.close()
    assert row["region_blocks"] * row["block_size"] == 16 * MIB


def test_a_drive_not_on_the_bus_leaves_no_store_and_no_log(tmp_path: Path) -> None:
    campaign = manual_campaign(tmp_path, "No Such Model", "NOSUCH123")
    before = files(tmp_path)
    result = rig("run", str(campaign), cwd=tmp_path)
    assert_one_line_refusal(result, "not found on the bus", "NOSUCH123")
    assert files(tmp_path) == before


def test_a_store_in_a_missing_directory_is_refused_by_its_cause(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(sim_campaign("region_mib = 8"))
    before = files(tmp_path)
    result = rig("run", "c.toml", "--db", "nowhere/s.sqlite", cwd=tmp_path)
    assert_one_line_refusal(result, "no such directory")
    assert files(tmp_path) == before
    result = rig("status", "nowhere/s.sqlite", cwd=tmp_path)
    assert_one_line_refusal(result, "no such")
    assert "not a rig store" not in result.stderr


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@contextmanager
def read_only_folder() -> Iterator[Path]:
    """A folder that an unprivileged user may read but not write (root writes anywhere: the
    commands under test run as that user). Skips where this checkout cannot run as one."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) not installed")
    base = Path(tempfile.mkdtemp(prefix="rig-refusal-"))  # (pytest's tmp is root's alone)
    folder = base / "ro"
    try:
        folder.mkdir()
        os.chmod(base, 0o755)
        probe = subprocess.run([*NOBODY, sys.executable, "-c", "import rig"], check=False)
        if probe.returncode != 0:
            pytest.skip("this checkout cannot be run by an unprivileged user")
        yield folder
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(base)


def rig_as_nobody(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOBODY, sys.executable, "-m", "rig.interface.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def test_a_store_in_a_read_only_directory_says_permission_denied() -> None:
    with read_only_folder() as folder:
        (folder / "c.toml").write_text(sim_campaign("region_mib = 8"))
        os.chmod(folder, 0o555)
        result = rig_as_nobody("run", "c.toml", "--quiet", cwd=folder)
        assert_one_line_refusal(result, "permission denied")
        assert "not a rig store" not in result.stderr
        assert files(folder) == {"c.toml"}


def test_a_store_in_a_read_only_directory_is_still_read(tmp_path: Path) -> None:
    """A finished store archived where its reader may not write (no -shm can be made beside
    it): status and report read it, and nothing is written there."""
    (tmp_path / "c.toml").write_text(sim_campaign("region_mib = 8"))
    made = rig("run", "c.toml", "--quiet", cwd=tmp_path)
    assert made.returncode in (0, 1), made.stderr
    with read_only_folder() as folder:
        shutil.copy(tmp_path / "refusal.sqlite", folder / "s.sqlite")
        os.chmod(folder / "s.sqlite", 0o444)
        os.chmod(folder, 0o555)
        before = fingerprint(folder / "s.sqlite")
        status = rig_as_nobody("status", "s.sqlite", cwd=folder)
        assert status.returncode == 0, status.stderr
        assert "refusal" in status.stdout
        out = folder.parent / "report"
        os.chmod(folder.parent, 0o777)
        report = rig_as_nobody("report", "s.sqlite", "--out", str(out), cwd=folder)
        assert report.returncode == 0, report.stderr
        assert (out / "index.html").exists() or list(out.iterdir())
        assert fingerprint(folder / "s.sqlite") == before
        assert files(folder) == {"s.sqlite"}


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 50])
@pytest.mark.parametrize("command", ["status", "report"])
def test_status_and_report_leave_a_file_that_is_not_a_store_untouched(
    tmp_path: Path, content: bytes, command: str
) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(content)
    before, listing = fingerprint(path), files(tmp_path)
    result = rig(command, str(path), cwd=tmp_path)
    assert_one_line_refusal(result, "not a rig store")
    assert fingerprint(path) == before
    assert files(tmp_path) == listing


def test_status_reads_an_older_store_without_upgrading_it(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    store = Store(str(path))
    store.new_campaign("c", "toml", 1, "simulated")
    store.close()
    downgrade_to_v10(path)
    before = fingerprint(path)
    result = rig("status", str(path), cwd=tmp_path)
    assert_one_line_refusal(result, "schema v10", f"v{SCHEMA_VERSION}")
    assert fingerprint(path) == before


def test_a_refused_drive_never_makes_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks run before the store exists (not after, with the files removed again): the
    store's creation is never even attempted."""
    from rig.campaign import runner
    from rig.config import campaign_file
    from rig.errors import UserError
    from rig.station.build import build as station_factory
    from rig.store import creation

    created: list[str] = []
    real_create = creation.create
    monkeypatch.setattr(creation, "create", lambda path: created.append(path) or real_create(path))
    drive = profile("plp")
    too_big = 2 * drive.capacity_blocks * drive.block_size // MIB
    campaign = campaign_file.parse(sim_campaign(f"region_mib = {too_big}"))
    with pytest.raises(UserError, match="does not fit"):
        runner.run(
            station_factory,
            campaign=campaign,
            db=str(tmp_path / "s.sqlite"),
        )
    assert created == []
    assert list(tmp_path.iterdir()) == []
    fits = campaign_file.parse(sim_campaign("region_mib = 8"))
    runner.run(station_factory, campaign=fits, db=str(tmp_path / "s.sqlite"))
    assert created == [str(tmp_path / "s.sqlite")]  # (the same path does get a store)


@needs_loop
def test_a_refusal_after_the_store_was_made_removes_it(tmp_path: Path) -> None:
    """A loop device has no write cache to set: refused when the drive's run starts, after the
    store was made; the store, its beside-files and the log go again."""
    image = tmp_path / "drive.img"
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    campaign = manual_campaign(tmp_path, "Linux loop device", str(image))
    campaign.write_text(
        campaign.read_text().replace("cycles = 3\n", "cycles = 3\nregion_mib = 8\n")
        + '[health]\nwrite_cache = "on"\n'
    )
    with attached(image):
        before = files(tmp_path)
        result = rig("run", str(campaign), cwd=tmp_path)
    assert_one_line_refusal(result, "write cache")
    assert files(tmp_path) == before
