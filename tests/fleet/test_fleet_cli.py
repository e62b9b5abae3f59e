"""`rig fleet` refusals: one line on stderr, exit 2, nothing written (production CLI in a child
process against a real PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures import pgcluster
from fixtures.pgcluster import Cluster
from rig.interface.fleet.central import CentralStore
from tests.cli_runner import rig

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.toml"


def _one_line_refusal(done: object, *words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)  # type: ignore[attr-defined]
    lines = done.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("rig: error:"), lines
    for word in words:
        assert word in lines[0], lines[0]


def test_refusals_are_one_line_and_write_nothing(pg: Cluster, tmp_path: Path) -> None:
    with CentralStore(pg.dsn("rig_station_alpha")) as alpha:  # the demo's drives are alpha's
        alpha.publish_inventory(
            "alpha",
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
    with CentralStore(pg.dsn()) as admin:
        before = len(admin.submissions())
    # a reader may look but not submit
    reader = pg.dsn("viewer", "pw-viewer", "127.0.0.1")
    _one_line_refusal(
        rig("fleet", "submit", str(DEMO), "--central", reader, cwd=tmp_path), "central database"
    )
    # drives no station holds
    unknown = tmp_path / "unknown.toml"
    unknown.write_text(DEMO.read_text().replace("SIMPLP0001", "NOSUCH").replace("a0000001", "ff"))
    operator = pg.dsn("operator", "pw-operator", "127.0.0.1")
    _one_line_refusal(
        rig("fleet", "submit", str(unknown), "--central", operator, cwd=tmp_path),
        "no station holds",
    )
    # a malformed campaign file, and no database named at all
    bad = tmp_path / "bad.toml"
    bad.write_text("[campaign\nname=")
    _one_line_refusal(rig("fleet", "submit", str(bad), "--central", operator, cwd=tmp_path))
    done = rig("fleet", "status", cwd=tmp_path)
    _one_line_refusal(done, "--central")
    # a server out of reach
    _one_line_refusal(
        rig("fleet", "status", "--central", "host=/nonexistent dbname=rig", cwd=tmp_path)
    )
    with CentralStore(pg.dsn()) as admin:
        assert len(admin.submissions()) == before


@pytest.mark.slow
def test_fleet_demo_runs_its_campaigns_to_the_end(tmp_path: Path) -> None:
    """`rig fleet demo` (the README's fleet on one machine): PostgreSQL, three stations, the
    dashboard, a campaign on each; with --until-done it stops when they have ended."""
    if pgcluster.requirements():
        pytest.skip(pgcluster.requirements())
    port = str(pgcluster.free_port())
    done = rig(
        "fleet",
        "demo",
        "--out",
        str(tmp_path),
        "--cycles",
        "8",
        "--port",
        port,
        "--until-done",
        cwd=tmp_path,
        timeout_s=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("submission ") == 3 and f"127.0.0.1:{port}" in done.stdout
    for station in ("alpha", "beta", "gamma"):
        state = (tmp_path / station / "campaigns" / "sub-1").exists() or any(
            (tmp_path / station / "campaigns").glob("sub-*/state.json")
        )
        assert state, station
        stores = list((tmp_path / station / "campaigns").glob("sub-*/store.sqlite"))
        assert len(stores) == 1
