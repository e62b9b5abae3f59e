"""The dashboard reads without credentials; submitting and stopping a campaign need its token
(real PostgreSQL, the production Flask app through its WSGI test client)."""

from __future__ import annotations

from pathlib import Path

from fixtures.pgcluster import Cluster
from rig.interface.fleet.central import CentralStore
from rig.interface.fleet.dashboard import create_app
from rig.interface.fleet.views import CentralView

TOKEN = "s3cret-token-of-the-lab-0123"
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.toml"


def test_reading_is_open_and_submit_and_stop_need_the_token(pg: Cluster) -> None:
    with CentralStore(pg.dsn("rig_station_alpha")) as alpha:
        alpha.publish_inventory(
            "alpha",
            [
                {
                    "model": "RIGSIM Enterprise PLP",
                    "serial": "SIMPLP0001",
                    "wwn": "0x5000c500a0000001",
                },
                {
                    "model": "RIGSIM Lying Flush",
                    "serial": "SIMLIE0002",
                    "wwn": "0x5000c500a0000002",
                },
                {
                    "model": "RIGSIM Torn Writer",
                    "serial": "SIMTRN0003",
                    "wwn": "0x5000c500a0000003",
                },
            ],
        )
    view = CentralView(pg.dsn("viewer", "pw-viewer", "127.0.0.1"))
    operator = pg.dsn("operator", "pw-operator", "127.0.0.1")
    try:
        client = create_app(view, dispatch_dsn=operator, token=TOKEN).test_client()
        assert client.get("/").status_code == 200
        assert b"alpha" in client.get("/fragment/overview").data
        campaign = DEMO.read_text()
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-wrong-token"},
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": ""},
        ):
            assert client.post("/api/campaigns", data=campaign, headers=headers).status_code == 401
        assert _submissions(pg) == []
        ok = client.post(
            "/api/campaigns", data=campaign, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert ok.status_code == 201, ok.data
        submission = ok.get_json()["submission"]
        assert ok.get_json()["station"] == "alpha"
        assert _submissions(pg) == [(submission, "queued")]
        # its drives are claimed: a second submission of them is refused
        again = client.post(
            "/api/campaigns", data=campaign, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert again.status_code == 400 and "already claimed" in again.get_json()["error"]
        # stopping needs the token too
        assert client.post(f"/api/campaigns/{submission}/stop").status_code == 401
        assert _submissions(pg) == [(submission, "queued")]
        stopped = client.post(
            f"/api/campaigns/{submission}/stop", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert stopped.status_code == 200, stopped.data
        assert _submissions(pg) == [(submission, "stopped")]  # cancelled in the queue
        # a dashboard without a token refuses every write, even a request that brings one
        closed = create_app(view, dispatch_dsn=operator, token="").test_client()
        assert (
            closed.post(
                "/api/campaigns", data=campaign, headers={"Authorization": "Bearer "}
            ).status_code
            == 401
        )
    finally:
        view.close()


def _submissions(pg: Cluster) -> list[tuple[int, str]]:
    with CentralStore(pg.dsn()) as admin:
        return [(int(r["id"]), r["status"]) for r in admin.submissions()]
