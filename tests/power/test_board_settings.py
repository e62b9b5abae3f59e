"""[station.boards]: several relay boards, each [[drive]] on a board and a channel. Read from the
campaign file with one-line errors; `rig run` refuses bad wiring (a board not found, a channel
beyond the board's count) with exit 2 before any file is written; a one-board file is as it
was; find_port takes udev's short or whole USB serial."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from fixtures.board_station import HOST_BINARY, BoardStation
from rig.config import campaign_file
from rig.errors import PowerError, UserError
from rig.power.relay import find_port
from rig.station.kinds.relay_board import BoardSpec
from tests.cli_runner import rig


def _text(station: str, drives: str) -> str:
    return f"""
[campaign]
name = "boards"
cycles = 1
[station]
kind = "relay-board"
{station}
{drives}"""


BOARDS = """
[station.boards.left]
usb_serial = "A10KX3"
[station.boards.right]
port = "/dev/ttyUSB7"
"""


def _drive(channel: int, serial: str, board: str = "") -> str:
    on = f'board = "{board}"\n' if board else ""
    return f'[[drive]]\n{on}channel = {channel}\nmodel = "M"\nserial = "{serial}"\n'


def test_boards_and_their_drives_are_read() -> None:
    campaign = campaign_file.parse(
        _text(BOARDS, _drive(0, "S1", "left") + _drive(0, "S2", "right") + _drive(3, "S3", "right"))
    )
    assert campaign.station.boards == (  # type: ignore[attr-defined]
        BoardSpec("left", usb_serial="A10KX3"),
        BoardSpec("right", port="/dev/ttyUSB7"),
    )
    placed = [(d.board, d.board_channel, d.channel) for d in campaign.drives]
    assert placed == [("left", 0, 0), ("right", 0, 16), ("right", 3, 19)]
    assert campaign.drives[2].wiring() == "board right ch3 (ch19)"


def test_a_one_board_file_is_as_it_was() -> None:
    campaign = campaign_file.parse(_text('port = "/dev/ttyUSB0"', _drive(2, "S1")))
    drive = campaign.drives[0]
    assert (drive.channel, drive.board, drive.board_channel) == (2, "", -1)
    one = '[station.boards.only]\nport = "/dev/ttyUSB0"\n'
    named = campaign_file.parse(_text(one, _drive(2, "S1")))  # no board name: the only board
    assert (named.drives[0].board, named.drives[0].channel) == ("only", 2)


@pytest.mark.parametrize(
    ("station", "drives", "message"),
    [
        (BOARDS, _drive(0, "S1", "middle"), r"board = 'middle' is not a board"),
        (BOARDS, _drive(0, "S1"), r"needs board \(one of left, right\)"),
        (BOARDS, _drive(1, "S1", "left") + _drive(1, "S2", "left"), r"same channel \(board left"),
        (BOARDS, _drive(16, "S1", "left"), "a board has 0..15"),
        ('port = "/dev/ttyUSB0"', _drive(0, "S1", "left"), "names no boards"),
        ('port = "/dev/x"\n' + BOARDS, _drive(0, "S1", "left"), "port and usb_serial go in"),
        ('[station.boards.x]\nport = "/a"\nusb_serial = "b"', _drive(0, "S"), "one of them"),
        ('[station.boards."a b"]\nport = "/a"', _drive(0, "S"), "letters, digits"),
        ('[station.boards.x]\nport = "/a"\n[station.boards.y]\nport = "/a"', "", "same port"),
        ('[station.boards.x]\nspeed = 1\nport = "/a"', _drive(0, "S"), "unknown key 'speed'"),
    ],
)
def test_bad_boards_are_one_line_errors(station: str, drives: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as raised:
        campaign_file.parse(_text(station, drives or _drive(0, "S")))
    assert "\n" not in str(raised.value)


def test_find_port_takes_the_short_or_the_whole_usb_serial() -> None:
    tty = SimpleNamespace(
        device_node="/dev/ttyUSB3",
        properties={"ID_SERIAL": "FTDI_FT232R_USB_UART_A10KX3", "ID_SERIAL_SHORT": "A10KX3"},
    )
    assert find_port("A10KX3", [tty]) == "/dev/ttyUSB3"
    assert find_port("FTDI_FT232R_USB_UART_A10KX3", [tty]) == "/dev/ttyUSB3"
    with pytest.raises(PowerError, match="no relay board"):
        find_port("FTDI_FT232R", [tty])


@pytest.mark.skipif(not HOST_BINARY.exists(), reason="firmware host build missing")
@pytest.mark.parametrize(
    ("extra", "drive", "message"),
    [
        (
            '[station.boards.gone]\nusb_serial = "NO-SUCH-BOARD-SERIAL"\n',
            _drive(0, "S9", "gone"),
            r"\[station.boards.gone\]: no relay board with USB serial number",
        ),
        ("", _drive(5, "S9", "b"), r"board b channel 5: the board has 4 channels \(0..3\)"),
    ],
)
def test_rig_run_refuses_bad_wiring_before_any_write(
    tmp_path: Path, extra: str, drive: str, message: str
) -> None:
    rigs = BoardStation(["a", "b"])
    try:
        text = _text(
            rigs.station_toml().split("\n", 2)[2] + extra,  # (its [station] line is ours)
            _drive(0, "S1", "a") + drive,
        )
        (tmp_path / "c.toml").write_text(text)
        result = rig("run", "c.toml", cwd=tmp_path, timeout_s=120)
    finally:
        rigs.close()
    assert result.returncode == 2, result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and re.search(message, errors[0]), errors
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]  # nothing written
