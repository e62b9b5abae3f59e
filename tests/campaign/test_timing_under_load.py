"""Cuts fall when the rig says, and the twin's truth holds, beside a CPU hog (4 busy processes
per core): the in-process twin through the production campaign code. The figures against the
goals (16 drives, p99) are bench/cut_timing.py's; these bounds are an order of magnitude wider
than what the rig reaches and an order below what it did when cuts were timed by threads the
load held back (lateness p50 0.4 s, join + plan on a window after the flush)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fixtures import sim_station
from fixtures.faultcore import DESTAGE_TIMER
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.store import Store
from rig.window import fit
from tests.hog import cpu_hog
from tests.window.test_window_campaign import PROFILES, campaign_text, run, window_of

# its hog would load whatever ran beside it on the other worker: make test runs these alone
pytestmark = pytest.mark.alone

LOAD_PROFILES = ["window-2ms-jitter", "window-20ms-jitter", "ack-window-20ms-jitter"]
COVERAGE_PROFILES = ["window-2ms", "window-20ms-jitter", "ack-window-20ms-jitter"]
RARE = 1e-4  # a loss (or a survival) the profile's curve gives less often than this per cut
SLACK_MS, SLACK_SHARE = 2.0, 0.10  # placement bound of these tests (the goal: 0.5 ms + 5 %)


def _placement(store: Store) -> list[tuple[float, float, str]]:
    """(planned ms, realized ms, timed from) of every cycle with an edge."""
    rows = store.query(
        "SELECT cut_delay_ns, realized_delay_ns, timed_from FROM cycle"
        " WHERE realized_delay_ns IS NOT NULL ORDER BY id"
    )
    return [(p / 1e6, r / 1e6, t) for p, r, t in rows]


def _off_plan(placed: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    return [x for x in placed if abs(x[1] - x[0]) > SLACK_MS + SLACK_SHARE * x[0]]


@pytest.mark.parametrize("name", LOAD_PROFILES)
def test_a_window_profile_under_a_cpu_hog_keeps_its_curve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    profile = PROFILES[name]
    event = "ack" if profile.destage_after == "write" else "flush"
    text = campaign_text([name], 24, window_of(name))
    with cpu_hog():
        planner, drives, store = run(tmp_path, text, monkeypatch)
    design = planner.design(f"SIM {name}")
    timers = [e for e in drives[0].core.truth if e.kind == DESTAGE_TIMER]
    assert len(timers) == len(design.lost) == 24
    # the rig's delay since its event is the twin's own, cut by cut: both stamp the event and
    # the edge at the instant (µs: the truth log's rounding); an ack profile's timer starts
    # when the write arrives, its acknowledgement one write latency later
    lead_ms = drives[0].profile.write_latency_s * 1000 if event == "ack" else 0.0
    for e, delay_ms in zip(timers, design.delays_ms, strict=True):
        assert abs(e.detail["since_us"] / 1000 - lead_ms - delay_ms) <= 0.002, (e, delay_ms)
    # what the checker found lost against the profile's curve at the rig's delay: never a loss
    # the curve makes rarer than RARE per cut (chance of a false alarm in 24 cuts below 24 RARE
    # = 0.24 %). Not the converse: a cut can survive a short delay when the drive had nothing
    # cached (its timer ran out while the writers stopped, before the rig's flush), which is
    # the twin's truth, not a timing fault
    for lost, delay_ms in zip(design.lost, design.delays_ms, strict=True):
        p = profile.true_loss_probability(delay_ms)
        assert p >= RARE or not lost, (lost, delay_ms, p)
    pairs = zip(timers, design.lost, strict=True)
    agree = sum(bool(e.detail["at_risk"]) == lost for e, lost in pairs)
    assert agree >= 0.9 * len(timers)
    # placement: the design's delays are the ones it asked for
    placed = _placement(store)
    assert len(placed) == 24 and all(t == event for _, _, t in placed), placed
    assert len(_off_plan(placed)) <= 2, _off_plan(placed)


UNIFORM = """
[campaign]
name = "u"
cycles = 20
seed = 3
region_mib = 4
[station]
kind = "simulated"
[workload]
workers = 2
write_blocks = [1, 2]
flush_every = 4
[cut]
strategy = "uniform"
delay_ms = [0.5, 5]
off_ms = 1
sample_blocks = 16
[[drive]]
channel = 0
model = "SIM a"
serial = "SN0"
profile = "honest"
[[drive]]
channel = 1
model = "SIM b"
serial = "SN1"
profile = "honest"
"""


def _campaign_under_hog(tmp_path: Path, text: str) -> Store:
    """The campaign on in-process drives beside the hog, with no rig error; its store."""
    campaign = campaign_file.parse(text)
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "c.sqlite"))
    with cpu_hog():
        summaries = run_campaign(campaign, station, store, Observer())
    assert all(s.errors == 0 for s in summaries)
    return store


def test_uniform_cuts_under_a_cpu_hog_fall_at_their_planned_delay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    placed = _placement(_campaign_under_hog(tmp_path, UNIFORM))
    assert len(placed) == 40 and all(t == "first_write" for _, _, t in placed), placed
    late = sorted(r - p for p, r, _ in placed)
    assert late[math.ceil(0.9 * len(late)) - 1] <= SLACK_MS, late
    assert len(_off_plan(placed)) <= 4, _off_plan(placed)


def test_after_ack_cuts_at_sixteen_drives_under_a_cpu_hog_fall_at_their_planned_delay(
    tmp_path: Path,
) -> None:
    """Sixteen drives' threads share one interpreter: a cut sent by the writer thread the
    acknowledgement woke waited for the GIL behind them (median 4.5-6.7 ms late here beside the
    hog); sent by the real-time cut thread once its own write returned, 25-35 % of cuts still
    fell outside the goal's 0.5 ms + 5 % (that thread waited for the GIL after the
    completion). Armed in the completion path, 99 % fall inside it (bench/cut_timing.py); this
    bound allows 3 of 64."""
    head = UNIFORM.split("[[drive]]", 1)[0].replace("cycles = 20", "cycles = 4")
    head = head.replace('strategy = "uniform"\ndelay_ms = [0.5, 5]', AFTER_ACK)
    drives = "".join(
        f'[[drive]]\nchannel = {ch}\nmodel = "SIM {ch}"\nserial = "SN{ch}"\nprofile = "honest"\n'
        for ch in range(16)
    )
    placed = _placement(_campaign_under_hog(tmp_path, head + drives))
    assert len(placed) == 64 and all(t == "ack" for _, _, t in placed), placed
    outside = [x for x in placed if abs(x[1] - x[0]) > 0.5 + 0.05 * x[0]]
    assert len(outside) <= 3, outside
    assert all(r >= p - 0.01 for p, r, _ in placed), placed  # never before its plan


AFTER_ACK = 'strategy = "after_ack"\ndelay_ms = [0.5, 2]\nafter_ms = [0.5, 5]'


def _coverage_under_hog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, seeds: range
) -> list[str]:
    """The t99 interval of one real 60-cut campaign per seed, all beside one hog; the ones
    that miss the profile's true t99 (an open interval covers nothing)."""
    truth = PROFILES[name].true_quantile_ms(0.99)
    flush_every = 0 if PROFILES[name].destage_after == "write" else 4
    missed = []
    with cpu_hog():
        for seed in seeds:
            where = tmp_path / str(seed)
            where.mkdir()
            text = campaign_text([name], 60, window_of(name), seed=seed, flush_every=flush_every)
            planner, _, _ = run(where, text, monkeypatch)
            design = planner.design(f"SIM {name}")
            q = fit.fit(design.delays_ms, design.lost).quantile(0.99)
            if q is None or not q.covers(truth):
                missed.append(f"seed {seed}: {q}")
    return missed


@pytest.mark.slow
@pytest.mark.parametrize("name", COVERAGE_PROFILES)
def test_under_a_cpu_hog_the_t99_interval_covers_the_truth_in_90_percent_of_50(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The goal's coverage beside the hog. window-2ms covered 12 of 15 seeds while a destage
    timer the writers' last flush started could run out between the rig's own write and its
    timed flush (the cut then had nothing at risk however short its delay); the rig now waits
    out the writers' timers first (docs/decisions.md, "A cut after a flush waits out the
    writers' flush timers")."""
    missed = _coverage_under_hog(tmp_path, monkeypatch, name, range(50))
    assert len(missed) <= 5, missed
