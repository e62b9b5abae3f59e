"""The simulated drive's state file (read by the smartctl shim) under concurrent writers: the pin
thread, the bus worker and the daemon all rewrite it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from fixtures.profiles import profile
from fixtures.simssd.device import SimulatedSsd
from rig.drive.identity import DriveIdentity


def test_concurrent_state_writes_neither_fail_nor_leave_a_broken_file(tmp_path: Path) -> None:
    drive = SimulatedSsd(
        0,
        DriveIdentity("RIGSIM Honest", "STATE0001", "0x5000c500a0000009"),
        profile("honest"),
        seed=1,
        mount_dir=tmp_path,
        state_dir=tmp_path,
        truth_path=tmp_path / "truth.jsonl",
    )
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(300):
                drive.write_state()
        except BaseException as error:  # collected for the assertion below
            errors.append(error)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    state = json.loads((tmp_path / "STATE0001.json").read_text())
    assert state["serial"] == "STATE0001" and state["profile"] == "honest"
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
