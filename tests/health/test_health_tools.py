"""Invocation through fake executables on PATH (no mocks of subprocess)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from health_paths import RECORDED, real_file

from rig.errors import RigError
from rig.health.errors import (
    ToolFailed,
    ToolMissing,
    ToolOutputError,
    ToolTimeout,
    ToolUsageError,
)
from rig.health.nvme import nvme_id_ctrl, nvme_smart_log, nvme_snapshot
from rig.health.scsi import Readiness, sg_inq, sg_turs, sg_vpd_wwn
from rig.health.snapshot import SmartctlExit
from rig.health.tools import ToolRunner, smartctl_identity, smartctl_snapshot
from rig.health.wcache import read_write_cache, set_write_cache

INTEL_SATA = "sat-Intel_S4510_S4610_S4500_S4600_Series_SSDs-INTEL_SSDSC2KB480G8-sdm.json"


def test_smartctl_snapshot_argv_and_parse(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "argv.log"
    monkeypatch.setenv("FAKE_ARGV_LOG", str(log))
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file(INTEL_SATA)))
    reading = smartctl_snapshot("/dev/sdm", fake_tools)
    assert json.loads(log.read_text()) == ["smartctl", "--json=c", "-x", "/dev/sdm"]
    assert reading.snapshot.unsafe_shutdowns == 7
    assert reading.exit_status == SmartctlExit(0) and not reading.partial


def test_smartctl_identity_uses_dash_i_and_device_type(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "argv.log"
    monkeypatch.setenv("FAKE_ARGV_LOG", str(log))
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file(INTEL_SATA)))
    ident = smartctl_identity("/dev/sdm", fake_tools, device_type="sat")
    assert json.loads(log.read_text()) == [
        "smartctl",
        "--json=c",
        "-i",
        "--device=sat",
        "/dev/sdm",
    ]
    assert ident.wwn == "naa.55cd2e40499602d2"


@pytest.mark.parametrize(
    ("status", "flags"),
    [
        (8, SmartctlExit.DISK_FAILING),
        (16, SmartctlExit.PREFAIL_AT_THRESHOLD),
        (32, SmartctlExit.PAST_THRESHOLD),
        (64, SmartctlExit.ERROR_LOG),
        (128, SmartctlExit.SELFTEST_LOG),
        (
            8 | 64 | 128,
            SmartctlExit.DISK_FAILING | SmartctlExit.ERROR_LOG | SmartctlExit.SELFTEST_LOG,
        ),
    ],
)
def test_health_bits_are_data_not_failures(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, status: int, flags: SmartctlExit
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file(INTEL_SATA)))
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", str(status))
    reading = smartctl_snapshot("/dev/sdm", fake_tools)
    assert reading.health_flags == flags
    assert not reading.partial
    assert reading.snapshot.power_cycles == 10


def test_bit2_is_a_partial_reading(fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file(INTEL_SATA)))
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "4")
    reading = smartctl_snapshot("/dev/sdm", fake_tools)
    assert reading.partial and reading.health_flags == SmartctlExit(0)


def test_bit0_command_line_error_is_a_rig_fault(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(RECORDED / "smartctl/cmdline-error.json"))
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "1")
    with pytest.raises(ToolUsageError, match="UNRECOGNIZED OPTION") as err:
        smartctl_snapshot("/dev/sdz", fake_tools)
    assert isinstance(err.value, RigError) and err.value.exit_code == 1


def test_bit1_open_failure_raises_with_smartctl_message(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(RECORDED / "smartctl/open-failed.json"))
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "2")
    with pytest.raises(ToolFailed, match="No such device") as err:
        smartctl_snapshot("/dev/sdzz", fake_tools)
    assert not isinstance(err.value, RigError)  # may be the drive: the campaign decides


def test_open_failure_with_health_bits_still_raises(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_STDERR", "cannot open")
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", str(2 | 64))
    with pytest.raises(ToolFailed, match="cannot open"):
        smartctl_snapshot("/dev/sdq", fake_tools)


def test_timeout_kills_the_tool(fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file(INTEL_SATA)))
    monkeypatch.setenv("FAKE_SMARTCTL_SLEEP", "30")
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        smartctl_snapshot("/dev/sdm", fake_tools, timeout_s=0.5)
    assert time.monotonic() - start < 10
    assert err.value.timeout_s == 0.5 and err.value.argv[0] == "smartctl"


def test_missing_tool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory
    with pytest.raises(ToolMissing, match="smartctl: not found") as err:
        smartctl_snapshot("/dev/sda", ToolRunner())
    assert isinstance(err.value, RigError)


def test_runner_env_overrides_process_env(tmp_path: Path) -> None:
    runner = ToolRunner(env={"PATH": str(tmp_path)})
    with pytest.raises(ToolMissing):
        runner.run(["nvme", "list"])


def test_garbage_output(fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_GARBAGE", "1")
    with pytest.raises(ToolOutputError, match="not JSON"):
        smartctl_snapshot("/dev/sda", fake_tools)


def test_truncated_output(fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_OUTPUT", str(real_file(INTEL_SATA)))
    monkeypatch.setenv("FAKE_SMARTCTL_TRUNCATE", "700")
    with pytest.raises(ToolOutputError, match="truncated or garbage"):
        smartctl_snapshot("/dev/sdm", fake_tools)


def test_empty_output_with_exit_zero(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "0")
    with pytest.raises(ToolOutputError, match="printed nothing"):
        smartctl_snapshot("/dev/sda", fake_tools)


def test_nvme_cli_json(fake_tools: ToolRunner) -> None:
    ctrl = nvme_id_ctrl("/dev/nvme0", fake_tools)
    assert (ctrl.model, ctrl.serial, ctrl.firmware) == (
        "INTEL SSDPE2KX080T8",
        "SYNTHPHLJ000000008P0I",
        "VDV10170",
    )
    assert (ctrl.vid, ctrl.ieee_oui, ctrl.total_capacity) == (0x8086, 0x5CD2E4, 8001563222016)
    assert ctrl.volatile_write_cache is False and ctrl.awupf == 0 and ctrl.namespaces == 128
    log = nvme_smart_log("/dev/nvme0", fake_tools)
    assert (log.temperature_c, log.available_spare, log.percentage_used) == (29, 100, 0)
    assert (log.power_cycles, log.unsafe_shutdowns, log.media_errors) == (22, 8, 0)
    assert log.data_units_written == 184919244


def test_nvme_cli_snapshot_agrees_with_smartctl_capture(fake_tools: ToolRunner) -> None:
    from rig.health.smart import parse_smartctl_json

    via_nvme = nvme_snapshot("/dev/nvme0", fake_tools)
    via_smartctl = parse_smartctl_json(real_file("INTEL_SSDPE2KX080T8_1.json").read_text())
    for name in (
        "power_cycles",
        "power_on_hours",
        "unsafe_shutdowns",
        "media_errors",
        "critical_warning",
        "percentage_used",
        "host_bytes_written",
        "temperature_c",
        "available_spare",
    ):
        assert getattr(via_nvme, name) == getattr(via_smartctl, name), name
    assert json.loads(via_nvme.raw)["smart_log"]["unsafe_shutdowns"] == "8"


def test_nvme_smart_log_after_bad_cut(fake_tools: ToolRunner) -> None:
    log = nvme_smart_log("/dev/nvme1", fake_tools)
    assert log.critical_warning == 12  # -H object form
    assert log.data_units_written == 2**64 + 12345
    assert log.temperature_c is None  # 0 K: not reported
    assert log.media_errors == 3


def test_nvme_failure_and_garbage(fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVME_EXIT", "2")
    monkeypatch.setenv("FAKE_NVME_STDERR", "identify controller: Permission denied")
    with pytest.raises(ToolFailed, match="Permission denied"):
        nvme_id_ctrl("/dev/nvme0", fake_tools)
    monkeypatch.delenv("FAKE_NVME_EXIT")
    monkeypatch.delenv("FAKE_NVME_STDERR")
    monkeypatch.setenv("FAKE_NVME_GARBAGE", "1")
    with pytest.raises(ToolOutputError):
        nvme_smart_log("/dev/nvme0", fake_tools)


def test_sg_inq_and_vpd(fake_tools: ToolRunner) -> None:
    inq = sg_inq("/dev/sdb", fake_tools)
    assert (inq.vendor, inq.product, inq.revision, inq.serial) == (
        "HITACHI",
        "H109060SESUN600G",
        "A31A",
        "SYNTH0001",
    )
    assert sg_vpd_wwn("/dev/sdb", fake_tools) == "naa.5000cca0123456a7"  # LU, not target port
    assert sg_vpd_wwn("/dev/sda", fake_tools) == "naa.55cd2e414d3a1b2c"


@pytest.mark.parametrize(
    ("status", "readiness"),
    [
        (0, Readiness.READY),
        (2, Readiness.NOT_READY),
        (6, Readiness.UNIT_ATTENTION),
        (15, Readiness.NO_DEVICE),
        (52, Readiness.NO_DEVICE),  # 50 + ENOENT (sg3_utils >= 1.45)
        (56, Readiness.NO_DEVICE),  # 50 + ENXIO
        (63, Readiness.FAILED),  # 50 + EACCES: a host problem, not absence
        (33, Readiness.TIMEOUT),
        (3, Readiness.FAILED),
    ],
)
def test_sg_turs_exit_status(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, status: int, readiness: Readiness
) -> None:
    monkeypatch.setenv("FAKE_SG_TURS_EXIT", str(status))
    result = sg_turs("/dev/sdb", fake_tools)
    assert result.readiness is readiness and result.exit_code == status
    assert result.ready == (status == 0)


def test_sg_turs_hang_is_a_timeout_error(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SG_TURS_SLEEP", "30")
    with pytest.raises(ToolTimeout):
        sg_turs("/dev/sdb", fake_tools, timeout_s=0.3)


def test_write_cache_read(fake_tools: ToolRunner) -> None:
    assert read_write_cache("hdparm", "/dev/sda", fake_tools).enabled is True
    sas = read_write_cache("sdparm", "/dev/sdb", fake_tools)
    assert (sas.enabled, sas.changeable, sas.default, sas.saved) == (True, True, True, True)
    sata = read_write_cache("sdparm", "/dev/sda", fake_tools)
    assert (sata.enabled, sata.changeable, sata.saved) == (False, True, None)
    assert read_write_cache("nvme", "/dev/nvme0", fake_tools).enabled is True
    assert read_write_cache("nvme", "/dev/nvme1", fake_tools).enabled is False
    with pytest.raises(ToolOutputError, match="not supported"):
        read_write_cache("hdparm", "/dev/sdc", fake_tools)


def test_write_cache_set_argv_and_readback(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log = tmp_path / "argv.log"
    monkeypatch.setenv("FAKE_ARGV_LOG", str(log))
    assert set_write_cache("nvme", "/dev/nvme0", True, fake_tools).enabled
    assert set_write_cache("sdparm", "/dev/sdb", True, fake_tools, save=True).enabled
    assert set_write_cache("hdparm", "/dev/sda", True, fake_tools).enabled
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [
        ["nvme", "set-feature", "/dev/nvme0", "--feature-id=6", "--value=1"],
        ["nvme", "get-feature", "/dev/nvme0", "--feature-id=6", "--sel=0"],
        ["sdparm", "--set=WCE=1", "--save", "/dev/sdb"],
        ["sdparm", "--get=WCE", "/dev/sdb"],
        ["hdparm", "-W1", "/dev/sda"],
        ["hdparm", "-W", "/dev/sda"],
    ]


def test_write_cache_set_that_does_not_stick(fake_tools: ToolRunner) -> None:
    # the recorded drive still reports WCE=1 after being asked for 0
    with pytest.raises(ToolOutputError, match="drive reports on"):
        set_write_cache("sdparm", "/dev/sdb", False, fake_tools)
