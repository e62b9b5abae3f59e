"""The guest station's NBD server (fixtures/guest/nbd.py) speaks the protocol QEMU's nbd client
speaks: fixed newstyle handshake, NBD_OPT_GO with export size, flags and block sizes, READ,
WRITE with FUA, FLUSH, TRIM, DISC; a power cut fails every request after its edge, and a drive in a
fixed slot answers again only once the host re-initialised it. A raw client here; tests/guest
runs QEMU's own against it.

The slot's rules are the station's (fixtures/guest/drive.py: GuestDrive), so each check runs
with the fault core's drive and with an independent model (tests/guest/ramdrive.py) given to
the station the same way."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from fixtures.guest import nbd
from fixtures.guest.drive import DriveModel, GuestDrive, GuestDriveSpec
from fixtures.guest.faultdrive import fault_core_drive
from fixtures.profiles import load_profiles
from rig.io import media
from tests.guest.ramdrive import RamDrive


class Client:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        magic, opt, flags = struct.unpack(">QQH", self.recv(18))
        assert (magic, opt) == (nbd.NBDMAGIC, nbd.IHAVEOPT)
        assert flags & nbd.FLAG_FIXED_NEWSTYLE
        self.sock.sendall(struct.pack(">I", nbd.FLAG_FIXED_NEWSTYLE | nbd.FLAG_NO_ZEROES))
        self.option(8, b"")  # structured replies: refused, a simple-reply client goes on
        assert self.reply()[1] == nbd.REP_ERR_UNSUP
        self.option(nbd.OPT_GO, struct.pack(">I", 4) + b"nbd0" + struct.pack(">H", 0))
        infos = {}
        while True:
            _, kind, data = self.reply()
            if kind == nbd.REP_ACK:
                break
            assert kind == nbd.REP_INFO
            infos[struct.unpack(">H", data[:2])[0]] = data[2:]
        self.size, self.tflags = struct.unpack(">QH", infos[nbd.INFO_EXPORT])
        self.min_block = struct.unpack(">III", infos[nbd.INFO_BLOCK_SIZE])[0]
        self.cookie = 0

    def recv(self, size: int) -> bytes:
        return nbd._recv(self.sock, size)

    def option(self, option: int, data: bytes) -> None:
        self.sock.sendall(struct.pack(">QII", nbd.IHAVEOPT, option, len(data)) + data)

    def reply(self) -> tuple[int, int, bytes]:
        magic, option, kind, length = struct.unpack(">QIII", self.recv(20))
        assert magic == nbd.REPLY_MAGIC
        return option, kind, self.recv(length)

    def request(self, kind: int, offset: int, length: int, data: bytes = b"", flags: int = 0):  # type: ignore[no-untyped-def]
        self.cookie += 1
        header = struct.pack(">IHHQQI", nbd.REQUEST_MAGIC, flags, kind, self.cookie, offset, length)
        self.sock.sendall(header + data)
        magic, error, cookie = struct.unpack(">IIQ", self.recv(16))
        assert magic == nbd.SIMPLE_REPLY_MAGIC and cookie == self.cookie
        payload = self.recv(length) if kind == nbd.CMD_READ and error == 0 else b""
        return error, payload


MODELS = ["fault-core", "ram"]


def drive(tmp_path: Path, slot: str, kind: str) -> GuestDrive:
    spec = GuestDriveSpec(0, slot, "honest", "T0001")
    model: DriveModel
    if kind == "ram":
        model = RamDrive("ramdisk")
    else:
        model = fault_core_drive(spec, load_profiles()["honest"])
    return GuestDrive(spec, model, tmp_path / "t.jsonl", print, print)


def wait_powered(target: GuestDrive, timeout_s: float = 5.0) -> None:
    """Until the model opens again after power-on (its boot delay), by its own interface."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            target.model.open()
            return
        except OSError:
            assert time.monotonic() < deadline, "the drive did not come back"
            time.sleep(0.01)


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("slot", ["nvme-hotplug", "nvme-fixed"])
def test_the_server_serves_a_drive_and_a_cut_fails_what_follows(
    tmp_path: Path, slot: str, kind: str
) -> None:
    target = drive(tmp_path, slot, kind)
    server = nbd.NbdServer(str(tmp_path / "nbd.sock"), target)
    try:
        client = Client(str(tmp_path / "nbd.sock"))
        assert client.size == 256 << 20 and client.min_block == 4096
        assert client.tflags & nbd.TFLAG_SEND_FLUSH and client.tflags & nbd.TFLAG_SEND_FUA
        block = media.build(media.WriteRecord(1, 3, np.array([7], np.uint64), 0, 1, 0, 0), 4096)
        assert client.request(nbd.CMD_WRITE, 3 * 4096, 4096, block.tobytes())[0] == 0
        assert client.request(nbd.CMD_FLUSH, 0, 0)[0] == 0
        error, data = client.request(nbd.CMD_READ, 3 * 4096, 4096)
        assert error == 0 and data == block.tobytes()
        fua = nbd.CMD_FLAG_FUA
        assert client.request(nbd.CMD_WRITE, 4 * 4096, 4096, bytes(4096), fua)[0] == 0
        assert client.request(nbd.CMD_READ, 100, 4096)[0] != 0  # not block aligned
        # TRIM (the guest's UNMAP / DSM deallocate / ATA TRIM): the blocks read zero after it
        assert client.tflags & nbd.TFLAG_SEND_TRIM
        assert client.request(nbd.CMD_WRITE, 5 * 4096, 4096, block.tobytes())[0] == 0
        assert client.request(nbd.CMD_TRIM, 4 * 4096, 2 * 4096)[0] == 0
        assert client.request(nbd.CMD_READ, 4 * 4096, 2 * 4096) == (0, bytes(2 * 4096))
        assert client.request(nbd.CMD_READ, 3 * 4096, 4096) == (0, block.tobytes())  # untouched
        assert client.tflags & nbd.TFLAG_SEND_WRITE_ZEROES  # (QEMU's NVMe format sends these)
        assert client.request(nbd.CMD_WRITE, 5 * 4096, 4096, block.tobytes())[0] == 0
        assert client.request(nbd.CMD_WRITE_ZEROES, 5 * 4096, 4096)[0] == 0
        assert client.request(nbd.CMD_READ, 5 * 4096, 4096) == (0, bytes(4096))
        target.set_power(False, 1)  # the off edge
        assert client.request(nbd.CMD_READ, 3 * 4096, 4096)[0] == nbd.errno.EIO
        assert client.request(nbd.CMD_WRITE, 0, 4096, bytes(4096))[0] == nbd.errno.EIO
        target.set_power(True, 2)  # back after the boot delay (50 ms)
        wait_powered(target)
        assert target.model.cuts() == 1
        # a hot-plug slot comes back with a new connection (device_add); a fixed one keeps its
        # connection and fails until the host initialises the device again
        if slot == "nvme-fixed":
            assert client.request(nbd.CMD_READ, 3 * 4096, 4096)[0] == nbd.errno.EIO
            target.reinitialised()
            assert client.request(nbd.CMD_READ, 3 * 4096, 4096) == (0, block.tobytes())
        else:
            again = Client(str(tmp_path / "nbd.sock"))
            assert again.request(nbd.CMD_READ, 3 * 4096, 4096) == (0, block.tobytes())
        client.sock.sendall(struct.pack(">IHHQQI", nbd.REQUEST_MAGIC, 0, nbd.CMD_DISC, 0, 0, 0))
    finally:
        server.close()
        target.stop()
    if slot == "nvme-fixed":  # the re-initialisation is in the truth log
        assert '"kind": "host_reinit"' in (tmp_path / "t.jsonl").read_text()


@pytest.mark.parametrize("kind", MODELS)
def test_the_station_describes_any_model_in_its_slot(tmp_path: Path, kind: str) -> None:
    """QEMU's device and the identity the guest will see come from the slot and the model's
    name and block size; a SATA slot (IDE: 512-byte sectors) refuses a 4 KiB drive."""
    scsi = drive(tmp_path, "scsi-hotplug", kind)
    device = scsi.device("vscsi.0")
    name = scsi.model.name
    assert (device["driver"], device["product"], device["logical_block_size"]) == (
        "scsi-hd",
        name,
        scsi.model.block_size(),
    )
    assert (
        scsi.identity.model == f"RIGSIM {name}" and scsi.wwn and device["wwn"] == int(scsi.wwn, 16)
    )
    spec = GuestDriveSpec(3, "sata-fixed", "honest", "T0003")
    small = RamDrive("ramdisk", 512) if kind == "ram" else None
    sata = GuestDrive(
        spec,
        small or fault_core_drive(spec, load_profiles()["honest"]),
        tmp_path / "t.jsonl",
        print,
        print,
    )
    assert sata.device("ide.3")["model"] == sata.identity.model and sata.block_size() == 512
    with pytest.raises(ValueError, match="512-byte"):
        GuestDrive(spec, RamDrive("ramdisk", 4096), tmp_path / "t.jsonl", print, print)
