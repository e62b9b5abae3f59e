"""Cut strategies through the production campaign on the in-process simulated rig: each cycle's
trigger and where the edge really fell (the `cut_scheduled` and `cut_context` events)."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fixtures.fake_power import FakePowerSwitch
from rig.campaign.cutcycle import cuts
from rig.config import campaign_file
from rig.errors import UserError
from rig.io.blockio import DirectTarget
from rig.io.ledger import CycleLog, LbaState
from rig.io.workload import Workload, Writer, WriterContext
from tests.campaign.test_sim_campaign import campaign_text, run


def _events(tmp_path: Path, strategy: str, extra_cut: str = "") -> list[dict[str, Any]]:
    text = campaign_text(["honest"], cycles=4, flush_every=2)
    text = text.replace("[cut]\n", f'[cut]\nstrategy = "{strategy}"\n{extra_cut}')
    summaries, _, store = run(tmp_path, text)
    assert summaries[0].errors == 0
    rows = store.query(
        "SELECT e.cycle_id, e.kind, e.host_ns, e.detail FROM event e"
        " WHERE e.kind IN ('cut_scheduled', 'cut_context', 'power_off') ORDER BY e.cycle_id, e.id"
    )
    cycles: dict[int, dict[str, Any]] = {}
    for cycle, kind, host_ns, detail in rows:
        cycles.setdefault(cycle, {})[kind] = {**json.loads(detail), "host_ns": host_ns}
    assert len(cycles) == 4
    return list(cycles.values())


def test_uniform_cuts_are_timed_from_the_first_write(tmp_path: Path) -> None:
    """A writer slow to start (planning its first batch on a loaded host) is not cut before it
    wrote anything: the delay runs from the first write the device got."""
    for cycle in _events(tmp_path, "uniform"):
        scheduled, edge = cycle["cut_scheduled"], cycle["power_off"]
        assert scheduled["strategy"] == "uniform"
        assert scheduled["trigger"] == "first_write"
        assert cycle["cut_context"]["flushes_total"] >= 0
        assert cycle["cut_context"]["writes_issued_before"] > 0  # never a cut of an idle drive
        assert (
            edge["host_ns"] + edge["error_ns"]
            >= scheduled["trigger_ns"] + scheduled["planned_delay_ns"]
        )


def test_during_flush_arms_on_a_flush_in_flight(tmp_path: Path) -> None:
    for cycle in _events(tmp_path, "during_flush"):
        assert cycle["cut_scheduled"]["trigger"] == "flush_in_flight"
        assert cycle["cut_scheduled"]["planned_delay_ns"] == 0


def test_after_ack_cuts_no_earlier_than_the_set_time_after_the_ack(tmp_path: Path) -> None:
    """The acknowledgement the cut is timed from is the last one before the edge: the rig's own
    write, issued once the writers are quiet, so the time since the last acknowledgement at the
    edge is the realized delay (a write of the writers completing after the trigger would make
    it shorter, and re-arm a write-back timer the rig does not count)."""
    for cycle in _events(tmp_path, "after_ack", "after_ms = [5, 30]\n"):
        scheduled, edge, context = cycle["cut_scheduled"], cycle["power_off"], cycle["cut_context"]
        assert scheduled["trigger"] == "ack"
        assert 5e6 <= scheduled["planned_delay_ns"] <= 30e6
        assert (
            edge["host_ns"] + edge["error_ns"]
            >= scheduled["trigger_ns"] + scheduled["planned_delay_ns"]
        )
        assert context["writes_issued_after"] == 0  # writers stopped at the ack
        assert context["writes_in_flight"] == 0 and context["flushes_in_flight"] == 0
        assert context["since_last_ack_ns"] == edge["host_ns"] - scheduled["trigger_ns"]


def test_idle_cuts_find_nothing_in_flight(tmp_path: Path) -> None:
    for cycle in _events(tmp_path, "idle", "after_ms = [1, 3]\n"):
        assert cycle["cut_scheduled"]["trigger"] == "idle"
        context = cycle["cut_context"]
        assert context["writes_in_flight"] == 0 and context["flushes_in_flight"] == 0
        assert context["writes_issued_after"] == 0


def test_draws_cover_sub_millisecond_delays_and_a_second_after_an_ack() -> None:
    rng = random.Random(1)
    uniform = [cuts.draw("uniform", (0.01, 0.9), (0, 0), rng) for _ in range(200)]
    assert all(0.00001 <= d.delay_s <= 0.0009 and d.warmup_s == 0 for d in uniform)
    after = [cuts.draw("after_ack", (1, 2), (0, 1500), rng) for _ in range(200)]
    assert max(d.delay_s for d in after) > 1.0
    assert all(0.001 <= d.warmup_s <= 0.002 for d in after)


def test_campaign_file_refuses_bad_strategies() -> None:
    base = campaign_text(["honest"], cycles=1)
    with pytest.raises(UserError, match="strategy must be one of"):
        campaign_file.parse(base.replace("[cut]\n", '[cut]\nstrategy = "random"\n'))
    with pytest.raises(UserError, match="during_flush needs a flush cadence"):
        campaign_file.parse(
            campaign_text(["honest"], cycles=1, flush_every=0).replace(
                "[cut]\n", '[cut]\nstrategy = "during_flush"\n'
            )
        )
    with pytest.raises(UserError, match="after_ms must be"):
        campaign_file.parse(base.replace("[cut]\n", "[cut]\nafter_ms = [5, 1]\n"))
    spec = campaign_file.parse(
        base.replace("[cut]\n", '[cut]\nstrategy = "idle"\nafter_ms = [0, 2000]\n')
    )
    assert (spec.cut.strategy, spec.cut.after_ms) == ("idle", (0.0, 2000.0))


class _Rail:
    """A power input that only remembers when it went off."""

    def __init__(self) -> None:
        self.off_ns: int | None = None

    def set_power(self, on: bool) -> None:
        if not on and self.off_ns is None:
            self.off_ns = time.monotonic_ns()


@pytest.mark.parametrize("strategy", ["during_flush", "after_ack", "idle"])
def test_triggers_read_the_native_engine_live(tmp_path: Path, strategy: str) -> None:
    """The native engine's live signals (acknowledgements, flushes in flight) arm the triggers:
    the same strategies on a real O_DIRECT file through the C engine."""
    image = tmp_path / "t.img"
    with image.open("wb") as handle:
        handle.truncate(16 << 20)
    target = DirectTarget(str(image))
    rail = _Rail()
    try:
        state, log, stop = LbaState(0, target.nblocks), CycleLog(), threading.Event()
        load = Workload(workers=4, write_blocks=(1, 4), flush_every=2, engine="native")
        writer = Writer(load, WriterContext(3, target, state, log, stop), seed=1)
        writer.start()
        deadline = time.monotonic() + 10
        while writer.live.acks == 0 and time.monotonic() < deadline:  # the engine is running
            time.sleep(0.001)
        draw = cuts.CutDraw(0.0, 0.0 if strategy == "during_flush" else 0.005)
        pending, detail = cuts.schedule(strategy, draw, writer, stop, FakePowerSwitch({0: rail}), 0)
        edge = pending.wait(10)
        stop.set()
        assert writer.join(10) and writer.engine == "native"
        expected = {"during_flush": "flush_in_flight", "after_ack": "ack", "idle": "idle"}
        assert detail["trigger"] == expected[strategy]
        assert writer.live.acks > 0
        if strategy != "during_flush":
            assert edge.host_ns >= detail["trigger_ns"] + 5_000_000
            assert cuts.context(log, edge.host_ns)["writes_issued_after"] == 0
        if strategy == "after_ack":
            assert detail["trigger_ns"] in set(log.column("complete_ns").tolist())
    finally:
        target.close()


class _FlushesLive:
    """A writer's live counters: one flush done at the start, another still in flight (or a
    worker past its stop check, about to issue one) until `release`: a flush the device may
    complete before the edge and a loaded host stamp after it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done_at = time.monotonic()

    @property
    def flushes_done(self) -> int:
        return 1 + self.release.is_set() if time.monotonic() > self.done_at else 0

    @property
    def flushes_in_flight(self) -> int:
        return 0 if self.release.is_set() else 1


class _CutClock:
    def __init__(self) -> None:
        self.called_at: float | None = None
        self.called_ns = 0
        self.delay_s = -1.0

    def cut(self, channel: int, delay_s: float) -> Any:
        self.called_at, self.called_ns = time.monotonic(), time.monotonic_ns()
        self.delay_s = delay_s
        return None


def test_a_window_after_the_flush_waits_for_the_flushes_in_flight() -> None:
    """The cut is timed once the writers are quiet, never from a flush that a later one, still
    in flight or about to be issued, overtakes (docs/decisions.md, "A cut after an event is
    timed from the rig's own event")."""
    live = _FlushesLive()
    live.done_at = time.monotonic() + 0.02  # the first flush completes after the trigger waits
    flushed: list[int] = []

    wrote: list[int] = []

    def write_once() -> int:  # the rig's own write the flush covers (fresh data at risk)
        assert live.release.is_set() and not flushed
        wrote.append(time.monotonic_ns())
        return wrote[-1]

    def flush_once(_: object) -> int:  # the rig's own flush, once the writers are quiet
        assert live.release.is_set() and wrote
        flushed.append(time.monotonic_ns() - 3_000_000)  # completed 3 ms ago (a slow return)
        return flushed[-1]

    writer: Any = type(
        "W",
        (),
        {
            "live": live,
            "join": lambda _, timeout_s: live.release.wait(timeout_s),
            "flush_once": flush_once,
            "write_once": lambda _: write_once(),
        },
    )()
    clock, stop = _CutClock(), threading.Event()
    released = time.monotonic() + 0.2
    threading.Timer(released - time.monotonic(), live.release.set).start()
    _, detail = cuts.schedule(
        "window", cuts.CutDraw(0.0, 0.010), writer, stop, clock, 0, 2.0, after="flush"
    )
    assert detail["trigger"] == "flush" and stop.is_set() and len(wrote) == 1
    assert clock.called_at is not None and clock.called_at >= released
    # timed from that flush's completion: the join's time is not added to the delay, and the
    # switch is asked for what is left of it (10 ms planned, 3+ ms of it gone)
    assert detail["trigger_ns"] == flushed[0]
    assert abs(clock.called_ns + clock.delay_s * 1e9 - (flushed[0] + 10_000_000)) < 100_000


def test_a_window_after_the_flush_writes_only_once_the_writers_flush_timers_ran_out() -> None:
    """An earlier flush's destage timer that ran out between the rig's write and its timed
    flush would empty the cache, and the cut would survive at any delay: the rig writes no
    sooner than quiet_s after the writers' last completed flush (rig/window/spec.py
    `quiet_s`), then flushes, and times the cut from that flush."""
    log = CycleLog()
    last_done = time.monotonic_ns()
    log.add_flush(0, last_done - 2_000_000, last_done, 0)  # the writers' last flush, just now
    events: list[tuple[str, int]] = []

    def once(kind: str) -> Any:
        def run(_: object = None) -> int:
            events.append((kind, time.monotonic_ns()))
            return events[-1][1]

        return run

    writer: Any = type(
        "W",
        (),
        {
            "live": _FlushesLive(),
            "context": type("C", (), {"log": log})(),
            "join": lambda _, timeout_s: True,
            "flush_once": lambda _, trigger=None: once("flush")(),
            "write_once": lambda _, trigger=None: once("write")(),
        },
    )()
    clock, stop = _CutClock(), threading.Event()
    _, detail = cuts.schedule(
        "window", cuts.CutDraw(0.0, 0.005), writer, stop, clock, 0, 2.0, after="flush",
        quiet_s=0.15,
    )  # fmt: skip
    assert [k for k, _ in events] == ["write", "flush"], events
    assert events[0][1] >= last_done + 150_000_000  # the writers' timer had run out
    assert detail["trigger"] == "flush" and detail["trigger_ns"] == events[1][1]
