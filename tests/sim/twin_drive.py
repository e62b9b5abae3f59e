"""One drive of the full-system twin as a block device, without the rig or the firmware: the
simulator's own SimulatedSsd served by its own FUSE server and attached as a loop device, for
tests of the data path through the kernel (discard, throughput models)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from fixtures.profiles import profile
from fixtures.simssd.device import SimulatedSsd
from fixtures.simssd.fuse import FuseServer
from rig.drive.identity import DriveIdentity


@contextlib.contextmanager
def twin_drive(tmp_path: Path, profile_name: str, tag: str) -> Iterator[SimulatedSsd]:
    """The drive, attached (its node is `/dev/loop{drive.index}`); removed afterwards, also when
    the test fails. `tag` keeps its serial unique to this test process."""
    serial = f"TD{tag}{os.getpid() % 1_000_000}"
    wwn = f"0x5000c5{os.getpid() % (1 << 24):06x}0d0d"
    mount, state = tmp_path / "mnt", tmp_path / "state"
    mount.mkdir()
    state.mkdir()
    drive = SimulatedSsd(
        0,
        DriveIdentity(f"RIGSIM {profile_name}", serial, wwn),
        profile(profile_name),
        seed=1,
        mount_dir=mount,
        state_dir=state,
        truth_path=tmp_path / "truth.jsonl",
    )
    server = FuseServer(str(mount), {drive.file_name: drive}, name="rigsimtest", workers=4)
    try:
        drive.start()
        deadline = time.monotonic() + 20
        while drive.index is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert drive.index is not None, "the drive did not attach"
        yield drive
    finally:
        drive.stop()
        server.stop()
