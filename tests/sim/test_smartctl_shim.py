"""The simulated drives' smartctl answers go through the production parser unchanged, in both
flavours, and their counters mean what a real drive's do."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fixtures.simssd import nvme_cli, smartctl
from rig.drive.identity import DriveIdentity
from rig.health.nvme import parse_nvme_id_ns_zeroes
from rig.health.smart import parse_smartctl_json


def state(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "RIGSIM Consumer Honest",
        "serial": "SIM0042",
        "wwn": "0x5000c500a0000042",
        "firmware": "RSIM0100",
        "interface": "nvme",
        "block_size": 4096,
        "capacity_bytes": 1 << 28,
        "rated_endurance_gb": 64.0,
        "present": True,
        "read_only": False,
        "power_cycles": 7,
        "unsafe_shutdowns": 6,
        "media_errors": 2,
        "error_log_entries": 3,
        "bytes_written": 16_000_000_000,
        "bytes_read": 1_024_000,
        "power_on_s": 7300.0,
    }
    return {**base, **changes}


@pytest.mark.parametrize("interface", ["nvme", "ata"])
def test_counters_and_identity_through_the_real_parser(interface: str) -> None:
    s = state(interface=interface)
    doc = smartctl.answer(["--json=c", "-x", "/dev/null"], "/dev/null", s)
    snap = parse_smartctl_json(smartctl.json.dumps(doc))
    assert snap.identity.protocol == ("NVMe" if interface == "nvme" else "ATA")
    campaign_names = DriveIdentity("RIGSIM Consumer Honest", "SIM0042", "0x5000c500a0000042")
    assert campaign_names.matches(snap.identity.to_drive_identity())
    assert snap.identity.capacity_bytes == 1 << 28 and snap.identity.logical_block_size == 4096
    assert snap.power_cycles == 7 and snap.unsafe_shutdowns == 6
    assert snap.power_on_hours == 2
    assert snap.percentage_used == 25  # 16 GB of a 64 GB rating
    assert snap.host_bytes_written is not None
    assert abs(snap.host_bytes_written - 16_000_000_000) < 512_000
    if interface == "nvme":
        assert snap.media_errors == 2 and snap.error_log_entries == 3
        assert snap.unsafe_shutdowns_source == "nvme:unsafe_shutdowns"
    else:
        assert snap.reported_uncorrectable == 2
        assert snap.unsafe_shutdowns_source == "ata:174:Unexpect_Power_Loss_Ct"
    assert snap.smart_passed is True


def test_read_only_drive_raises_the_critical_warning() -> None:
    doc = smartctl.answer(["--json"], "/dev/null", state(read_only=True))
    snap = parse_smartctl_json(smartctl.json.dumps(doc))
    assert snap.critical_warning == 0x08 and snap.smart_passed is False
    assert doc["smartctl"]["exit_status"] & 8


def test_a_drive_off_the_bus_answers_like_smartctl_on_a_missing_device() -> None:
    doc = smartctl.answer(["--json"], "/dev/loop-none", state(present=False))
    assert doc["smartctl"]["exit_status"] == 2
    assert "No such device" in doc["smartctl"]["messages"][0]["string"]


@pytest.mark.parametrize(("zeroes", "promise"), [(True, True), (False, None)])
def test_the_nvme_shims_id_ns_says_the_profiles_promise_of_zeroes(
    zeroes: bool, promise: bool | None
) -> None:
    """smartctl prints no DLFEAT: the twin's NVMe flavour answers nvme-cli's id-ns, read by the
    production parser (DLFEAT 001b: zeroes after a deallocate; 000b: not reported, no promise)."""
    doc = nvme_cli.id_ns(state(discard_zeroes=zeroes))
    assert parse_nvme_id_ns_zeroes(json.dumps(doc)) is promise
    assert doc["nsze"] == (1 << 28) // 4096 and doc["lbafs"][doc["flbas"]]["ds"] == 12


def test_the_nvme_shim_answers_id_ns_of_a_simulated_drive_only() -> None:
    """Anything but a simulated drive goes to the real nvme (here: /dev/null, refused by it or,
    without nvme-cli, by the shim's own line); never an answer made up for a real device."""
    shim = Path(nvme_cli.__file__).parent / "bin" / "nvme"
    done = subprocess.run(
        [str(shim), "id-ns", "/dev/null", "--output-format=json"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "dlfeat" not in done.stdout
