"""`kind = "scpi-supply"`: a programmable bench supply over SCPI (PyVISA with the pure-Python
backend pyvisa-py: LAN socket or VXI-11, USBTMC, serial); one output per channel, drives on the
real bus. Its keys: resource, family, model, volts, current_a, timeout_ms.

It makes every cut kind (off, glitch, sag, ramp). Before anything is written the instrument is
identified (*IDN? against `model`), each output's maximum voltage read, and the campaign's cut
ranges checked against what the supply can set (rig/power/scpi.py `check_shape`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rig.config.station_keys import StationSpec
from rig.config.tables import Table
from rig.errors import UserError
from rig.power import shapes
from rig.power.base import Edge, PowerSwitch
from rig.power.scpi import ScpiSupply, Timeout
from rig.power.scpi_families import FAMILIES

if TYPE_CHECKING:
    from rig.config.campaign import Campaign


@dataclass(frozen=True)
class ScpiSupplySpec(StationSpec):
    resource: str = ""  # the VISA resource: TCPIP::host::5025::SOCKET, USB0::..., ASRL/dev/...
    family: str = ""  # its command set (rig/power/scpi_families.py)
    model: str = ""  # what *IDN? must name
    volts: float = 0.0  # every output's nominal voltage (the drive's rail: 12 or 5)
    current_a: float = 3.0  # the outputs' current limit
    timeout_ms: int = 2000  # an instrument silent this long has stopped answering
    outputs: tuple[int, ...] = ()  # the supply's output of channel 0, 1, ... (default: N + 1)

    def label(self) -> str:
        return f"scpi-supply {self.model} {self.resource}"


def settings(keys: Table, common: StationSpec) -> ScpiSupplySpec:
    family = keys.get("family", str)
    if family not in FAMILIES:
        raise UserError(f"campaign: [station].family must be one of {', '.join(FAMILIES)}")
    spec = ScpiSupplySpec(
        **vars(common),
        resource=keys.get("resource", str),
        family=family,
        model=keys.get("model", str),
        volts=float(keys.number("volts", None, 0.1, 1000)),
        current_a=float(keys.number("current_a", 3.0, 0.001, 1000)),
        timeout_ms=keys.integer("timeout_ms", 2000, 10, 600_000),
        outputs=tuple(keys.get("outputs", list, [])),
    )
    if not all(isinstance(o, int) and not isinstance(o, bool) and o >= 1 for o in spec.outputs):
        raise UserError("campaign: [station].outputs must list the supply's outputs (from 1)")
    if len(set(spec.outputs)) != len(spec.outputs):
        raise UserError("campaign: [station].outputs names one output twice")
    if spec.model not in FAMILIES[family].fall_v_per_ms:
        known = ", ".join(FAMILIES[family].fall_v_per_ms)
        raise UserError(f"campaign: [station].model of a {family} must be one of {known}")
    return spec


class VisaInstrument:
    """A PyVISA message-based resource as the driver's `Instrument` (a timeout is `Timeout`)."""

    def __init__(self, resource: Any) -> None:
        import pyvisa

        self._resource = resource
        self._errors = (pyvisa.errors.VisaIOError,)

    def write(self, message: str) -> object:
        try:
            return self._resource.write(message)
        except self._errors as error:
            raise Timeout(str(error)) from error

    def query(self, message: str) -> str:
        try:
            return str(self._resource.query(message))
        except self._errors as error:
            raise Timeout(str(error)) from error

    def close(self) -> None:
        self._resource.close()


def open_resource(name: str, timeout_ms: int, library: str = "@py") -> VisaInstrument:
    """The resource through PyVISA (`library`: "@py" is pyvisa-py; a test gives pyvisa-sim's
    "FILE@sim"); a resource that cannot be opened is bad input."""
    import pyvisa  # (the runtime set has it; imported here so other kinds never load it)

    try:
        manager = pyvisa.ResourceManager(library)
        resource = manager.open_resource(
            name, read_termination="\n", write_termination="\n", timeout=timeout_ms
        )
    except (pyvisa.errors.Error, OSError, ValueError) as error:
        raise UserError(f"supply {name}: cannot open it: {error}") from error
    return VisaInstrument(resource)


def power(campaign: Campaign, on_edge: Callable[[Edge], None] | None) -> PowerSwitch:
    spec = campaign.station
    assert isinstance(spec, ScpiSupplySpec)
    return connect(campaign, open_resource(spec.resource, spec.timeout_ms), on_edge)


def connect(
    campaign: Campaign, instrument: VisaInstrument, on_edge: Callable[[Edge], None] | None
) -> ScpiSupply:
    """The supply identified and checked against every cut the campaign may draw."""
    spec = campaign.station
    assert isinstance(spec, ScpiSupplySpec)
    channels = max(d.channel for d in campaign.drives) + 1
    outputs = spec.outputs or tuple(range(1, channels + 1))
    if len(outputs) < channels:
        raise UserError(f"[station].outputs names {len(outputs)} outputs; campaign uses {channels}")
    try:
        family = FAMILIES[spec.family]
        supply = ScpiSupply(
            instrument, family, spec.model, outputs, spec.volts, spec.current_a, on_edge
        )
    except BaseException:
        instrument.close()
        raise
    try:
        for drive in campaign.drives:
            for shape in shapes.extremes(campaign.cut.shape):
                supply.check_shape(drive.channel, shape)
    except BaseException:
        supply.close()
        raise
    return supply
