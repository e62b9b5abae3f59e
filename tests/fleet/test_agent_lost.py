"""A campaign on in-process drives whose `rig run` died: the agent ends it itself,
`failed` with the reason, in its store too, instead of a resume that must fail; one that had
ended on its own while its agent was away keeps its end. No PostgreSQL needed: the agent's
decision is local (the central copy follows the store)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from rig.interface.fleet.agent import AgentConfig, StationAgent
from rig.interface.fleet.local import LOST_IN_PROCESS, LocalCampaign
from rig.store import Store
from tests.cli_runner import rig

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.toml"


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    done = rig("demo", "--in-process", "--cycles", "4", "--quiet", "--out", str(out), cwd=out)
    assert done.returncode == 0, done.stderr
    return out / "demo.sqlite"


def _agent(home: Path) -> StationAgent:
    return StationAgent(
        AgentConfig(station="alpha", dsn="host=/nonexistent", home=home, inventory=[])
    )


def _campaign(agent: StationAgent, store: Path, status: str) -> LocalCampaign:
    local = agent.local(7)
    local.folder.mkdir(parents=True)
    local.campaign_file.write_text(DEMO.read_text())  # kind = "simulated": in-process drives
    shutil.copy(store, local.store)
    with sqlite3.connect(local.store) as db:
        db.execute("UPDATE campaign SET status = ?, ended_at = NULL", (status,))
    local.update(status="running", launches=1, crashes=1)
    return local


def test_a_lost_in_process_campaign_ends_failed_with_its_reason(
    demo_store: Path, tmp_path: Path
) -> None:
    agent = _agent(tmp_path / "home")
    local = _campaign(agent, demo_store, "running")  # its rig run was killed mid-campaign
    assert agent.settle_lost(local)
    state = local.state()
    assert state["status"] == "finished" and state["result"] == "failed"
    assert state["message"] == LOST_IN_PROCESS and "in-process" in LOST_IN_PROCESS
    assert state["final"][0] > 0  # the rows its store holds, reported with the end
    store = Store(str(local.store), read_only=True)
    try:
        head = store.latest_campaign()
        assert head is not None and head["status"] == "failed" and head["ended_at"]
        events = store.loose_events_after(0, 1000)
        assert [e["kind"] for e in events].count("campaign_lost") == 1
    finally:
        store.close()


def test_an_in_process_campaign_that_ended_while_its_agent_was_away_keeps_its_end(
    demo_store: Path, tmp_path: Path
) -> None:
    agent = _agent(tmp_path / "home")
    local = _campaign(agent, demo_store, "done")
    assert agent.settle_lost(local)
    assert local.state()["result"] == "done"
