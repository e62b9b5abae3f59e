"""The window strategy through the production campaign code on in-process virtual drives whose
windows are known (fixtures/profiles.toml, window-* and ack-window-*), and its bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures import sim_station
from fixtures.faultcore import DESTAGE_TIMER
from fixtures.profiles import load_profiles
from fixtures.virtual_drive import VirtualDrive
from rig.campaign.observer import Observer
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.errors import UserError
from rig.store import Store
from rig.window import fit
from rig.window import planner as planner_module
from rig.window.planner import WindowPlanner
from tests.cli_runner import rig
from tests.interface.test_cli_refusals import assert_one_line_refusal

DRIVE = """
[[drive]]
channel = {channel}
model = "SIM {profile}"
serial = "SN{channel:04d}"
profile = "{profile}"
"""
PROFILES = load_profiles()
QUICK = sorted(n for n, p in PROFILES.items() if 0 < p.destage_window_ms <= 200)
LONG = sorted(n for n, p in PROFILES.items() if p.destage_window_ms > 200)


def campaign_text(
    profiles: list[str], cycles: int, window: str, seed: int = 5, flush_every: int = 4
) -> str:
    drives = "".join(DRIVE.format(channel=i, profile=p) for i, p in enumerate(profiles))
    return f"""
[campaign]
name = "w"
cycles = {cycles}
seed = {seed}
region_mib = 4
[station]
kind = "simulated"
[workload]
workers = 2
write_blocks = [1, 2]
flush_every = {flush_every}
[cut]
strategy = "window"
delay_ms = [0.5, 2]
off_ms = 1
sample_blocks = 16
[cut.window]
{window}
{drives}"""


def window_of(name: str) -> str:
    """A range of W/20 .. 20 t99 around the profile's window, timed from its event."""
    p = PROFILES[name]
    after = "ack" if p.destage_after == "write" else "flush"
    high = 20 * p.true_quantile_ms(0.99)
    return f'after = "{after}"\nmin_ms = {p.destage_window_ms / 20}\nmax_ms = {high}'


def run(
    tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[WindowPlanner, list[VirtualDrive], Store]:
    made: list[WindowPlanner] = []

    class Kept(WindowPlanner):  # the campaign's own planner, kept to read its designs
        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(planner_module, "WindowPlanner", Kept)
    campaign = campaign_file.parse(text)
    station, drives = sim_station.build(campaign)
    store = Store(str(tmp_path / "w.sqlite"))
    summaries = run_campaign(campaign, station, store, Observer())
    assert all(s.errors == 0 for s in summaries)
    return made[0], drives, store


def check_against_truth(name: str, planner: WindowPlanner, drive: VirtualDrive) -> fit.WindowFit:
    """Every cut's response agrees with what the twin did, and the fit finds its window."""
    design = planner.design(f"SIM {name}")
    timers = [e for e in drive.core.truth if e.kind == DESTAGE_TIMER]
    assert len(timers) == drive.core.cuts == len(design.lost)
    agree = sum(
        bool(e.detail["at_risk"]) == lost for e, lost in zip(timers, design.lost, strict=True)
    )
    assert agree >= 0.9 * len(timers)
    # the measured delay is the twin's own within its timing (the ledger stamps after the core;
    # a writer thread the loaded host held back can arrive late: the median, not every cut)
    errors = sorted(
        abs(e.detail["since_us"] / 1000 - d) / (1.0 + 0.02 * d)
        for e, d in zip(timers, design.delays_ms, strict=True)
    )
    assert errors[len(errors) // 2] < 1.0
    return fit.fit(design.delays_ms, design.lost)


TIMING_MS = 1.5  # the rig's delay error on this loaded host (edge, poll, thread wake-up)


def assert_found(name: str, result: fit.WindowFit) -> None:
    """A bounded t99 interval near the twin's true t99: within a factor 1.5 and the rig's
    timing error of it. (A flush whose completion the ledger stamps after the edge, when the
    loaded host held its thread back, counts as not complete: the cut's measured delay is then
    from an earlier flush, longer than the twin's, and the interval can sit above the truth.
    The 50-campaign coverage on real drives is the slow test below.)"""
    truth = PROFILES[name].true_quantile_ms(0.99)
    t99 = result.quantile(0.99)
    assert result.verdict == "window" and t99 is not None, result.summary()
    assert t99.low_ms is not None and t99.high_ms is not None, result.summary()
    assert t99.low_ms - TIMING_MS <= truth * 1.5, result.summary()
    assert truth / 1.5 <= t99.high_ms + TIMING_MS, result.summary()


# the 200 ms windows take 20-40 s each (CI time); they run with -m slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if "200ms" in n else n for n in QUICK],
)
def test_one_real_campaign_per_profile_finds_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    flush_every = 0 if PROFILES[name].destage_after == "write" else 4
    # a jittered window needs more cuts to bound its t99 from above: over seeds 0-39 on a quiet
    # host, window-2ms-jitter failed this check in 3 campaigns of 40 cuts, 1 of 60 (its t99
    # interval open above); ack-window-20ms-jitter in none of 40 cuts
    cuts = 60 if PROFILES[name].destage_jitter > 0 else 40
    text = campaign_text([name], cuts, window_of(name), flush_every=flush_every)
    planner, drives, _ = run(tmp_path, text, monkeypatch)
    assert_found(name, check_against_truth(name, planner, drives[0]))


@pytest.mark.slow
@pytest.mark.parametrize("name", LONG)
def test_one_real_campaign_on_the_long_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    planner, drives, _ = run(tmp_path, campaign_text([name], 40, window_of(name)), monkeypatch)
    assert_found(name, check_against_truth(name, planner, drives[0]))


@pytest.mark.slow
@pytest.mark.parametrize("name", QUICK + LONG)
def test_real_campaigns_cover_true_t99_in_90_percent_of_50(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    truth = PROFILES[name].true_quantile_ms(0.99)
    flush_every = 0 if PROFILES[name].destage_after == "write" else 4
    covered = 0
    for seed in range(50):
        where = tmp_path / str(seed)
        where.mkdir()
        text = campaign_text([name], 60, window_of(name), seed=seed, flush_every=flush_every)
        planner, _, _ = run(where, text, monkeypatch)
        design = planner.design(f"SIM {name}")
        q = fit.fit(design.delays_ms, design.lost).quantile(0.99)
        covered += q is not None and q.covers(truth)
    assert covered >= 45


def test_a_models_drives_pool_their_cuts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = campaign_text(["window-20ms-jitter"], 12, window_of("window-20ms-jitter"))
    text += DRIVE.format(channel=1, profile="window-20ms-jitter")  # same model, second drive
    planner, _, _ = run(tmp_path, text, monkeypatch)
    assert len(planner.design("SIM window-20ms-jitter").lost) == 24


BASE = (
    "[campaign]\nname='x'\ncycles=1\n[station]\nkind='simulated'\n[[drive]]\nchannel=0\n"
    "model='m'\nserial='s'\nprofile='window-20ms'\n[workload]\nflush_every=4\n"
    "[cut]\nstrategy='window'\n"
)


@pytest.mark.parametrize(
    "table, words",
    [
        ("[cut.window]\nmin_ms = 10\nmax_ms = 10\n", ("empty or not positive",)),
        ("[cut.window]\nmin_ms = 50\nmax_ms = 10\n", ("empty or not positive",)),
        ("[cut.window]\nmin_ms = -1\nmax_ms = 10\n", ("empty or not positive",)),
        ("[cut.window]\nmin_ms = 0\n", ("empty or not positive",)),
        ("[cut.window]\nclass = 'shorn_write'\n", ("shorn_write has no time axis",)),
        ("[cut.window]\nclass = 'lost_write'\n", ("timed after the ack, not after the flush",)),
        ("[cut.window]\nafter = 'boot'\n", ("after must be one of",)),
        ("[cut.window]\nafter = 'ack'\nquiet_ms = 5\n", ("quiet_ms is for a window after",)),
        ("[cut.window]\nquiet_ms = -1\n", ("quiet_ms = -1 is outside",)),
    ],
)
def test_bad_window_input_is_refused_before_any_write(
    tmp_path: Path, table: str, words: tuple[str, ...]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BASE + table)
    assert_one_line_refusal(rig("run", str(path), cwd=tmp_path), *words)
    assert not list(tmp_path.glob("*.sqlite"))


def test_a_window_table_without_the_strategy_is_refused() -> None:
    text = BASE.replace("strategy='window'", "strategy='uniform'") + "[cut.window]\n"
    with pytest.raises(UserError, match=r"needs \[cut\].strategy"):
        campaign_file.parse(text)
