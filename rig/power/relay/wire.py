"""The board's line format (`firmware/PROTOCOL.md` section 1): framing, CRC, parsing. Pure
functions and values, no I/O, no threads."""

from __future__ import annotations

import binascii
from dataclasses import dataclass

from rig.errors import PowerError

PROTOCOL_VERSION = 3
FIRMWARE_VERSION = "0.3.0"  # the firmware release that speaks PROTOCOL_VERSION
# CUTAT takes the nearest MCU instant with the given low 32 bits: up to 2^31 us ahead. Longer
# delays (over 35 minutes, where a line's latency does not matter) go as a CUT.
CUTAT_AHEAD_MAX_US = 2**31 - 1_000_000
MAX_REQUEST = 80
MAX_LINE = 200
DURATION_MAX_US = 4_000_000_000


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF); crc16(b"123456789") == 0x29B1.
    `binascii.crc_hqx` is that CRC (MSB first, no reflection, no final XOR) seeded with the
    init value; the firmware's `proto_crc16` computes the same (tests/power/test_relay_crc.py)."""
    return binascii.crc_hqx(data, 0xFFFF)


def frame(body: str) -> bytes:
    """`body` with `*CRC` and the newline appended. A body with a byte outside 0x20..0x7E is
    refused (`ValueError`): the board answers such a line `- ERR frame`, and a `\\r` in it is
    exactly what an older firmware dropped before executing the rest."""
    raw = body.encode("ascii")
    if not all(0x20 <= b <= 0x7E for b in raw):
        raise ValueError(f"request body not printable ASCII: {body!r}")
    return raw + b"*%04X\n" % crc16(raw)


def request_line(seq: int, command: str, args: tuple[int, ...]) -> tuple[str, bytes]:
    """The body of request `seq` and its framed line; `ValueError` if the board would refuse
    it as too long."""
    body = " ".join([str(seq), command, *(str(a) for a in args)])
    wire = frame(body)
    if len(wire) - 1 > MAX_REQUEST:
        raise ValueError(f"request too long: {body}")
    return body, wire


class BadLine(ValueError):
    """A line from the board that fails its checksum or framing."""


@dataclass(frozen=True)
class Line:
    event: bool
    seq: int | None  # reply: echoed request seq (None for "-"); event: evseq
    word: str  # OK / ERR for replies, the KIND for events
    fields: dict[str, str]
    args: tuple[str, ...]
    rx_ns: int  # host time the line had been received by

    def num(self, key: str) -> int:
        try:
            return int(self.fields[key])
        except (KeyError, ValueError) as e:
            raise PowerError(f"relay board line lacks a numeric {key}=: {self}") from e

    def opt_num(self, key: str) -> int | None:
        value = self.fields.get(key)
        if value is None or value == "-":
            return None
        return self.num(key)

    def flags(self, key: str) -> tuple[int, ...]:
        try:
            return tuple(int(v) for v in self.fields[key].split(","))
        except (KeyError, ValueError) as e:
            raise PowerError(f"relay board line lacks a list {key}=: {self}") from e


def checked_body(raw: bytes) -> str:
    """The text before `*CRC` of one line (without its newline) whose checksum holds; `BadLine`
    otherwise."""
    raw = raw.removesuffix(b"\r")  # one, right before the newline (PROTOCOL.md 1)
    if len(raw) > MAX_LINE or any(b < 0x20 or b > 0x7E for b in raw):
        raise BadLine("overlong or non-printable line")
    text = raw.decode("ascii")
    body, star, check = text.rpartition("*")
    if not star or len(check) != 4 or check.upper() != check:
        raise BadLine("no checksum")
    try:
        expected = int(check, 16)
    except ValueError as e:
        raise BadLine("malformed checksum") from e
    if crc16(body.encode("ascii")) != expected:
        raise BadLine("checksum mismatch")
    return body


def parse_line(raw: bytes, rx_ns: int = 0) -> Line:
    """Check and split one line (without its newline) from the board."""
    tokens = checked_body(raw).split(" ")
    event = tokens[0] == "!"
    if event:
        tokens = tokens[1:]
    if len(tokens) < 2:
        raise BadLine("too few tokens")
    head, word, rest = tokens[0], tokens[1], tokens[2:]
    if head == "-" and not event:
        seq = None
    elif head.isdigit():
        seq = int(head)
    else:
        raise BadLine("bad sequence number")
    fields: dict[str, str] = {}
    args: list[str] = []
    for tok in rest:
        key, eq, value = tok.partition("=")
        if eq:
            fields[key] = value
        else:
            args.append(tok)
    return Line(event, seq, word, fields, tuple(args), rx_ns)


class LineSplitter:
    """Cuts a byte stream into lines. `feed` returns the complete non-empty lines (without their
    newline); `overflowed` says the last feed dropped noise that held no newline for longer than
    any line can be."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.overflowed = False

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        lines = []
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                break
            raw = bytes(self._buf[:end])
            del self._buf[: end + 1]
            if raw.strip(b"\r"):
                lines.append(raw)
        self.overflowed = len(self._buf) > 4 * MAX_LINE
        if self.overflowed:
            self._buf.clear()
        return lines
