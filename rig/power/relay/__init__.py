"""The relay board of firmware/ over a serial line: a `PowerSwitch` speaking protocol v2.

See `firmware/PROTOCOL.md` for the wire format and `docs/power-driver.md` for how this driver maps
the MCU clock to the host clock, retries, resynchronises after an MCU reset and what it raises;
`board.py` lists the modules and the driver's lock order.
"""

from rig.power.relay.board import RelayBoard, SerialPendingCut
from rig.power.relay.boardset import BOARD_STRIDE, BoardSet
from rig.power.relay.model import (
    BoardEdge,
    BoardIdentity,
    BoardRefusedError,
    BoardResetError,
    BootEvent,
    ChannelStates,
    DriverStats,
    ResetInfo,
)
from rig.power.relay.port import find_port
from rig.power.relay.wire import (
    FIRMWARE_VERSION,
    PROTOCOL_VERSION,
    BadLine,
    Line,
    crc16,
    frame,
    parse_line,
)

__all__ = [
    "BOARD_STRIDE",
    "FIRMWARE_VERSION",
    "PROTOCOL_VERSION",
    "BadLine",
    "BoardEdge",
    "BoardIdentity",
    "BoardRefusedError",
    "BoardResetError",
    "BoardSet",
    "BootEvent",
    "ChannelStates",
    "DriverStats",
    "Line",
    "RelayBoard",
    "ResetInfo",
    "SerialPendingCut",
    "crc16",
    "find_port",
    "frame",
    "parse_line",
]
