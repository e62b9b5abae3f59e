"""The agent decides how a campaign ended from its store, not from `rig run`'s exit status
alone: a run that fails at start with exit 1, or ends with status 0 or 1 while a drive
stopped short of its cycles, is recorded `failed` with its reason, never `done`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from fixtures.fleet_demo import sim_campaign
from rig.interface.fleet.agent import AgentConfig, StationAgent
from rig.store import Store
from tests.fleet import faulty_rig

CYCLES = 12


def run_once(tmp_path: Path, fault: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """One campaign through the agent's own launch and supervision (no central database: the
    agent reports later), with `rig` replaced by the faulty one; the finished local state."""
    monkeypatch.setenv(faulty_rig.FAULT, fault)
    config = AgentConfig(
        station="alpha",
        dsn="postgresql:///unused",
        home=tmp_path / "home",
        inventory=[],
        rig=[sys.executable, "-m", "tests.fleet.faulty_rig"],
    )
    agent = StationAgent(config)
    local = agent.local(1)
    local.folder.mkdir(parents=True)
    local.campaign_file.write_text(sim_campaign("alpha", CYCLES))
    local.update(status="accepted", stop=False, launches=0, crashes=0)
    agent._supervise()  # launches `rig run`
    deadline = time.monotonic() + 300
    while local.state().get("status") != "finished":
        assert time.monotonic() < deadline, (local.folder / "rig.out").read_text()
        time.sleep(0.2)
        agent._supervise()
    return local.state()


def test_a_run_that_fails_at_start_with_exit_1_is_failed_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = run_once(tmp_path, "start", monkeypatch)
    assert (state["result"], state["exit_code"]) == ("failed", 1)
    assert "table campaign already exists" in str(state["message"])


def test_a_run_that_ends_short_of_its_cycles_with_status_0_is_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = run_once(tmp_path, "after:3", monkeypatch)
    assert state["exit_code"] in (0, 1)  # (1: the faulty drive failed in its 3 cycles)
    assert state["result"] == "failed", state
    store = Store(str(tmp_path / "home" / "sub-1" / "store.sqlite"), read_only=True)
    try:
        counted = [store.cycle_totals(d["id"])["counted"] for d in store.all_drives()]
    finally:
        store.close()
    assert counted == [3, 3]  # what the store holds, and what the message says
    for channel in (0, 1):
        assert f"ch{channel}: 3 of {CYCLES} cycles, no stop reason" in str(state["message"])


def test_a_whole_run_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = run_once(tmp_path, f"after:{CYCLES}", monkeypatch)  # (the fault never fires)
    assert state["result"] == "done", state
    assert state["exit_code"] in (0, 1)  # 1: the simulated faulty drive fails, as it should
