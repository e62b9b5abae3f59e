"""The fleet tier under faults: PostgreSQL in a network namespace of its own, two
stations (alpha, beta) in namespaces of their own over veth links, each with its production
agent and in-process simulated drives, heartbeats every HEARTBEAT_S seconds.

Step by step: alpha's link is cut mid-campaign (both veth ends down) while beta's agent is
`kill -9`ed; then a station's `rig run` is `kill -9`ed; then PostgreSQL is stopped for a while.
At each step the stores and the central database hold the same cycle rows (once a link is
back), and the operator's view says what is true: a cut-off or dead station is `stale` within 3
heartbeats and its running campaigns `lagging`, in `rig fleet status --json` and in the
dashboard; a campaign is `done` only when the centre holds every row its station recorded
(checked on every look at the view); a campaign on in-process drives whose process died is
`failed` with the reason, centrally (submission, fleet.campaign, `rig report --central`), never
left running; the dashboard's first request after the server's restart is answered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures import pgcluster
from fixtures.fleet_demo import SIM_STATION, sim_campaign, sim_drives
from rig.interface.fleet import dashboard, dispatch
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.views import CentralView, Overview
from rig.store import Store
from tests.fleet import netns
from tests.fleet.test_fleet_acceptance import Fleet, alive, being_created, rig_runs_of, wait_for

HEARTBEAT_S = 2.0
ACCEPTED_BEATS = 3  # the view's promise: stale and lagging within 3 heartbeats
# the view is read by polling: a look takes up to this long on a loaded 2-core host
LOOK_SLACK_S = 1.5


@dataclass(frozen=True)
class Plan:
    cut_cycles: int  # per drive, alpha's campaign that runs through the link cut
    cut_s: float
    pg_cycles: int  # per drive, beta's campaign that runs through PostgreSQL's stop
    pg_down_s: float
    agent_kills: int  # kill -9 of beta's agent (each ends a campaign on in-process drives)


QUICK = Plan(cut_cycles=120, cut_s=10.0, pg_cycles=40, pg_down_s=6.0, agent_kills=1)
LONG = Plan(cut_cycles=300, cut_s=45.0, pg_cycles=200, pg_down_s=20.0, agent_kills=2)
LONG_CAMPAIGN = 2000  # cycles per drive of a campaign that is killed long before its end


class Watch:
    """Looks at the view as the operator does (the dashboard's view, a reader role) and checks,
    on every look, that each campaign shown `done` has every row of its store centrally."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.view = CentralView(fleet.pg.dsn("viewer"))
        self.client = dashboard.create_app(self.view).test_client()
        self.checked: set[str] = set()

    def look(self) -> Overview:
        overview = self.view.overview()
        for c in overview.campaigns:
            if c.state == "done" and c.key not in self.checked:
                station, _, uid = c.key.partition("/")
                local, central = campaign_keys(self.fleet, station, int(uid))
                assert local == central, f"{c.key} shown done with {len(central)}/{len(local)}"
                assert c.held_rows == c.final_rows == len(local)
                self.checked.add(c.key)
        return overview

    def until(self, what: str, condition: Callable[[Overview], bool], timeout_s: float) -> float:
        """Seconds until the view shows `condition`."""
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            if condition(self.look()):
                return time.monotonic() - began
            time.sleep(0.2)
        raise TimeoutError(f"the view did not show {what} in {timeout_s:.0f} s")

    def close(self) -> None:
        self.view.close()


def station(overview: Overview, name: str) -> Any:
    return next(s for s in overview.stations if s.name == name)


def campaign_of(overview: Overview, submission_id: int) -> Any:
    return next(c for c in overview.campaigns if c.submission_id == submission_id)


def campaign_keys(fleet: Fleet, name: str, uid: int) -> tuple[list[Any], list[Any]]:
    local = [k for k in fleet.local_keys(name) if k[0] == uid]
    central = [k for k in fleet.central_keys(name) if k[0] == uid]
    return local, central


def equal_rows(fleet: Fleet, *names: str, timeout_s: float = 90) -> None:
    for name in names:
        wait_for(
            f"{name}'s stores and the central database to hold the same rows",
            lambda name=name: fleet.central_keys(name) == fleet.local_keys(name),  # type: ignore[misc]
            timeout_s,
        )


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    for why in (pgcluster.requirements(), netns.requirements()):
        if why:
            pytest.skip(why)
    with ExitStack() as stack:
        lab = stack.enter_context(netns.lab({"alpha": True, "beta": True}))
        addresses = ",".join(link.db_addr for link in lab.links.values())
        pg = stack.enter_context(pgcluster.cluster(listen=addresses, netns=lab.db_netns))
        made = Fleet(tmp_path, lab, pg)
        stack.callback(made.stop)
        assert made.rig("fleet", "init-db", "--central", pg.dsn()).returncode == 0
        for name in ("alpha", "beta"):
            done = made.rig(
                "fleet", "add-station", name, "--password", f"pw-{name}", "--central", pg.dsn()
            )
            assert done.returncode == 0, done.stderr
        for user, kind in (("viewer", "reader"), ("operator", "dispatch")):
            done = made.rig("fleet", "add-user", user, "--kind", kind, "--central", pg.dsn())
            assert done.returncode == 0, done.stderr
        yield made


def submit(fleet: Fleet, name: str, cycles: int, tag: str) -> int:
    path = fleet.tmp / f"{name}-{tag}.toml"
    path.write_text(sim_campaign(name, cycles).replace(f"fleet-{name}", f"fleet-{name}-{tag}"))
    done = fleet.rig("fleet", "submit", str(path), "--central", fleet.pg.dsn("operator"))
    assert done.returncode == 0, done.stderr
    # in-process drives: said plainly at submit time
    assert "cannot survive its rig process" in done.stderr, done.stderr
    return int(done.stdout.split()[1].rstrip(":"))


def status_json(fleet: Fleet) -> dict[str, Any]:
    done = fleet.rig("fleet", "status", "--json", "--central", fleet.pg.dsn("viewer"))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def stale_within_three_beats(watch: Watch, name: str, submission_id: int, since: float) -> None:
    """The station shown stale, its campaign lagging, within 3 heartbeats of `since`, in the
    view, in the dashboard and in `rig fleet status --json`."""
    bound = ACCEPTED_BEATS * HEARTBEAT_S + LOOK_SLACK_S

    def shown(o: Overview) -> bool:
        return station(o, name).state == "stale" and campaign_of(o, submission_id).lagging

    watch.until(f"{name} stale and its campaign lagging", shown, bound + 30)
    took = time.monotonic() - since
    print(f"{name} shown stale and lagging {took:.1f} s after it fell silent")  # -s shows it
    assert took <= bound, f"{name} shown stale {took:.1f} s after it fell silent (> {bound} s)"
    body = watch.client.get("/api/overview").get_json()
    assert next(s for s in body["stations"] if s["name"] == name)["state"] == "stale"
    row = next(c for c in body["campaigns"] if c["submission_id"] == submission_id)
    assert row["lagging"] and row["eta_s"] is None
    html = watch.client.get("/fragment/overview").get_data(as_text=True)
    assert "class='stale'>stale" in html and "lagging" in html
    cli = status_json(watch.fleet)
    assert next(s for s in cli["stations"] if s["name"] == name)["state"] == "stale"
    assert next(c for c in cli["campaigns"] if c["submission_id"] == submission_id)["lagging"]


def failed_centrally(fleet: Fleet, watch: Watch, name: str, submission_id: int) -> None:
    """A campaign on in-process drives whose process died: failed with the reason, in the
    submission, in its campaign row (replicated from its store) and in the view."""

    def failed(o: Overview) -> bool:
        c = campaign_of(o, submission_id)
        return c.state == "failed"

    watch.until(f"submission {submission_id} failed", failed, 90)
    with CentralStore(fleet.pg.dsn()) as central:
        sub = central.submission(submission_id)
        assert sub is not None and "in-process" in sub["message"], sub
        wait_for(
            "its campaign row failed",
            lambda: all(
                r["status"] == "failed"
                for r in central.campaign_rows()
                if r["submission_id"] == submission_id
            ),
            60,
        )


def run_partition(fleet: Fleet, plan: Plan) -> None:
    extra = ("--heartbeat-s", str(HEARTBEAT_S))
    fleet.start_agent("alpha", SIM_STATION, sim_drives("alpha"), extra)
    fleet.start_agent("beta", SIM_STATION, sim_drives("beta"), extra)
    watch = Watch(fleet)
    try:
        watch.until(
            "both stations online",
            lambda o: [s.state for s in o.stations] == ["online", "online"],
            60,
        )
        cut_campaign = submit(fleet, "alpha", plan.cut_cycles, "cut")
        for kill in range(plan.agent_kills):
            killed_campaign = submit(fleet, "beta", LONG_CAMPAIGN, f"kill{kill}")
            wait_for(
                "beta's campaign to record",
                lambda sid=killed_campaign: _local_of(fleet, "beta", sid) >= 5,  # type: ignore[misc]
                120,
            )
            if kill == 0:
                cut_link(fleet, watch, plan, cut_campaign)
            agent = fleet.agents["beta"]
            rigs = rig_runs_of(fleet.tmp / "beta")
            os.kill(agent.pid, signal.SIGKILL)  # a station crash: its rig run dies with it
            killed_at = time.monotonic()
            agent.wait(10)
            stale_within_three_beats(watch, "beta", killed_campaign, killed_at)
            wait_for("beta's rig run to die with its agent", lambda r=rigs: not alive(r), 15)  # type: ignore[misc]
            fleet.restart_agent("beta")
            failed_centrally(fleet, watch, "beta", killed_campaign)
            equal_rows(fleet, "beta")
        # alpha's campaign caught up: done only when equal (Watch checks it on every look)
        watch.until(
            "alpha's campaign done", lambda o: campaign_of(o, cut_campaign).state == "done", 180
        )
        equal_rows(fleet, "alpha")

        # -- kill -9 of a station's rig run (its agent lives on: the station stays online)
        doomed = submit(fleet, "alpha", LONG_CAMPAIGN, "rigkill")
        wait_for("alpha's rig run to record", lambda: _local_of(fleet, "alpha", doomed) >= 5, 120)
        rigs = rig_runs_of(fleet.tmp / "alpha")
        assert alive(rigs)
        for pid in rigs:
            os.kill(pid, signal.SIGKILL)
        failed_centrally(fleet, watch, "alpha", doomed)
        assert station(watch.look(), "alpha").state == "online"
        equal_rows(fleet, "alpha")

        # -- PostgreSQL stopped for a while under a running campaign
        through = submit(fleet, "beta", plan.pg_cycles, "pg")
        wait_for("beta's campaign centrally", lambda: _central_of(fleet, through) >= 5, 120)
        fleet.pg.stop()
        time.sleep(plan.pg_down_s)
        fleet.pg.start()
        # the dashboard's session died with the server: its first request is still answered
        first = watch.client.get("/api/overview")
        assert first.status_code == 200, first.get_data(as_text=True)
        watch.until(
            "beta's campaign done after the restart",
            lambda o: campaign_of(o, through).state == "done",
            240,
        )
        equal_rows(fleet, "alpha", "beta")
        watch.until(
            "both stations online again",
            lambda o: [s.state for s in o.stations] == ["online", "online"],
            60,
        )
    finally:
        watch.close()
    never_left_running(fleet)


def cut_link(fleet: Fleet, watch: Watch, plan: Plan, submission_id: int) -> None:
    """alpha's link down while its campaign runs: stale and lagging within 3 heartbeats, nothing
    passes, alpha keeps testing; after it, alpha is online again."""
    wait_for("alpha's first cycles centrally", lambda: _central_of(fleet, submission_id) >= 5, 120)
    link = fleet.lab.links["alpha"]
    link.down()
    cut_at = time.monotonic()
    try:
        before_local = len(fleet.local_keys("alpha"))
        stale_within_three_beats(watch, "alpha", submission_id, cut_at)
        during = len(fleet.central_keys("alpha"))
        shown = campaign_of(watch.look(), submission_id)
        assert shown.state == "running"  # what the centre knows: the end has not reached it
        assert shown.cycles <= len(fleet.local_keys("alpha"))
        time.sleep(max(0.0, plan.cut_s - (time.monotonic() - cut_at)))
        assert len(fleet.central_keys("alpha")) == during  # nothing passes
        assert len(fleet.local_keys("alpha")) > before_local, "alpha stopped testing"
    finally:
        link.up()
    watch.until("alpha online again", lambda o: station(o, "alpha").state == "online", 60)


def _central_of(fleet: Fleet, submission_id: int) -> int:
    """Cycle rows of a submission's campaign in the central database."""
    with CentralStore(fleet.pg.dsn()) as central:
        rows = [r for r in central.campaign_rows() if r["submission_id"] == submission_id]
        if not rows:
            return 0
        keys = central.cycle_keys(rows[0]["station"])
        return sum(1 for k in keys if k["media_id"] == rows[0]["uid"])


def _local_of(fleet: Fleet, name: str, submission_id: int) -> int:
    """Cycle rows of a submission's store on its station (0 while it is being made)."""
    path = fleet.tmp / name / "campaigns" / f"sub-{submission_id}" / "store.sqlite"
    if not path.exists() or being_created(path):
        return 0
    store = Store(str(path), read_only=True)
    try:
        return store.cycle_counts()[0]
    finally:
        store.close()


def never_left_running(fleet: Fleet) -> None:
    """No campaign is left `running`, centrally or in the fleet's report."""
    with CentralStore(fleet.pg.dsn()) as central:
        assert all(r["status"] != "running" for r in central.campaign_rows()), [
            (r["station"], r["status"]) for r in central.campaign_rows()
        ]
        assert all(s["status"] not in ("queued", "running") for s in central.submissions())
    out = fleet.tmp / "report"
    done = fleet.rig("report", "--central", fleet.pg.dsn("viewer"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    campaigns = json.loads((out / "report.json").read_text())["campaigns"]
    statuses = sorted(c["status"] for c in campaigns)
    assert "running" not in statuses and statuses.count("failed") >= 2, statuses


def test_partition_scenario(fleet: Fleet) -> None:
    run_partition(fleet, QUICK)


@pytest.mark.slow
def test_partition_scenario_long(fleet: Fleet) -> None:
    run_partition(fleet, LONG)


HOLDER = """
import sys, time
from rig.interface.fleet.central import CentralStore
central = CentralStore(sys.argv[1])
with central.transaction() as db:  # a heartbeat's transaction, cut off before its commit
    db.execute("UPDATE fleet.station SET agent = 'cut off' WHERE name = 'alpha'")
    print("holding", flush=True)
    time.sleep(600)
"""


def test_a_session_cut_off_mid_transaction_frees_its_locks_in_seconds(tmp_path: Path) -> None:
    """The server's end of a station's session carries keepalives and a user timeout too: a
    session cut off inside a transaction is ended in seconds, so the station's next session does
    not wait on its row locks for the server's TCP retransmission time (minutes; found by the
    partition scenario: a replicator cut off inside `ship` blocked its own catch-up)."""
    for why in (pgcluster.requirements(), netns.requirements()):
        if why:
            pytest.skip(why)
    with (
        netns.lab({"alpha": True}) as lab,
        pgcluster.cluster(listen=lab.links["alpha"].db_addr, netns=lab.db_netns) as pg,
    ):
        dispatch.apply_queue_schema(pg.dsn())
        with CentralStore(pg.dsn()) as admin:
            admin.migrate()
            admin.add_station("alpha", "pw-alpha")
        link = lab.links["alpha"]
        dsn = (
            f"host={link.db_addr} port={pg.port} dbname=rig user=rig_station_alpha"
            " password=pw-alpha"
        )
        holder = subprocess.Popen(
            [*lab.exec_prefix("alpha"), sys.executable, "-c", HOLDER, dsn],
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
            link.down()
            began = time.monotonic()
            # as the station's next session would: the same row, waiting at most 60 s for it
            pg.psql(
                "SET lock_timeout = '60s';"
                " UPDATE fleet.station SET agent = 'back' WHERE name = 'alpha'"
            )
            waited = time.monotonic() - began
            print(f"the cut-off session's lock was freed after {waited:.1f} s")
            assert waited < 30
        finally:
            link.up()
            holder.kill()  # this PID only
            holder.wait(10)
