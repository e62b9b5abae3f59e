"""Whether a drive promises zeroes after a discard, as the health layer reads it (the checker's
rule for discards depends on it: docs/checker.md, "Discards")."""

from __future__ import annotations

import json

from fixtures.faultcore import Profile
from fixtures.profiles import profile
from fixtures.virtual_drive import VirtualDrive
from fixtures.virtual_health import VirtualHealth
from rig.drive.identity import DriveIdentity
from rig.health.nvme import parse_nvme_id_ns_zeroes
from rig.health.smart import parse_smartctl_json
from tests.health.health_paths import real_file


def test_real_ata_ssds_with_deterministic_zeroes_after_trim_promise_them() -> None:
    ssd = parse_smartctl_json(real_file("SAMSUNG_MZ7WD240HAFV-00003_21.json").read_text())
    assert ssd.zeroes_after_discard is True
    hdd = parse_smartctl_json(real_file("HGST_HUS724020ALE640_28.json").read_text())
    assert hdd.zeroes_after_discard is False  # no TRIM at all: no promise


def test_smartctl_says_nothing_of_nvme_dlfeat_and_nvme_cli_does() -> None:
    nvme = parse_smartctl_json(real_file("nvme-null-CT250P2SSD8-nvme0.json").read_text())
    assert nvme.zeroes_after_discard is None
    assert parse_nvme_id_ns_zeroes(json.dumps({"dlfeat": 1})) is True
    assert parse_nvme_id_ns_zeroes(json.dumps({"dlfeat": 0x9})) is True  # bit 3: write zeroes
    assert parse_nvme_id_ns_zeroes(json.dumps({"dlfeat": 2})) is False  # reads 0xFF
    assert parse_nvme_id_ns_zeroes(json.dumps({"dlfeat": 0})) is None  # not reported


def test_scsi_lbprz_is_read_from_the_provisioning_page() -> None:
    doc = json.loads(real_file("HITACHI_H109060SESUN600G_10.json").read_text())
    assert parse_smartctl_json(json.dumps(doc)).zeroes_after_discard is None
    for lbprz, promise in ((1, True), (0, False), (2, False)):
        doc["scsi_lb_provisioning"] = {
            "name": "thin provisioned",
            "value": 2,
            "management_enabled": {"name": "LBPME", "value": 1},
            "read_zeros": {"name": "LBPRZ", "value": lbprz},
        }
        assert parse_smartctl_json(json.dumps(doc)).zeroes_after_discard is promise


def test_simulated_drives_announce_what_their_profile_promises() -> None:
    for name in ("honest", "plp", "trim-resurrect", "trim-eats-writes"):
        drive = VirtualDrive(DriveIdentity("SIM", f"S-{name}"), profile(name))
        health = VirtualHealth([drive])
        assert health.health(drive.node()).zeroes_after_discard is True, name
    no_promise = VirtualDrive(
        DriveIdentity("SIM", "S-np"), Profile("np", "SIM", discard_zeroes=False)
    )
    assert VirtualHealth([no_promise]).health(no_promise.node()).zeroes_after_discard is None
