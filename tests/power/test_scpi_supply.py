"""The scpi-supply station kind: its keys, and its driver (rig/power/scpi.py) against the simulated
supply (fixtures/scpi_supply.py) through PyVISA's socket resource with pyvisa-py, both
families, and against the pyvisa-sim definition (fixtures/scpi_supply.yaml)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.scpi_supply import SimSupply, SupplyServer
from rig.config import campaign_file
from rig.errors import PowerError, PowerTimeoutError, UserError
from rig.power.base import Edge
from rig.power.scpi import ScpiSupply
from rig.power.scpi_families import FAMILIES
from rig.power.shapes import Shape
from rig.station import build as station
from rig.station.kinds.scpi_supply import ScpiSupplySpec, open_resource

REPO = Path(__file__).resolve().parents[2]
MODELS = {"keysight-e36": "E36312A", "rigol-dp8": "DP832"}
OUTPUTS = {"keysight-e36": (2, 3), "rigol-dp8": (1, 2)}  # outputs that set 12 V


def campaign_text(station_lines: str, cut_lines: str = "") -> str:
    return f"""
[campaign]
name = "supply"
cycles = 1
[station]
kind = "scpi-supply"
{station_lines}
[cut]
{cut_lines}
[[drive]]
channel = 0
wwn = "0x5000000000000001"
[[drive]]
channel = 1
wwn = "0x5000000000000002"
"""


class Rails:
    """What the simulated supply's outputs did: (channel, volts, host ns), in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float, int]] = []
        self.lock = threading.Lock()
        self.channel_of: dict[int, int] = {}

    def __call__(self, output: int, volts: float, ns: int) -> None:
        with self.lock:  # (the campaign's channel: the test's supplies wire channel N to
            self.seen.append((self.channel_of.get(output, -1), volts, ns))  # outputs[N])


@pytest.fixture(params=sorted(MODELS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[SupplyServer, Rails]]:
    rails = Rails()
    rails.channel_of = {out - 1: ch for ch, out in enumerate(OUTPUTS[request.param])}
    server = SupplyServer(SimSupply(request.param, MODELS[request.param], on_rail=rails))
    try:
        yield server, rails
    finally:
        server.close()


def connect(server: SupplyServer, edges: list[Edge] | None = None) -> ScpiSupply:
    family = server.supply.family
    instrument = open_resource(server.resource, 500)
    sink = edges.append if edges is not None else None
    outputs = OUTPUTS[family]
    return ScpiSupply(instrument, FAMILIES[family], MODELS[family], outputs, 12.0, 1.0, sink)


def test_settings_are_read_and_bad_ones_refused_in_one_line() -> None:
    lines = 'resource = "TCPIP::10.0.0.5::5025::SOCKET"\nfamily = "rigol-dp8"\nmodel = "DP832"'
    spec = campaign_file.parse(campaign_text(lines + "\nvolts = 12\noutputs = [1, 2]")).station
    assert spec == ScpiSupplySpec(
        "scpi-supply", "none", (), "TCPIP::10.0.0.5::5025::SOCKET", "rigol-dp8", "DP832", 12.0,
        3.0, 2000, (1, 2),
    )  # fmt: skip
    for bad, message in [
        (lines.replace("rigol-dp8", "siglent"), "family must be one of keysight-e36, rigol-dp8"),
        (lines.replace("DP832", "E36312A") + "\nvolts = 5", "model of a rigol-dp8 must be one"),
        (lines, r"\[station\] needs 'volts'"),
        (lines + "\nvolts = 12\noutputs = [1, 1]", "names one output twice"),
        (lines + "\nvolts = 12\nport = 3", "applies to relay-board stations only"),
    ]:
        with pytest.raises(UserError, match=message) as error:
            campaign_file.parse(campaign_text(bad))
        assert "\n" not in str(error.value)


def test_switches_are_read_back_and_edges_bound_the_output_change(
    served: tuple[SupplyServer, Rails],
) -> None:
    server, rails = served
    edges: list[Edge] = []
    supply = connect(server, edges)
    try:
        assert supply.identity.split(",")[1] == MODELS[server.supply.family]
        for channel in (0, 1):
            supply.on(channel)
            assert supply.state(channel)
        supply.cut(0, 0.005).wait(2.0)
        assert not supply.state(0) and supply.state(1)
        supply.on(0)
    finally:
        supply.close()
    # every edge's interval holds the instant the output really changed (the supply's record)
    changes = [(ch, v > 0, ns) for ch, v, ns in rails.seen]
    for edge in edges:
        at = [ns for ch, on, ns in changes if ch == edge.channel and on == edge.powered]
        assert any(abs(ns - edge.host_ns) <= edge.error_ns for ns in at), (edge, changes)
    assert [(e.channel, e.powered) for e in edges] == [(0, True), (1, True), (0, False), (0, True)]


def test_a_sag_goes_to_its_depth_for_its_time_and_a_ramp_at_its_slew(
    served: tuple[SupplyServer, Rails],
) -> None:
    server, rails = served
    supply = connect(server)
    try:
        supply.on(0)
        before = len(rails.seen)
        edge = supply.shaped_cut(0, 0.0, Shape("sag", 50.0, "%", 0.03)).wait(2.0)
        time.sleep(0.15)
        sag = [(v, ns) for ch, v, ns in rails.seen[before:] if ch == 0]
        assert [v for v, _ in sag] == [6.0, 12.0]
        assert abs(sag[0][1] - edge.host_ns) <= edge.error_ns
        held_ms = (sag[1][1] - sag[0][1]) / 1e6
        assert 30 <= held_ms < 30 + 200  # at depth for the sag's time (late, never early)
        supply.on(0)
        start = len(rails.seen)
        supply.shaped_cut(0, 0.0, Shape("ramp", 0.0, "V", 0.0, 200.0)).wait(2.0)  # 0.2 V/ms
        time.sleep(0.12)
        supply.on(0)
        ramp = [(v, ns) for ch, v, ns in rails.seen[start:] if ch == 0 and v < 12.0]
    finally:
        supply.close()
    volts = [v for v, _ in ramp]
    assert volts == sorted(volts, reverse=True) and volts[-1] == 0.0 and len(volts) > 10
    took_ms = (ramp[-1][1] - ramp[0][1]) / 1e6
    assert took_ms >= 12 / 0.2 * (1 - 1 / len(volts)) - 1  # not faster than its slew


def test_an_instrument_error_fails_the_switch_in_its_own_words(
    served: tuple[SupplyServer, Rails],
) -> None:
    server, _ = served
    supply = connect(server)
    try:
        supply.on(0)
        server.supply.errors.append('-310,"System error"')
        with pytest.raises(PowerError, match='reports -310,"System error"'):
            supply.off(0)
    finally:
        supply.close()


def test_an_instrument_that_stops_answering_is_a_timeout(
    served: tuple[SupplyServer, Rails],
) -> None:
    server, _ = served
    supply = connect(server)
    try:
        supply.on(0)
        server.supply.freeze()
        with pytest.raises(PowerTimeoutError, match="did not answer"):
            supply.off(0)
        output = OUTPUTS[server.supply.family][0] - 1
        assert server.supply.rail(output) == 12.0  # it keeps the channel powered
    finally:
        supply.close()


def test_a_supply_frozen_inside_a_cut_names_the_output_left_off_when_made_safe(
    served: tuple[SupplyServer, Rails],
) -> None:
    server, _ = served
    outputs = OUTPUTS[server.supply.family]
    supply = connect(server)
    try:
        supply.on(0)
        supply.on(1)
        server.supply.freeze_at_switch(False, 1, acted=True)  # silent once channel 0 is off
        with pytest.raises(PowerTimeoutError, match="did not answer"):
            supply.off(0)
        assert server.supply.rail(outputs[0] - 1) == 0.0
        assert server.supply.rail(outputs[1] - 1) == 12.0
        with pytest.raises(PowerTimeoutError) as raised:
            supply.safe()
        # the first error as it was, then only the output not confirmed on: channel 1's
        # output was read back on and nothing was switched there since
        message = str(raised.value)
        assert message.startswith("the supply did not answer"), message
        assert message.endswith(f"; output {outputs[0]} may be off: check the supply"), message
    finally:
        supply.close()


def test_another_model_than_named_is_refused(served: tuple[SupplyServer, Rails]) -> None:
    server, rails = served
    server.supply.idn_model = "DP821" if server.supply.family == "rigol-dp8" else "E36313A"
    with pytest.raises(UserError, match=f"the campaign names a {MODELS[server.supply.family]}"):
        connect(server)
    assert rails.seen == []  # nothing switched


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        ('kind = "sag"\ndepth_v = [0, 6]\nduration_ms = [1, 5]', "deeper than the E36312A can set"),
        ('kind = "ramp"\nslew_v_per_ms = [0.5, 5]', "faster than the E36312A can bring"),
        ('kind = "sag"\ndepth_v = [6, 13]\nduration_ms = 50', "a sag to 13 V is no sag"),
    ],
)
def test_cuts_the_supply_cannot_make_are_refused_before_anything_switches(
    cut: str, message: str
) -> None:
    rails = Rails()
    server = SupplyServer(SimSupply("keysight-e36", "E36312A", on_rail=rails))
    try:
        lines = f'resource = "{server.resource}"\nfamily = "keysight-e36"\nmodel = "E36312A"'
        campaign = campaign_file.parse(campaign_text(lines + "\nvolts = 12\noutputs = [2, 3]", cut))
        with pytest.raises(UserError, match=message) as error:
            station.build(campaign, None)
        assert "\n" not in str(error.value)
        assert rails.seen == []
    finally:
        server.close()


def test_the_pyvisa_sim_definition_drives_the_same_driver() -> None:
    library = f"{REPO / 'fixtures' / 'scpi_supply.yaml'}@sim"
    instrument = open_resource("TCPIP::e36312a::5025::SOCKET", 500, library)
    supply = ScpiSupply(instrument, FAMILIES["keysight-e36"], "E36312A", (2, 3), 12.0, 1.0)
    try:
        assert supply.max_v == {0: 25.0, 1: 25.0}
        supply.on(1)
        assert supply.state(1) and not supply.state(0)
        supply.off(1)
        assert not supply.state(1)
    finally:
        supply.close()


def test_a_sag_of_whole_timer_steps_is_timed_by_the_rigol_itself() -> None:
    rails = Rails()
    rails.channel_of = {0: 0, 1: 1}
    server = SupplyServer(SimSupply("rigol-dp8", "DP832", on_rail=rails))
    supply = connect(server)
    try:
        whole, short = Shape("sag", 50.0, "%", 1.0), Shape("sag", 50.0, "%", 0.03)
        assert supply.instrument_timed(whole) and not supply.instrument_timed(short)
        supply.on(0)
        before, sent = len(rails.seen), len(server.supply.log)
        edge = supply.shaped_cut(0, 0.0, whole).wait(2.0)
        time.sleep(1.3)
        log = server.supply.log[sent:]
        supply.on(0)
    finally:
        supply.close()
        server.close()
    sag = [(v, ns) for ch, v, ns in rails.seen[before:] if ch == 0]
    assert [v for v, _ in sag] == [6.0, 12.0]
    assert abs(sag[0][1] - edge.host_ns) <= edge.error_ns
    assert 0.99 <= (sag[1][1] - sag[0][1]) / 1e9 < 1.2  # the instrument's one-second step
    assert ":TIM ON" in log and "(timer) 12 V on output 1" in log
    assert not [c for c in log if c.startswith(":SOUR1:VOLT")]  # the host sent no level


def test_a_keysight_has_no_sequence_and_times_every_sag_itself() -> None:
    assert not FAMILIES["keysight-e36"].sequence_step_s


def test_a_ramp_whose_first_step_acts_late_keeps_its_slew(
    served: tuple[SupplyServer, Rails],
) -> None:
    """The steps are timed from the first step's effect: a first step acted on late (a busy
    instrument, a preempted host) does not make the rest catch up faster than the slew."""
    server, rails = served
    supply = connect(server)
    try:
        supply.on(0)
        start = len(rails.seen)
        server.supply.stall_next(0.03)  # the ramp's first voltage step
        supply.shaped_cut(0, 0.0, Shape("ramp", 0.0, "V", 0.0, 200.0)).wait(2.0)  # 0.2 V/ms
        time.sleep(0.15)
        supply.on(0)
        ramp = [(v, ns) for ch, v, ns in rails.seen[start:] if ch == 0 and v < 12.0]
    finally:
        supply.close()
    assert len(ramp) > 10 and ramp[-1][0] == 0.0
    took_ms = (ramp[-1][1] - ramp[0][1]) / 1e6
    assert took_ms >= 12 / 0.2 * (1 - 1 / len(ramp)) - 1  # not faster than its slew
