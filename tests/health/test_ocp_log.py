"""The OCP C0h log: nvme-cli's JSON (both key styles), the raw page, 128-bit fields exact, log
version differences, the GUID check, a drive without the log, and totality on fuzzed input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from health_paths import RECORDED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.ocp_log import c0_page, smart_add_log_json
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.health.errors import ToolOutputError
from rig.health.ocp import (
    FIELDS,
    GUID_AT,
    OCP_C0_LEN,
    ocp_smart_log,
    parse_ocp_c0_page,
    parse_ocp_smart_add_log,
    with_ocp,
)
from rig.health.snapshot import HealthSnapshot, SmartIdentity
from rig.health.tools import ToolRunner
from rig.station.build import ToolDrives

OCP = RECORDED / "nvme" / "ocp"


def _read(name: str) -> str:
    return (OCP / name).read_text()


def test_snake_case_keys_of_current_nvme_cli_with_128_bit_fields_exact() -> None:
    log = parse_ocp_smart_add_log(_read("nvme0.json"))
    assert log.log_version == 4
    assert log.incomplete_shutdowns == 37
    assert log.plp_start_count == (1 << 100) + 41  # beyond a double's 53 bits: exact
    assert log.physical_media_units_written == (1 << 64) + 123456789  # {"hi", "lo"}
    assert log.capacitor_health == 97 and log.declares_plp
    assert log.pcie_link_retraining == 2 and log.power_state_changes == 918


def test_labelled_keys_of_nvme_cli_2_3_with_128_bit_strings() -> None:
    text = _read("nvme1.json")
    assert '"PLP start count": "340282366920938463463374607431768211455"' in text
    log = parse_ocp_smart_add_log(text)
    assert log.plp_start_count == (1 << 128) - 1
    assert log.incomplete_shutdowns == 4_000_000_000
    assert log.capacitor_health == 0xFFFF and not log.declares_plp
    assert log.physical_media_units_written == (1 << 127) + 5
    # 2.3 prints the link retraining count above version 2 only, and never the state changes
    assert log.pcie_link_retraining == 1 and log.power_state_changes is None


def test_fields_of_a_later_version_are_none_in_an_older_log() -> None:
    fields = {"media_dies_offline": 3, "command_timeouts": 4, "power_state_change_count": 5}
    v5 = parse_ocp_c0_page(c0_page(5, **fields))
    v4 = parse_ocp_c0_page(c0_page(4, **fields))
    v1 = parse_ocp_c0_page(c0_page(1, **fields))
    assert (v5.media_dies_offline, v5.command_timeouts) == (3, 4)
    assert (v4.media_dies_offline, v4.command_timeouts, v4.power_state_changes) == (None, None, 5)
    assert v1.power_state_changes is None  # reserved bytes in a version-1 log
    # the same keys printed anyway (a vendor's firmware): still not read from an older log
    doc = json.loads(_read("nvme2.json"))
    doc["log_page_version"] = 4
    assert parse_ocp_smart_add_log(json.dumps(doc)).media_dies_offline is None
    assert parse_ocp_smart_add_log(_read("nvme2.json")).media_dies_offline == 1


def test_the_raw_page_and_the_json_agree_field_for_field() -> None:
    page = c0_page(
        5, incomplete_shutdowns=9, plp_start_count=(1 << 127) + 3, capacitor_health=81,
        physical_media_units_read=(1 << 80) + 1, endurance_estimate=1 << 120,
    )  # fmt: skip
    raw = parse_ocp_c0_page(page)
    assert raw == parse_ocp_smart_add_log(smart_add_log_json(page))
    assert raw.plp_start_count == (1 << 127) + 3 and raw.physical_media_units_read == (1 << 80) + 1


def test_another_guid_is_not_the_ocp_log() -> None:
    page = bytearray(c0_page(4))
    page[GUID_AT] ^= 1
    with pytest.raises(ToolOutputError, match="GUID"):
        parse_ocp_c0_page(bytes(page))
    doc = json.loads(_read("nvme0.json"))
    doc["log_page_guid"] = "0xafd514c97c6f4f9ca4f2bfea2810afc4"
    with pytest.raises(ToolOutputError, match="GUID"):
        parse_ocp_smart_add_log(json.dumps(doc))
    with pytest.raises(ToolOutputError):
        parse_ocp_c0_page(bytes(page[:511]))


def test_a_field_wider_than_its_width_is_not_reported() -> None:
    doc = json.loads(_read("nvme0.json"))
    doc["incomplete_shutdowns"] = 1 << 32  # a u32 in the page
    doc["plp_start_count"] = 1 << 128
    doc["capacitor_health"] = -1
    log = parse_ocp_smart_add_log(json.dumps(doc))
    assert log.incomplete_shutdowns is None and log.plp_start_count is None
    assert log.capacitor_health is None


def test_the_snapshot_carries_the_ocp_counters_or_the_reason_there_are_none() -> None:
    base = HealthSnapshot(identity=SmartIdentity(model="M", serial="S"), source="smartctl")
    snap = with_ocp(base, parse_ocp_smart_add_log(_read("nvme0.json")))
    assert (snap.incomplete_shutdowns, snap.capacitor_health, snap.ocp_log_version) == (37, 97, 4)
    assert snap.plp_start_count == (1 << 100) + 41 and snap.ocp_unavailable is None
    assert with_ocp(base, "no OCP C0h log").ocp_unavailable == "no OCP C0h log"


def test_nvme_cli_reads_the_log_through_the_ocp_plugin(fake_tools: ToolRunner) -> None:
    log = ocp_smart_log("/dev/nvme0", fake_tools)
    assert not isinstance(log, str) and log.incomplete_shutdowns == 37


def test_a_drive_without_the_log_says_so_and_is_not_an_error(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # nvme-cli's answer on a drive without C0h (ocp-smart-extended-log.c: the get-log failed)
    monkeypatch.setenv("FAKE_NVME_OUTPUT", str(tmp_path / "empty"))
    (tmp_path / "empty").write_text("")
    monkeypatch.setenv("FAKE_NVME_EXIT", "2")
    monkeypatch.setenv("FAKE_NVME_STDERR", "ERROR : OCP : Unable to read C0 data from buffer")
    said = ocp_smart_log("/dev/nvme7", fake_tools)
    assert isinstance(said, str) and "Unable to read C0" in said


def test_garbage_from_the_plugin_is_a_typed_error(
    fake_tools: ToolRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVME_GARBAGE", "1")
    with pytest.raises(ToolOutputError):
        ocp_smart_log("/dev/nvme0", fake_tools)


def _page_mutation() -> st.SearchStrategy[bytes]:
    """Pages with the GUID (so the fields are read) and random contents, and random blobs."""
    guid = c0_page(0)[GUID_AT:]
    body = st.binary(min_size=GUID_AT, max_size=GUID_AT)
    return st.one_of(body.map(lambda b: b + guid), st.binary(max_size=2 * OCP_C0_LEN))


@settings(max_examples=400, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(_page_mutation())
def test_raw_pages_parse_totally_and_within_every_width(page: bytes) -> None:
    try:
        log = parse_ocp_c0_page(page)
    except ToolOutputError as error:
        assert not error.unexpected
        return
    for name, (_, width, _, _, _) in FIELDS.items():
        value = getattr(log, name)
        assert value is None or 0 <= value < 1 << 8 * width


def test_a_real_stations_nvme_health_carries_the_ocp_log_and_the_ready_timeout(
    fake_tools: ToolRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = DriveNode(DriveIdentity("INTEL SSDPE2KX080T8", "SYNTH"), "/dev/nvme0", 1 << 30)
    drives = ToolDrives(fake_tools, lock_dir=str(tmp_path / "locks"))
    monkeypatch.setenv("FAKE_SMARTCTL_EXIT", "2")  # smartctl cannot answer: nvme-cli does
    snap = drives.health(node)
    assert snap.source == "nvme-cli" and snap.unsafe_shutdowns == 8
    assert snap.incomplete_shutdowns == 37 and snap.plp_start_count == (1 << 100) + 41
    assert (snap.ready_timeout_ms, snap.ready_timeout_source) == (20_000, "crto.crwmt")
