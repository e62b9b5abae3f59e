"""The relay driver's board state on its own (rig/power/relay/state.py): how the edges an MCU
reset caused are bounded on the host clock, from the last contact before the reset, the BOOT
line's arrival and BOOT's `t` mapped by the new epoch's clock."""

from __future__ import annotations

from rig.power.clocksync import SyncSample
from rig.power.relay import BoardIdentity, ChannelStates, DriverStats, frame, parse_line
from rig.power.relay.state import BoardState

T0 = 10**12  # host ns of the last sample before the reset (its request was sent then)
IDENTITY = BoardIdentity(3, "0.3.0", "x", "fake", 4, 16_000_000, "power", 0, 0)


def _reset_state(boot_rx_ns: int) -> BoardState:
    """A board whose channel 2 was off, then reset (BOOT received at `boot_rx_ns`)."""
    state = BoardState(DriverStats(), rate_tolerance=0.005, nonlinear_ppm=2.0)
    state.start(IDENTITY)
    state.apply_states(ChannelStates(0, (True, True, False, True), (True,) * 4, (0,) * 4))
    state.add_sample(SyncSample(5_000_000, T0, T0 + 100_000), state.epoch)
    boot = frame("! 0 BOOT proto=3 reset=external on=1,1,1,1 t=117").rstrip(b"\n")
    state.declare_reset("boot event", parse_line(boot, boot_rx_ns))
    return state


def test_boot_edge_uses_the_new_clock_when_it_is_consistent() -> None:
    state = _reset_state(T0 + 50_000_000)
    ticket = state.take_resync()
    assert ticket is not None
    boot_ns = T0 + 1_000_000  # the new epoch's MCU time 0: samples agree with it
    for mcu_us in (200_000, 300_000):
        at = boot_ns + mcu_us * 1000
        state.add_sample(SyncSample(mcu_us, at - 50_000, at + 50_000), state.epoch)
    edges = state.finish_resync(ticket, (True,) * 4, T0 + 50_000_000)
    assert edges is not None and [(e.channel, e.powered, e.why) for e in edges] == [
        (2, True, "boot")
    ]
    lo, hi = edges[0].host_ns - edges[0].error_ns, edges[0].host_ns + edges[0].error_ns
    assert lo <= T0 and boot_ns + 117_000 <= hi < T0 + 5_000_000  # BOOT's t, not its arrival


def test_boot_edge_ignores_a_new_clock_that_contradicts_the_last_contact() -> None:
    """A new epoch's clock whose mapping puts BOOT's `t` before the last contact with the old
    epoch (a clock that ran fast, or a stalled simulator catching up) is not believed: the
    edge gets the causal bound (last contact .. BOOT received), not a zero-width guess."""
    state = _reset_state(T0 + 2_000_000)
    ticket = state.take_resync()
    assert ticket is not None
    for mcu_us, at in ((1_600_117, T0 + 500_000_000), (1_700_117, T0 + 600_000_000)):
        state.add_sample(SyncSample(mcu_us, at - 50_000, at + 50_000), state.epoch)
    assert state.map(117).hi_ns < T0  # what the new clock claims
    edges = state.finish_resync(ticket, (True,) * 4, T0 + 2_000_000)
    assert edges is not None and len(edges) == 1
    edge = edges[0]
    assert (edge.host_ns - edge.error_ns, edge.host_ns + edge.error_ns) == (T0, T0 + 2_000_000)
