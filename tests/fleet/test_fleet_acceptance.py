"""Acceptance: a fleet on one machine. PostgreSQL runs in a network namespace of its
own; three stations reach it over veth links, each with its production agent (`rig fleet agent`):

- alpha and gamma, each in a namespace of its own, run in-process simulated drives;
- beta runs in the host's namespace (udev's events reach only that one) a real relay-board station:
  the production relay-board driver talking to the firmware's host build behind a pty, each
  channel switching a real loop device that leaves and rejoins the bus through udev
  (tests/loop_station.py), so its drives outlive its rig as real ones do.

Campaigns are submitted centrally (`rig fleet submit`, drives named by identity) and dispatched
by procrastinate to the station holding them. alpha's link is cut for a while mid-campaign: it
keeps testing and catches up. beta's agent is `kill -9`ed mid-campaign (its `rig run` dies with
it, as on a station crash): when the agent is back, its campaign resumes with `rig run --resume`
on beta, and nowhere else. At the end the central database holds exactly the cycles and findings
of the stations' stores. The fleet overview is shot in headless Chromium along the way.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures import pgcluster
from fixtures.fleet_demo import PLP, SIM_STATION, inventory, sim_campaign, sim_drives
from rig.interface.fleet.central import CentralStore
from rig.store import Store
from tests.fleet import browser, netns
from tests.fleet.test_dashboard_browser import end, wait_http
from tests.loop_station import loop_station
from tests.loop_station import requirements as loop_requirements

REPO = Path(__file__).resolve().parents[2]


def being_created(path: Path) -> bool:
    """A store file whose schema is not written yet (user_version 0): polled while a station's
    campaign is starting, it holds no cycles yet (a read-only Store refuses it as not a store of
    this rig's version)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0]) == 0
    finally:
        db.close()


@dataclass(frozen=True)
class Plan:
    sim_cycles: int  # per drive on alpha and gamma
    loop_cycles: int  # per drive on beta
    cut_s: float  # how long alpha's link stays down
    kills: int  # kill -9 of beta's agent


QUICK = Plan(sim_cycles=100, loop_cycles=24, cut_s=8.0, kills=1)
LONG = Plan(sim_cycles=400, loop_cycles=120, cut_s=45.0, kills=3)


def wait_for(what: str, condition: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")


class Fleet:
    def __init__(self, tmp: Path, lab: netns.Lab, pg: pgcluster.Cluster) -> None:
        self.tmp, self.lab, self.pg = tmp, lab, pg
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self.args: dict[str, list[str]] = {}

    def rig(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rig.interface.cli", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def station_dsn(self, station: str) -> str:
        link = self.lab.links[station]
        return (
            f"host={link.db_addr} port={self.pg.port} dbname=rig user=rig_station_{station}"
            f" password=pw-{station}"
        )

    def start_agent(
        self,
        station: str,
        station_table: str,
        drives: list[dict[str, str]],
        extra: tuple[str, ...] = (),
    ) -> None:
        home = self.tmp / station
        home.mkdir(exist_ok=True)
        (home / "inventory.toml").write_text(inventory(drives))
        (home / "station.toml").write_text(station_table)
        self.args[station] = [
            *self.lab.exec_prefix(station),
            sys.executable,
            "-m",
            "rig.interface.cli",
            "fleet",
            "agent",
            "--station",
            station,
            "--home",
            str(home / "campaigns"),
            "--inventory",
            str(home / "inventory.toml"),
            "--station-table",
            str(home / "station.toml"),
            "--central",
            self.station_dsn(station),
            *extra,
        ]
        self.restart_agent(station)

    def restart_agent(self, station: str) -> None:
        with open(self.tmp / station / "agent.log", "ab") as log:
            self.agents[station] = subprocess.Popen(
                self.args[station], cwd=REPO, stdout=log, stderr=subprocess.STDOUT
            )

    def stores(self, station: str) -> list[Path]:
        return sorted((self.tmp / station / "campaigns").glob("sub-*/store.sqlite"))

    def local_keys(self, station: str) -> list[tuple[object, ...]]:
        keys: list[tuple[object, ...]] = []
        for path in self.stores(station):
            if being_created(path):  # the campaign has made the file, not yet its schema
                continue
            store = Store(str(path), read_only=True)
            try:
                keys += [tuple(r) for r in store.cycle_keys()]
            finally:
                store.close()
        return sorted(keys)

    def central_keys(self, station: str) -> list[tuple[object, ...]]:
        with CentralStore(self.pg.dsn()) as central:
            return sorted(tuple(r.values()) for r in central.cycle_keys(station))

    def submissions(self) -> dict[str, dict[str, object]]:
        with CentralStore(self.pg.dsn()) as central:
            return {str(r["station"]): r for r in central.submissions()}

    def stop(self) -> None:
        for proc in self.agents.values():
            if proc.poll() is None:
                proc.kill()  # this PID only; its campaigns die with it (PDEATHSIG)
                proc.wait(10)


@pytest.fixture
def fleet(tmp_path: Path, udevd: None) -> Iterator[tuple[Fleet, object]]:
    for why in (pgcluster.requirements(), netns.requirements(), loop_requirements()):
        if why:
            pytest.skip(why)
    with ExitStack() as stack:
        lab = stack.enter_context(netns.lab({"alpha": True, "beta": False, "gamma": True}))
        addresses = ",".join(link.db_addr for link in lab.links.values())
        pg = stack.enter_context(pgcluster.cluster(listen=addresses, netns=lab.db_netns))
        station = stack.enter_context(loop_station(tmp_path, 2))
        made = Fleet(tmp_path, lab, pg)
        stack.callback(made.stop)
        assert made.rig("fleet", "init-db", "--central", pg.dsn()).returncode == 0
        for name in ("alpha", "beta", "gamma"):
            done = made.rig(
                "fleet", "add-station", name, "--password", f"pw-{name}", "--central", pg.dsn()
            )
            assert done.returncode == 0, done.stderr
        for user, kind in (("viewer", "reader"), ("operator", "dispatch")):
            done = made.rig("fleet", "add-user", user, "--kind", kind, "--central", pg.dsn())
            assert done.returncode == 0, done.stderr
        yield made, station


def run_fleet(fleet: Fleet, station: object, plan: Plan, shots: Path) -> None:
    texts = start_stations(fleet, station, plan)
    # -- beta first, alone (its loop devices keep their timing on a loaded 2-core host): its
    # agent is killed with SIGKILL mid-campaign, then comes back
    submit(fleet, texts, "beta")
    for kill in range(plan.kills):
        kill_beta_agent(fleet, plan, kill)
    wait_for("beta's campaign to finish", lambda: finished(fleet, "beta"), 300)
    cut_ended = alpha_cut_off_mid_campaign(fleet, texts, plan, shots)
    wait_for(
        "all three campaigns to finish", lambda: finished(fleet, "alpha", "beta", "gamma"), 600
    )
    every_store_arrived(fleet, plan, cut_ended)
    report_pools_the_stations(fleet, plan)


def start_stations(fleet: Fleet, station: object, plan: Plan) -> dict[str, str]:
    """The three agents, up with their inventories; the campaign each station is to run."""
    from tests.loop_station import campaign_text as loop_campaign

    fleet.start_agent("alpha", SIM_STATION, sim_drives("alpha"))
    fleet.start_agent("gamma", SIM_STATION, sim_drives("gamma"))
    beta_text = loop_campaign(station, plan.loop_cycles, watchdog_ms=3000)  # type: ignore[arg-type]
    beta_table = beta_text[beta_text.index("[station]") : beta_text.index("[workload]")]
    images = station.images  # type: ignore[attr-defined]
    fleet.start_agent(
        "beta",
        beta_table,
        [{"model": "Linux loop device", "serial": str(image)} for image in images.values()],
    )

    def inventories() -> bool:
        with CentralStore(fleet.pg.dsn()) as central:
            return all(int(s["drives"]) >= 2 for s in central.stations())

    wait_for("every station's inventory", inventories, 60)
    return {
        "alpha": sim_campaign("alpha", plan.sim_cycles),
        "beta": beta_text.replace('name = "resume-kill"', 'name = "fleet-beta"'),
        "gamma": sim_campaign("gamma", plan.sim_cycles),
    }


def submit(fleet: Fleet, texts: dict[str, str], name: str) -> None:
    path = fleet.tmp / f"{name}.toml"
    path.write_text(texts[name])
    done = fleet.rig("fleet", "submit", str(path), "--central", fleet.pg.dsn("operator"))
    assert done.returncode == 0, done.stderr
    assert f"on station {name}" in done.stdout


def finished(fleet: Fleet, *names: str) -> bool:
    states = {s: r["status"] for s, r in fleet.submissions().items() if s in names}
    assert not {"error", "failed", "stopped"} & set(states.values()), states
    return set(states.values()) == {"done"} and len(states) == len(names)


def kill_beta_agent(fleet: Fleet, plan: Plan, kill: int) -> None:
    """The `kill`-th SIGKILL of beta's agent: its rig run dies with it, nothing runs the
    campaign while it is away, and it comes back."""
    target = (kill + 1) * plan.loop_cycles * 2 // (plan.kills + 2)
    wait_for(
        f"beta's campaign to reach {target} cycles",
        lambda: len(fleet.local_keys("beta")) >= target,
        240,
    )
    rigs = rig_runs_of(fleet.tmp / "beta")
    assert alive(rigs), "beta's campaign is not running"
    agent = fleet.agents["beta"]
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait(10)
    wait_for("beta's rig run to die with its agent", lambda: not alive(rigs), 15)
    frozen = len(fleet.local_keys("beta"))
    time.sleep(2.0)
    assert len(fleet.local_keys("beta")) == frozen  # nothing runs it while its agent is away
    fleet.restart_agent("beta")


def alpha_cut_off_mid_campaign(
    fleet: Fleet, texts: dict[str, str], plan: Plan, shots: Path
) -> float:
    """alpha and gamma; alpha's link goes down mid-campaign: it keeps testing. Returns when the
    link came back (time.monotonic)."""
    submit(fleet, texts, "alpha")
    submit(fleet, texts, "gamma")
    # a drive is in one live campaign at most, across the fleet
    operator = fleet.pg.dsn("operator")
    again = fleet.rig("fleet", "submit", str(fleet.tmp / "alpha.toml"), "--central", operator)
    assert again.returncode == 2 and "already claimed" in again.stderr
    wait_for("alpha's first cycles centrally", lambda: len(fleet.central_keys("alpha")) >= 10, 120)
    link = fleet.lab.links["alpha"]
    link.down()
    try:
        before_local = len(fleet.local_keys("alpha"))
        time.sleep(plan.cut_s)
        central_during = len(fleet.central_keys("alpha"))
        time.sleep(2.0)
        assert len(fleet.central_keys("alpha")) == central_during  # nothing passes
        assert len(fleet.local_keys("alpha")) > before_local, "alpha stopped testing"
    finally:
        link.up()
    cut_ended = time.monotonic()
    if not browser.requirements():  # the fleet overview, in headless Chromium
        shoot_overview(fleet, shots)
    return cut_ended


def every_store_arrived(fleet: Fleet, plan: Plan, cut_ended: float) -> None:
    """alpha caught up after its link came back, beta after its restarts; each campaign ran
    once, beta's resumed there."""
    for name in ("alpha", "beta", "gamma"):
        wait_for(
            f"{name}'s store to be all in the central database",
            lambda name=name: fleet.central_keys(name) == fleet.local_keys(name),  # type: ignore[misc]
            120,
        )
    assert time.monotonic() > cut_ended
    local = {name: fleet.local_keys(name) for name in ("alpha", "beta", "gamma")}
    assert len(local["alpha"]) == len(local["gamma"]) == 2 * plan.sim_cycles
    for channel in (0, 1):  # beta: every seq once, 1..n, the campaign's cuts all there
        seqs = [k[2] for k in local["beta"] if k[1] == channel]
        assert seqs == list(range(1, len(seqs) + 1))
        counted = sum(k[3] != "interrupted" for k in local["beta"] if k[1] == channel)
        assert counted == plan.loop_cycles
    with CentralStore(fleet.pg.dsn()) as central:
        campaigns = {r["station"]: r for r in central.campaign_rows()}
        assert campaigns["beta"]["resumes"] >= plan.kills  # resumed on beta, by rig run --resume
        assert {r["station"] for r in central.campaign_rows()} == {"alpha", "beta", "gamma"}
        assert len(central.campaign_rows()) == 3  # never started twice


def report_pools_the_stations(fleet: Fleet, plan: Plan) -> None:
    """The report pools the model's cuts over the stations, per drive kept."""
    report = fleet.rig(
        "report", "--central", fleet.pg.dsn("viewer"), "--out", str(fleet.tmp / "report")
    )
    assert report.returncode == 0, report.stderr
    import json

    body = json.loads((fleet.tmp / "report" / "report.json").read_text())
    plp = next(m for m in body["models"] if m["model"] == PLP)
    assert plp["cuts"] == 2 * plan.sim_cycles
    assert sorted(s for d in plp["drives"] for s in d["stations"]) == [
        "alpha: simulated",
        "gamma: simulated",
    ]
    assert plp["verdict"]["label"] in ("NOT YET DEMONSTRATED", "PASS")


def rig_runs_of(home: Path) -> list[int]:
    """PIDs of the `rig run` processes of a station's campaigns (from their command lines)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"run" in argv and any(str(home).encode() in a for a in argv):
            pids.append(int(entry.name))
    return pids


def alive(pids: list[int]) -> bool:
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != "Z":
            return True
    return False


def shoot_overview(fleet: Fleet, shots: Path) -> None:
    """The fleet overview in Chromium (the dashboard reads PostgreSQL as a reader, over the
    server's socket); kept as docs/fleet-overview.png when RIG_DOCS_SHOTS names a folder."""
    from fixtures.pgcluster import free_port

    port = free_port()
    with open(fleet.tmp / "serve.log", "wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rig.interface.cli",
                "serve",
                "--central",
                fleet.pg.dsn("viewer"),
                "--port",
                str(port),
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_http(port)
        with browser.chromium(1400, 1100) as page:
            page.get(f"http://127.0.0.1:{port}/")
            wait_for(
                "three stations on the overview",
                lambda: page.find_element("tag name", "body").text.count("online") >= 3,
                30,
            )
            text = page.find_element("tag name", "body").text
            for name in ("alpha", "beta", "gamma", "fleet-alpha", "fleet-beta", "fleet-gamma"):
                assert name in text
            shots.mkdir(parents=True, exist_ok=True)
            page.save_screenshot(str(shots / "fleet-overview.png"))
        wanted = os.environ.get("RIG_DOCS_SHOTS")
        if wanted:
            shutil.copy(shots / "fleet-overview.png", Path(wanted) / "fleet-overview.png")
    finally:
        end(server)


def test_fleet_of_three_stations(fleet: tuple[Fleet, object], tmp_path: Path) -> None:
    made, station = fleet
    run_fleet(made, station, QUICK, tmp_path / "shots")


@pytest.mark.slow
def test_fleet_of_three_stations_long(fleet: tuple[Fleet, object], tmp_path: Path) -> None:
    made, station = fleet
    run_fleet(made, station, LONG, tmp_path / "shots")
