"""The board's line format on its own (rig/power/relay/wire.py): CRC, framing, parsing."""

from __future__ import annotations

import pytest

from rig.power.relay.wire import (
    DURATION_MAX_US,
    MAX_LINE,
    BadLine,
    LineSplitter,
    crc16,
    frame,
    parse_line,
    request_line,
)


def test_crc_check_value() -> None:
    assert crc16(b"123456789") == 0x29B1
    assert frame("7 SYNC") == b"7 SYNC*99B5\n"


def test_parse_reply_event_and_garbage() -> None:
    reply = parse_line(frame("3 OK t=12 on=1,0,1,1").rstrip(b"\n"))
    assert (reply.event, reply.seq, reply.word, reply.fields["t"]) == (False, 3, "OK", "12")
    assert reply.flags("on") == (1, 0, 1, 1)
    nack = parse_line(frame("- ERR crc").rstrip(b"\n"))
    assert (nack.seq, nack.word, nack.args) == (None, "ERR", ("crc",))
    event = parse_line(frame("! 9 EDGE ch=2 on=0 t=5 why=cut").rstrip(b"\n"))
    assert (event.event, event.seq, event.word, event.num("t")) == (True, 9, "EDGE", 5)
    for bad in (b"3 OK t=12*0000", b"3 OK t=12", b"\x01\x02*AAAA", b"x" * 300):
        with pytest.raises(BadLine):
            parse_line(bad)


def test_carriage_return_only_right_before_the_newline() -> None:
    line = frame("3 OK t=12").rstrip(b"\n")
    assert parse_line(line + b"\r").fields["t"] == "12"
    for bad in (line + b"\r\r", line[:4] + b"\r" + line[4:]):
        with pytest.raises(BadLine):
            parse_line(bad)
    for body in ("5\r SET 0 0", "6 WDOG 5\r0", "1 SYNC\n", "1 ID\x7f"):
        with pytest.raises(ValueError, match="not printable"):
            frame(body)


def test_line_splitter_keeps_partial_lines_and_drops_endless_noise() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"1 OK t=1*AAAA\n\r\n\n2 OK") == [b"1 OK t=1*AAAA"]
    assert splitter.feed(b" t=2*BBBB\r\n") == [b"2 OK t=2*BBBB\r"]
    assert not splitter.overflowed
    assert splitter.feed(b"x" * (4 * MAX_LINE + 1)) == []
    assert splitter.overflowed
    assert splitter.feed(b"tail\n") == [b"tail"]  # the noise before it was dropped
    assert not splitter.overflowed


def test_request_line_refuses_what_the_board_would_call_long() -> None:
    body, wire = request_line(7, "SYNC", ())
    assert (body, wire) == ("7 SYNC", b"7 SYNC*99B5\n")
    assert request_line(65535, "CUT", (3, DURATION_MAX_US, DURATION_MAX_US))[1].endswith(b"\n")
    with pytest.raises(ValueError, match="too long"):
        request_line(1, "RAIL", (1,) * 40)
