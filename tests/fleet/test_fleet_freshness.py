"""The operator's view states its own age, against a real PostgreSQL: a station is
stale after 3 missed heartbeats of its own interval, its campaigns lag; a campaign is `shipping`
until the centre holds every cycle row its station recorded, then `done` with its duration; a
connection the server dropped is retried once; the notifier's hook sees stale / back; a submit
to in-process drives is warned about."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fixtures.pgcluster import Cluster
from rig.interface.cli_json import fleet_status
from rig.interface.fleet import dashboard
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.freshness import (
    StaleWatch,
    StationStatus,
    Transition,
    effective_kind,
    process_bound,
)
from rig.interface.fleet.replicator import next_batch, replicate_store
from rig.interface.fleet.station_states import StationStates
from rig.interface.fleet.station_watch import StationWatch
from rig.interface.fleet.status import overview_text
from rig.interface.fleet.views import CampaignProgress, CentralView, StoreView
from rig.store import Store
from tests.cli_runner import rig

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.toml"


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    done = rig("demo", "--in-process", "--cycles", "12", "--quiet", "--out", str(out), cwd=out)
    assert done.returncode == 0, done.stderr
    return out / "demo.sqlite"


def _backdate(pg: Cluster, station: str, seconds: float) -> None:
    """The station's last heartbeat `seconds` ago (as if it had been silent since)."""
    pg.psql(
        f"UPDATE fleet.station SET last_seen = now() - interval '{seconds} seconds'"
        f" WHERE name = '{station}'"
    )


def _states(pg: Cluster) -> dict[str, str]:
    view = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    try:
        return {s.name: s.state for s in view.overview().stations}
    finally:
        view.close()


def test_a_station_is_stale_after_three_missed_heartbeats_and_the_hook_sees_it(
    pg: Cluster,
) -> None:
    watch = StaleWatch(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    with CentralStore(pg.dsn("rig_station_alpha", "pw-alpha", "127.0.0.1")) as alpha:
        alpha.heartbeat("alpha", "test", interval_s=5.0, kind="relay-board")
        assert watch.poll() == []  # the first poll learns the states
        assert _states(pg)["alpha"] == "online"
        _backdate(pg, "alpha", 12.0)  # under 3 beats of 5 s (3 s for the look)
        assert _states(pg)["alpha"] == "online"
        _backdate(pg, "alpha", 16.0)  # over 3 beats: stale (the old view waited 30 s)
        assert _states(pg)["alpha"] == "stale"
        assert [(t.station, t.before, t.after) for t in watch.poll()] == [
            ("alpha", "online", "stale")
        ]
        assert watch.poll() == []  # reported once
        alpha.heartbeat("alpha", "test", interval_s=5.0, kind="relay-board")
        back = watch.poll()
        assert [(t.station, t.before, t.after) for t in back] == [("alpha", "stale", "online")]
        assert isinstance(back[0], Transition) and back[0].last_seen_s is not None


def test_both_station_watchers_take_their_transitions_from_one_memory() -> None:
    """StaleWatch (the notifier's hook) and StationWatch (`station_offline` notices) see one
    sequence of looks through rig/interface/fleet/station_states.py: the hook every change after its
    first poll, the notices each fall from online, a station silent at the first look and one
    missing from a look (its last state kept) included."""
    alpha = {
        "up": StationStatus("alpha", 4, 2.0, "a"),
        "down": StationStatus("alpha", 4, 95.0, "a"),
    }
    beta = {"up": StationStatus("beta", 2, 1.0, "b"), "down": StationStatus("beta", 2, 40.0, "b")}
    never = StationStatus("gamma", 1, None, "")
    looks = [
        [alpha["up"], beta["down"], never],  # beta silent at the first look
        [alpha["down"], beta["down"], never],  # alpha falls
        [beta["up"]],  # alpha missing from this look
        [alpha["down"], beta["up"], StationStatus("gamma", 1, 3.0, "g")],  # gamma first seen
        [alpha["up"], beta["down"], StationStatus("gamma", 1, 30.0, "g")],
    ]
    stale = StaleWatch("")
    told: list[str] = []
    notices = StationWatch(lambda kind, title, body: told.append(title))
    hook, fell = [], []
    for look in looks:
        hook.append([(t.station, t.before, t.after) for t in stale.update(look)])
        fell.append(notices.look(look))
    assert isinstance(stale.states, StationStates) and isinstance(notices.states, StationStates)
    assert hook == [
        [],  # the first poll learns
        [("alpha", "online", "stale")],
        [("beta", "stale", "online")],
        [("gamma", "never seen", "online")],  # alpha: stale when last seen, stale now
        [("alpha", "stale", "online"), ("beta", "online", "stale"), ("gamma", "online", "stale")],
    ]
    assert fell == [["beta"], ["alpha"], [], [], ["beta", "gamma"]]
    assert told == [f"rig: station {name} offline" for name in ("beta", "alpha", "beta", "gamma")]


def _campaign(pg: Cluster, submission_id: int) -> CampaignProgress:
    view = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    try:
        overview = view.overview()
    finally:
        view.close()
    text = overview_text(overview)
    rows = fleet_status(overview)
    found = [c for c in overview.campaigns if c.submission_id == submission_id]
    assert len(found) == 1
    row = next(r for r in rows["campaigns"] if r["submission_id"] == submission_id)
    assert row["state"] == found[0].state and row["lagging"] == found[0].lagging
    assert found[0].key in text
    return found[0]


def test_progress_lag_shipping_and_done_follow_what_the_centre_holds(
    pg: Cluster, demo_store: Path
) -> None:
    with sqlite3.connect(demo_store) as db:  # what the station recorded
        rows = db.execute("SELECT count(*) FROM cycle").fetchone()[0]
        counted = db.execute("SELECT count(*) FROM cycle WHERE status <> 'interrupted'").fetchone()
    recorded = (int(rows), int(counted[0]))
    with CentralStore(pg.dsn()) as admin:
        sid = admin.create_submission("demo", DEMO.read_text(), "alpha", ["sn:fresh|1"], 36)
    alpha_dsn = pg.dsn("rig_station_alpha", "pw-alpha", "127.0.0.1")
    store = Store(str(demo_store), read_only=True)
    try:
        with CentralStore(alpha_dsn) as alpha:
            alpha.submission_started(sid)
            alpha.ship("alpha", next_batch(store, alpha, "alpha", sid, limit=5))
            alpha.heartbeat("alpha", "test", interval_s=5.0, recorded={sid: recorded})
            running = _campaign(pg, sid)
            # progress is the station's own count, more than reached the centre
            assert running.state == "running" and not running.lagging
            assert running.cycles == recorded[1] and running.held_rows < recorded[0]
            _backdate(pg, "alpha", 16.0)
            lagging = _campaign(pg, sid)
            assert lagging.lagging and lagging.eta_s is None
            assert "lagging" in overview_text_of(pg)
            # the station says it ended: not `done` while rows it recorded are missing here
            alpha.finish_submission(sid, "done", 0, "", recorded)
            alpha.heartbeat("alpha", "test", interval_s=5.0)
            shipping = _campaign(pg, sid)
            assert shipping.state == "shipping" and shipping.status == "done"
            assert shipping.final_rows == recorded[0] > shipping.held_rows
            replicate_store(store, alpha, "alpha", sid)
    finally:
        store.close()
    done = _campaign(pg, sid)
    assert done.state == "done" and done.held_rows == recorded[0]
    # an ended campaign shows its duration, not a rate
    assert done.duration_s is not None and done.duration_s > 0 and done.per_hour == 0
    line = next(x for x in overview_text_of(pg).splitlines() if x.startswith(done.key))
    assert "took " in line and "/h" not in line


def overview_text_of(pg: Cluster) -> str:
    view = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    try:
        return overview_text(view.overview())
    finally:
        view.close()


def test_a_connection_the_server_dropped_is_retried_before_a_503(pg: Cluster) -> None:
    view = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    app = dashboard.create_app(view)
    client = app.test_client()
    try:
        assert client.get("/api/overview").status_code == 200
        # what a server restart does to the dashboard's session: AdminShutdown on its next use
        pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'viewer'")
        answer = client.get("/api/overview")
        assert answer.status_code == 200, answer.get_data(as_text=True)
        assert {s["name"] for s in json.loads(answer.get_data())["stations"]} >= {"alpha"}
    finally:
        view.close()


def test_a_submit_to_in_process_drives_says_it_cannot_survive_its_process(
    pg: Cluster, tmp_path: Path
) -> None:
    with CentralStore(pg.dsn("rig_station_beta", "pw-beta", "127.0.0.1")) as beta:
        beta.publish_inventory(
            "beta",
            [
                {"model": m, "serial": s, "wwn": f"0x5000c500a000000{n}"}
                for n, (m, s) in enumerate(
                    [
                        ("RIGSIM Enterprise PLP", "SIMPLP0001"),
                        ("RIGSIM Lying Flush", "SIMLIE0002"),
                        ("RIGSIM Torn Writer", "SIMTRN0003"),
                    ],
                    start=1,
                )
            ],
        )
        beta.heartbeat("beta", "test", interval_s=2.0, kind="simulated")
    operator = pg.dsn("operator", "pw-operator", "127.0.0.1")
    done = rig("fleet", "submit", str(DEMO), "--central", operator, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "cannot survive its rig process" in done.stderr
    assert "station beta" in done.stderr
    status = rig("fleet", "status", "--json", "--central", operator, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    mine = [c for c in body["campaigns"] if c["station"] == "beta"]
    assert mine and all(c["process_bound"] for c in mine)
    text = rig("fleet", "status", "--central", operator, cwd=tmp_path).stdout
    assert "cannot survive its process" in text
    # the station's own kind wins over the campaign file's: real drives are not warned about
    assert process_bound(effective_kind("", DEMO.read_text()))
    assert not process_bound(effective_kind("relay-board", DEMO.read_text()))


def test_one_stations_ended_campaign_shows_its_duration_not_a_rate(demo_store: Path) -> None:
    view = StoreView([str(demo_store)])
    overview = view.overview()
    (campaign,) = overview.campaigns
    assert campaign.state == "done" and campaign.duration_s is not None
    assert campaign.duration_s > 0 and campaign.per_hour == 0 and campaign.eta_s is None
    line = overview_text(overview).splitlines()[-1]
    assert "took " in line and "/h" not in line
