"""A station of sixteen drives on four relay boards (fixtures/board_station.py: four firmware
host builds behind ptys, sixteen in-process virtual drives powered by their boards' pins),
through `rig run`'s own path (rig/campaign/runner.py: store, run log, progress, notices) and
the production relay-board wiring of several boards (rig/power/relay/boardset.py). One board's
process is killed by its PID mid-campaign: only its four channels stop, each with the board
named, as rig ERRORs and never drive failures; the twelve others finish; every cut edge a pin
made was reported by its board; no channel of a living board is left off."""

from __future__ import annotations

import io
import json
import sqlite3
import threading
from pathlib import Path

import pytest

from fixtures.board_station import HOST_BINARY, BoardStation, drive_toml
from rig.campaign import runner
from rig.campaign.progress import Progress
from rig.config import campaign_file
from rig.power.base import Edge
from tests.notify_receivers import json_endpoint

BOARDS = ("a", "b", "c", "d")
KILLED = "c"
CYCLES = 10
KILL_AFTER_CUTS = 16  # off edges at the killed board's pins before its process is killed

pytestmark = pytest.mark.skipif(not HOST_BINARY.exists(), reason="firmware host build missing")


def _campaign_text(
    rig: BoardStation, port: int, boards: tuple[str, ...] = BOARDS, cycles: int = CYCLES
) -> str:
    drives = "".join(
        drive_toml(board, ch, f"B{board.upper()}{ch}") for board in boards for ch in range(4)
    )
    return f"""
[campaign]
name = "sixteen"
cycles = {cycles}
seed = 5
region_mib = 1
{rig.station_toml()}
[workload]
workers = 1
write_blocks = [1, 4]
flush_every = 4
[cut]
delay_ms = [1, 8]
off_ms = 10
# the twin's drive follows its pin through the board's log pipe and a thread: on a loaded
# host the drive may take a write that late after the edge (a hold-up the twin really has)
hold_up_ms = 200
sample_blocks = 8
[stop]
max_consecutive_errors = 1000  # only a board's loss stops a channel here
[notify]
urls = ["json://127.0.0.1:{port}/"]
events = ["channel_stopped"]
{drives}"""


def test_a_killed_board_stops_only_its_own_channels(tmp_path: Path) -> None:
    rig = BoardStation(BOARDS)
    edges: list[Edge] = []
    killed = threading.Event()
    victim = rig.boards[KILLED]

    def kill_mid_campaign() -> None:
        cuts = threading.Semaphore(0)
        victim_pins = victim.on_pin

        def count(pin: object) -> None:
            if victim_pins is not None:
                victim_pins(pin)  # type: ignore[arg-type]
            if not getattr(pin, "on", True):
                cuts.release()

        victim.on_pin = count
        for _ in range(KILL_AFTER_CUTS):
            if not cuts.acquire(timeout=90):
                return
        victim.kill()  # by its PID
        killed.set()

    def factory(campaign, on_edge, db):  # type: ignore[no-untyped-def]
        def record(edge: Edge) -> None:
            edges.append(edge)
            on_edge(edge)

        station = rig.station(campaign, record)
        threading.Thread(target=kill_mid_campaign, daemon=True).start()
        return station

    out = io.StringIO()
    try:
        with json_endpoint() as (posts, port):
            campaign = campaign_file.parse(_campaign_text(rig, port))
            result = runner.run(
                factory,
                campaign=campaign,
                db=str(tmp_path / "sixteen.sqlite"),
                log_path=str(tmp_path / "sixteen.log.jsonl"),
                progress=Progress(out, live=False),
            )
        for board in rig.boards.values():
            board.close()  # the living boards write out every pin change they logged
        assert killed.is_set(), "the board was not killed mid-campaign"
        by_channel = {s.channel: s for s in result.summaries}
        lost = {d.channel for d in campaign.drives if d.board == KILLED}
        for spec in campaign.drives:
            summary = by_channel[spec.channel]
            if spec.channel in lost:
                assert "relay board c lost" in summary.stopped_by, summary
                assert summary.cycles < CYCLES and not summary.failures, summary
            else:  # the twelve others finish, untouched by the loss
                assert summary.stopped_by == "" and summary.cycles == CYCLES, summary
                assert not summary.failures, summary
        _check_edges(rig, campaign, edges, lost)
        _check_records(tmp_path, lost, posts, out.getvalue())
    finally:
        rig.close()


def _check_edges(rig: BoardStation, campaign: object, edges: list[Edge], lost: set[int]) -> None:
    """No lost edge: on every living board each off edge its pins made was reported, in the
    station channel of its drive; each channel ends powered."""
    for spec in campaign.drives:  # type: ignore[attr-defined]
        if spec.channel in lost:
            continue
        pins = rig.boards[spec.board].pins_of(spec.board_channel)
        offs = [p for p in pins if not p.on]
        reported = [e for e in edges if e.channel == spec.channel and not e.powered]
        assert len(offs) == len(reported) >= CYCLES, (spec.wiring(), len(offs), len(reported))
        assert pins[-1].on, f"{spec.wiring()} left off"


def _check_records(tmp_path: Path, lost: set[int], posts: list[dict], shown: str) -> None:  # type: ignore[type-arg]
    """The stop in the store, the run log, the progress and a channel_stopped notice each."""
    db = sqlite3.connect(f"file:{tmp_path / 'sixteen.sqlite'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute("SELECT id, channel, status FROM drive").fetchall()
        stopped = {r["channel"] for r in rows if r["status"] == "stopped"}
        assert stopped == lost, [tuple(r) for r in rows]
        cycles = db.execute(
            "SELECT d.channel, c.status, c.error, c.failures FROM cycle c"
            " JOIN drive d ON d.id = c.drive_id"
        ).fetchall()
        last_error = {r["channel"]: r["error"] for r in cycles if r["status"] == "error"}
        for channel in lost:
            assert "relay board c lost" in last_error[channel], last_error
        assert all(r["failures"] == 0 for r in cycles if r["status"] == "error")
        # each board's cut was made ready before its first write (its SYNC then), and sent
        # by the writer thread the moment it stamped that write
        scheduled = db.execute(
            "SELECT d.channel, e.detail FROM event e JOIN cycle c ON c.id = e.cycle_id"
            " JOIN drive d ON d.id = c.drive_id WHERE e.kind = 'cut_scheduled'"
            " AND c.status != 'error'"
        ).fetchall()
        assert scheduled and all(
            json.loads(r["detail"]).get("armed_in") == "prepared" for r in scheduled
        ), [tuple(r) for r in scheduled[:4]]
    finally:
        db.close()
    log = [json.loads(line) for line in (tmp_path / "sixteen.log.jsonl").read_text().splitlines()]
    said = [e["text"] for e in log if e.get("kind") == "message" and ": stopped: " in e["text"]]
    assert sorted(int(t[2:].split(":")[0]) for t in said) == sorted(lost), said
    titles = [p.get("title", "") for p in posts]
    assert sum("stopped" in t for t in titles) == len(lost), titles
    lines = [t for t in shown.splitlines() if ": stopped: " in t and "relay board c lost" in t]
    assert sorted(int(t[2:].split(":")[0]) for t in lines) == sorted(lost), shown


@pytest.mark.parametrize(
    ("fault", "why"),
    [("reset", "relay board b restarted"), ("pause", "relay board b silent")],
)
def test_a_restarted_or_silent_board_stops_only_its_own_channels(
    tmp_path: Path, fault: str, why: str
) -> None:
    """A board that resets mid-campaign (its BOOT seen) was not in the host's control for a
    while; one that stops answering (its process stopped) past the link's stall budget is
    lost: either way its channels stop, named; the other board's finish."""
    rig = BoardStation(("a", "b"))
    struck = threading.Event()
    victim = rig.boards["b"]

    def factory(campaign, on_edge, db):  # type: ignore[no-untyped-def]
        station = rig.station(campaign, on_edge)
        follow = victim.on_pin
        offs = [0]

        def count(pin):  # type: ignore[no-untyped-def]
            if follow is not None:
                follow(pin)
            offs[0] += not pin.on
            if offs[0] == 8 and not struck.is_set():
                struck.set()
                victim.reset() if fault == "reset" else victim.pause()

        victim.on_pin = count
        return station

    try:
        with json_endpoint() as (_posts, port):
            campaign = campaign_file.parse(_campaign_text(rig, port, ("a", "b"), 8))
            result = runner.run(
                factory,
                campaign=campaign,
                db=str(tmp_path / "fault.sqlite"),
                log_path=str(tmp_path / "fault.log.jsonl"),
                progress=Progress(io.StringIO(), live=False),
            )
        assert struck.is_set()
        for spec in campaign.drives:
            summary = next(s for s in result.summaries if s.channel == spec.channel)
            if spec.board == "b":
                assert why in summary.stopped_by, summary
                assert summary.cycles < 8 and not summary.failures, summary
            else:
                assert summary.stopped_by == "" and summary.cycles == 8, summary
    finally:
        rig.close()
