"""Pieces of the twin's adversarial bus (fixtures/simssd/bus.py) on their own."""

from __future__ import annotations

import os

import pytest
import pyudev

from fixtures.simssd.bus import EventReplayer, murmur2, udev_message


def test_the_message_carries_libudev_s_header() -> None:
    """(Whether the subsystem hash is libudev's is proven below: a monitor filtered to block
    devices drops a message whose hash is not MurmurHash2("block").)"""
    message = udev_message({"SUBSYSTEM": "block", "DEVTYPE": "disk", "ACTION": "change"})
    assert message[:8] == b"libudev\0" and message[8:12] == bytes.fromhex("feedcafe")
    assert int.from_bytes(message[24:28], "big") == murmur2(b"block")
    assert message[40:].split(b"\0")[:3] == [b"SUBSYSTEM=block", b"DEVTYPE=disk", b"ACTION=change"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (netlink multicast)")
def test_a_replayed_event_reaches_a_filtered_libudev_monitor_as_sent(udevd: None) -> None:
    """What the twin sends again is what a rig's monitor (filtered to block devices, as the
    rig's is) receives: the stale payload, word for word, for a node that may hold another
    device by now. (A node that does not exist: nobody on the machine acts on it.)"""
    monitor = pyudev.Monitor.from_netlink(pyudev.Context())
    monitor.filter_by("block")
    monitor.start()
    stale = {
        "ACTION": "change",
        "DEVPATH": "/devices/virtual/block/loop1099",
        "SUBSYSTEM": "block",
        "DEVNAME": "/dev/loop1099",
        "DEVTYPE": "disk",
        "SEQNUM": "4242",
        "MAJOR": "7",
        "MINOR": "1099",
        "RIG_SERIAL": "STALE0",
    }
    assert udev_message(stale).startswith(b"libudev\0")
    replayer = EventReplayer("not-a-simulator")
    try:
        replayer.send(stale)
        for _ in range(50):  # (other devices' events may come first on a shared machine)
            device = monitor.poll(timeout=2)
            assert device is not None, "the replayed event never arrived"
            if device.device_path == stale["DEVPATH"]:
                break
        assert device.action == "change" and device.sequence_number == 4242
        assert device.properties["RIG_SERIAL"] == "STALE0"
    finally:
        replayer.stop()
