"""Where the board is and how its serial port is opened: the one place that knows pyserial's
settings and udev's names for a USB serial adapter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import serial

from rig.errors import PowerError


def open_port(path: str, baudrate: int, write_timeout_s: float) -> serial.Serial:
    """The board's serial port, opened with DTR and RTS low (an Arduino resets when DTR rises;
    it still may on open, on Linux). Reads return after 0.1 s at most, so the reader thread
    notices a stop."""
    ser = serial.Serial()
    ser.port = path
    ser.baudrate = baudrate
    ser.timeout = 0.1
    ser.write_timeout = write_timeout_s
    ser.dtr = False
    ser.rts = False
    try:
        ser.open()
    except (serial.SerialException, OSError) as e:
        raise PowerError(f"cannot open relay board port {path}: {e}") from e
    return ser


def find_port(serial_number: str, devices: Iterable[Any] | None = None) -> str:
    """The tty node of the USB serial adapter whose serial number (udev `ID_SERIAL_SHORT`, or
    the whole `ID_SERIAL`: vendor_model_serial) is `serial_number`. `devices` defaults to every
    tty device udev knows (pyudev)."""
    if devices is None:
        import pyudev

        devices = pyudev.Context().list_devices(subsystem="tty")
    nodes = set()
    for device in devices:
        props = device.properties
        ids = {
            props.get(key)
            for key in ("ID_SERIAL_SHORT", "ID_USB_SERIAL_SHORT", "ID_SERIAL", "ID_USB_SERIAL")
        }
        if serial_number in ids and device.device_node:
            nodes.add(device.device_node)
    if not nodes:
        raise PowerError(f"no relay board with USB serial number {serial_number!r} is attached")
    if len(nodes) > 1:
        raise PowerError(
            f"USB serial number {serial_number!r} matches several ports: {sorted(nodes)}"
        )
    return nodes.pop()
