"""A real station's drive tools (rig.station.build.ToolDrives, rig.health.crosscheck, rig.bus.ready)
with fake executables on PATH replaying recorded and real captured outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from health_paths import real_file

from rig.bus.ready import NotReady, probe_once, wait_ready
from rig.config.campaign import DriveSpec
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.errors import UnsafeDeviceError
from rig.health import crosscheck
from rig.health.errors import ToolMissing
from rig.health.tools import ToolRunner
from rig.station.build import ToolDrives

SAS = DriveIdentity("HITACHI H109060SESUN600G", "SYNTH0001", "0x5000cca0123456a7", "A31A")
NVME = DriveIdentity("INTEL SSDPE2KX080T8", "SYNTHPHLJ000000008P0I", "", "VDV10170")


def sas_capture(tmp_path: Path, **changes: object) -> Path:
    """The real HITACHI SAS capture, with the serial and LU id of the recorded sg_inq/sg_vpd
    answers (the capture's own serial is redacted) and any `changes`."""
    doc = json.loads(real_file("HITACHI_H109060SESUN600G_10.json").read_text())
    doc.update({"serial_number": "SYNTH0001", "logical_unit_id": "0x5000cca0123456a7"})
    doc.update(changes)
    path = tmp_path / "smartctl.json"
    path.write_text(json.dumps(doc))
    return path


def test_sas_drive_answers_through_smartctl_and_sg3_utils(
    fake_tools: ToolRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(sas_capture(tmp_path)))
    answers = crosscheck.drive_answers("/dev/sdb", fake_tools)
    assert [a.tool for a in answers] == ["smartctl -i", "sg_inq/sg_vpd"]
    for _, ident, _ in answers:
        assert crosscheck.mismatch(SAS, ident) is None
        assert ident.serial == "SYNTH0001"
    assert answers[1][1].wwn == "naa.5000cca0123456a7"


def test_a_drive_that_answers_with_another_serial_is_a_mismatch(
    fake_tools: ToolRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = sas_capture(tmp_path, serial_number="OTHER0002")
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(capture))
    smart = crosscheck.drive_answers("/dev/sdb", fake_tools)[0][1]
    assert crosscheck.mismatch(SAS, smart) == "serial 'SYNTH0001' vs 'OTHER0002'"


def test_nvme_identity_from_id_ctrl(fake_tools: ToolRunner) -> None:
    [(tool, ident, reports)] = crosscheck.drive_answers("/dev/nvme0", fake_tools)
    assert reports == ("serial", "model")  # id-ctrl has no WWN: never asked of it
    assert tool == "nvme id-ctrl"
    assert (ident.model, ident.serial, ident.firmware) == (NVME.model, NVME.serial, NVME.firmware)
    assert crosscheck.mismatch(NVME, ident) is None


def test_a_sata_or_nvme_drive_that_cannot_answer_is_unavailable(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "2")
    with pytest.raises(crosscheck.IdentityUnavailable, match="could not open"):
        crosscheck.drive_answers("/dev/sdb", fake_tools)
    monkeypatch.setenv("FAKE_NVME_GARBAGE", "1")
    with pytest.raises(crosscheck.IdentityUnavailable):
        crosscheck.drive_answers("/dev/nvme0", fake_tools)


def test_a_device_no_tool_knows_keeps_its_udev_identity(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what the real smartctl says for a loop device: "Unable to detect device type", exit 1
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "1")
    monkeypatch.setenv("FAKE_SMARTCTL_STDERR", "/dev/loop7: Unable to detect device type")
    assert crosscheck.drive_answers("/dev/loop7", fake_tools) == []


@pytest.mark.parametrize(
    "udev, tool, differs",
    [
        # udev escapes blanks as "_"; SCSI udev models lack the vendor the tools print
        (DriveIdentity("Samsung_SSD_970", "S1"), DriveIdentity("Samsung SSD 970", "S1"), None),
        (
            DriveIdentity("H109060SESUN600G", "S1"),
            DriveIdentity("HITACHI H109060SESUN600G", "S1"),
            None,
        ),
        # ID_WWN lacks the NAA 6 extension that VPD 0x83 carries
        (
            DriveIdentity("m", "s", "0x600508b1001c4d5e"),
            DriveIdentity("m", "s", "naa.600508b1001c4d5e0123456789abcdef"),
            None,
        ),
        (
            DriveIdentity("m", "s", "0x5000c500a1b2c3d4"),
            DriveIdentity("m", "s", "naa.5000c500a1b2c3d5"),
            "wwn",
        ),
        (DriveIdentity("m", "s", "", "FW1"), DriveIdentity("m", "s", "", "FW2"), "firmware"),
        (DriveIdentity("Model A", "s"), DriveIdentity("Model B", "s"), "model"),
        (DriveIdentity("m", ""), DriveIdentity("m", "s"), None),  # compared only when both have it
    ],
)
def test_identity_comparison(udev: DriveIdentity, tool: DriveIdentity, differs: str | None) -> None:
    result = crosscheck.mismatch(udev, tool)
    assert (result.split()[0] if result else None) == differs


def node(devnode: str, identity: DriveIdentity = SAS) -> DriveNode:
    return DriveNode(identity, devnode, 600 << 30)


def test_readiness_by_test_unit_ready(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SG_TURS_EXIT", "0")  # sg_turs prints nothing when ready
    assert probe_once(node("/dev/sdb"), fake_tools) == ""
    monkeypatch.setenv("FAKE_SG_TURS_EXIT", "2")
    monkeypatch.setenv("FAKE_SG_TURS_STDERR", "device not ready")
    assert probe_once(node("/dev/sdb"), fake_tools) == "sg_turs: not ready (device not ready)"
    with pytest.raises(NotReady, match=r"not ready within 0\.05 s: sg_turs: not ready"):
        wait_ready(node("/dev/sdb"), fake_tools, 0.05)


def test_readiness_of_nvme_by_identify(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert wait_ready(node("/dev/nvme0", NVME), fake_tools, 1.0) > 0
    monkeypatch.setenv("FAKE_NVME_EXIT", "1")
    monkeypatch.setenv("FAKE_NVME_STDERR", "NVMe status: NS_NOT_READY")
    assert "NS_NOT_READY" in probe_once(node("/dev/nvme0", NVME), fake_tools)


def test_readiness_probe_with_a_missing_tool_is_a_rig_fault(tmp_path: Path) -> None:
    runner = ToolRunner(env={"PATH": str(tmp_path)})
    with pytest.raises(ToolMissing):
        wait_ready(node("/dev/sdb"), runner, 1.0)


def test_readiness_of_a_plain_block_device_by_a_direct_read(tmp_path: Path) -> None:
    missing = DriveNode(SAS, str(tmp_path / "gone"), 4096, 4096)
    assert probe_once(missing, ToolRunner()).startswith("open:")


def test_tool_drives_refuse_a_drive_whose_own_answer_names_another_drive(
    fake_tools: ToolRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(sas_capture(tmp_path, serial_number="X9")))
    drives = ToolDrives(fake_tools, lock_dir=str(tmp_path / "locks"))
    spec = DriveSpec(0, SAS)
    with pytest.raises(UnsafeDeviceError) as refused:
        drives.open_target(node("/dev/sdb"), spec)
    message = str(refused.value)
    assert "\n" not in message
    assert message == (
        "refusing /dev/sdb: udev and smartctl -i disagree on its identity"
        " (serial 'SYNTH0001' vs 'X9')"
    )


def test_tool_drives_health_and_write_cache(
    fake_tools: ToolRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drives = ToolDrives(fake_tools, lock_dir=str(tmp_path / "locks"))
    # NVMe: smartctl cannot answer here, nvme-cli does (id-ctrl + smart-log)
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "2")
    snap = drives.health(node("/dev/nvme0", NVME))
    assert snap.source == "nvme-cli" and snap.unsafe_shutdowns == 8
    assert drives.write_cache(node("/dev/nvme0", NVME), None) is True
    # a loop device has no write-cache control: unknown, and setting it is an error
    loop = node("/dev/loop3", DriveIdentity("Linux loop device", "/tmp/x"))
    assert drives.write_cache(loop, None) is None
    with pytest.raises(Exception, match="no write-cache control"):
        drives.write_cache(loop, False)


@pytest.mark.parametrize(
    "udev, answer, differs",
    [
        # a field the tool always reports for such a drive, present on one side only
        (
            DriveIdentity("m", "S1", "0x5000c500a1b2c3d4"),
            DriveIdentity("m", "", "0x5000c500a1b2c3d4"),
            "serial",
        ),
        (DriveIdentity("m", "S1", "0x5000c500a1b2c3d4"), DriveIdentity("m", "S1", ""), "wwn"),
        (
            DriveIdentity("m", "", "0x5000c500a1b2c3d4"),
            DriveIdentity("m", "S1", "0x5000c500a1b2c3d4"),
            "serial",
        ),
        (
            DriveIdentity("", "S1", "0x5000c500a1b2c3d4"),
            DriveIdentity("m", "S1", "0x5000c500a1b2c3d4"),
            "model",
        ),
        (
            DriveIdentity("m", "S1", "0x5000c500a1b2c3d4"),
            DriveIdentity("m", "S1", "naa.5000c500a1b2c3d4"),
            None,
        ),
    ],
)
def test_a_field_on_one_side_only_is_a_disagreement(
    udev: DriveIdentity, answer: DriveIdentity, differs: str | None
) -> None:
    """An ATA drive reports serial, model and WWN in IDENTIFY (udev takes its WWN from there):
    the cross-check compares only what both report, so a field missing on one side must not
    pass as a match by default (tried against an independent simulator, it let a node whose
    record named one drive pass for another)."""
    got = crosscheck.disagreement(
        udev, crosscheck.Answer("smartctl -i", answer, crosscheck.WITH_WWN)
    )
    assert (got.split()[0] if got else None) == differs
    # NVMe's id-ctrl carries no WWN: udev's namespace WWN is not asked of it
    nvme = crosscheck.Answer("nvme id-ctrl", DriveIdentity("m", "S1"), crosscheck.SERIAL_MODEL)
    assert crosscheck.disagreement(DriveIdentity("m", "S1", "eui.0025385b71b0a1c2"), nvme) is None


def test_tool_drives_read_nvme_dlfeat_from_nvme_cli(
    fake_tools: ToolRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """smartctl prints no DLFEAT: for an NVMe drive the health answer takes it from `nvme
    id-ns` (the checker's rule for discards depends on it); a drive whose id-ns cannot be read
    promises nothing."""
    drives = ToolDrives(fake_tools, lock_dir=str(tmp_path / "locks"))
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "2")  # nvme-cli answers all (id-ctrl, smart-log)
    assert drives.health(node("/dev/nvme0", NVME)).zeroes_after_discard is True
    monkeypatch.delenv("FAKE_SMARTCTL_EXIT")  # smartctl answers; id-ns then adds DLFEAT
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file("INTEL_SSDPE2KX080T8_1.json")))
    snap = drives.health(node("/dev/nvme0", NVME))
    assert snap.source == "smartctl" and snap.zeroes_after_discard is True
    monkeypatch.setenv("FAKE_NVME_EXIT", "1")  # nvme-cli refuses: no promise, no error
    assert drives.health(node("/dev/nvme0", NVME)).zeroes_after_discard is None
