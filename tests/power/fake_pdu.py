"""A throwaway network-PDU station kind, to show what adding a power backend takes: this one
module (its [station] keys, their checks, its constructor) and one row in a copy of the table
(tests/power/test_backend_table.py). Importing it registers nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rig.config.campaign import Campaign
from rig.config.station_keys import StationSpec
from rig.config.tables import Table
from rig.errors import UserError
from rig.power.base import Edge


@dataclass(frozen=True)
class PduSpec(StationSpec):
    address: str = ""  # host:port of the PDU's control interface
    outlets: int = 8  # outlets on the PDU; campaign channel n is outlet n + 1
    switch_s: float = 0.5  # how late the PDU may switch after it answers (the edge's error)

    def label(self) -> str:
        return f"pdu {self.address}"


def settings(keys: Table, common: StationSpec) -> PduSpec:
    address = keys.get("address", str)
    if ":" not in address:
        raise UserError("campaign: [station].address must be host:port")
    return PduSpec(
        **vars(common),
        address=address,
        outlets=keys.integer("outlets", 8, 1, 48),
        switch_s=float(keys.number("switch_s", 0.5, 0.0, 10.0)),
    )


class _Cut:
    def __init__(self, edge: Edge) -> None:
        self.edge = edge

    def wait(self, timeout_s: float) -> Edge:
        return self.edge


class FakePdu:
    """Outlets in memory; every command it was sent, in order (no network in this test)."""

    def __init__(self, spec: PduSpec, on_edge: Callable[[Edge], None] | None) -> None:
        self.spec, self.on_edge = spec, on_edge
        self.powered = dict.fromkeys(range(spec.outlets), True)
        self.sent: list[str] = []
        self.closed = False

    @property
    def channels(self) -> int:
        return self.spec.outlets

    def switch(self, channel: int, on: bool) -> Edge:
        self.sent.append(f"outlet {channel + 1} {'on' if on else 'off'}")
        self.powered[channel] = on
        edge = Edge(channel, on, time.monotonic_ns(), int(self.spec.switch_s * 1e9))
        if self.on_edge is not None:
            self.on_edge(edge)
        return edge

    def on(self, channel: int) -> Edge:
        return self.switch(channel, True)

    def off(self, channel: int) -> Edge:
        return self.switch(channel, False)

    def cut(self, channel: int, delay_s: float, off_s: float | None = None) -> _Cut:
        return _Cut(self.switch(channel, False))

    def state(self, channel: int) -> bool:
        return self.powered[channel]

    def safe(self) -> None:
        for channel, on in self.powered.items():
            if not on:
                self.switch(channel, True)

    def close(self) -> None:
        self.safe()
        self.closed = True


def power(campaign: Campaign, on_edge: Callable[[Edge], None] | None) -> FakePdu:
    spec = campaign.station
    assert isinstance(spec, PduSpec)
    channels = max(d.channel for d in campaign.drives) + 1
    if spec.outlets < channels:
        raise UserError(f"pdu {spec.address} has {spec.outlets} outlets; campaign uses {channels}")
    return FakePdu(spec, on_edge)
