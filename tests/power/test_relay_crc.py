"""The relay frame's CRC is one CRC on both sides: the host's `crc16` (binascii.crc_hqx seeded
with 0xFFFF) and the firmware's `proto_crc16` (firmware/core/proto.c, compiled here as a small
shared library) agree with each other and with the published check values."""

from __future__ import annotations

import ctypes
import random
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from rig.power.relay.wire import crc16

PROTO_C = Path(__file__).resolve().parents[2] / "firmware" / "core" / "proto.c"

# (data, CRC): the CRC catalogue's check value of CRC-16/CCITT-FALSE (reveng: "123456789"),
# the empty message (the init value), and the framed examples of firmware/PROTOCOL.md (its
# `\r` examples carry the checksum of the line without the `\r`).
KNOWN = [
    (b"123456789", 0x29B1),
    (b"", 0xFFFF),
    (b"7 SYNC", 0x99B5),
    (b"8 SET 0 0", 0xFB89),
    (b"8 WDOG 50", 0x2050),
]


@pytest.fixture(scope="module")
def firmware_crc(tmp_path_factory: pytest.TempPathFactory) -> Callable[[bytes, int], int]:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build firmware/core/proto.c")
    lib = tmp_path_factory.mktemp("proto") / "libproto.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(lib), str(PROTO_C)],
        check=True,
        capture_output=True,
    )
    function = ctypes.CDLL(str(lib)).proto_crc16
    function.argtypes = [ctypes.c_char_p, ctypes.c_uint8]
    function.restype = ctypes.c_uint16
    return function


@pytest.mark.parametrize(("data", "crc"), KNOWN)
def test_known_vectors_on_both_sides(
    firmware_crc: Callable[[bytes, int], int], data: bytes, crc: int
) -> None:
    assert crc16(data) == crc
    assert firmware_crc(data, len(data)) == crc


def test_host_and_firmware_agree_on_random_lines(firmware_crc: Callable[[bytes, int], int]) -> None:
    rng = random.Random(28)
    for length in [*range(64), *(rng.randrange(64, 256) for _ in range(200))]:
        data = rng.randbytes(length)
        assert crc16(data) == firmware_crc(data, length), data.hex()
