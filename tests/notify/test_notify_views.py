"""Notifications that never fail quietly, against real receivers on loopback
(tests/notify_receivers.py): each URL is sent on its own (a receiver down or hanging delays no
other), what is not delivered reaches the operator's terminal, `rig status` and the dashboard,
and the campaign-end mail keeps its lines and names the station and the store. Campaigns run on
the in-process virtual drives through the production runner."""

from __future__ import annotations

import io
import socket
from pathlib import Path

from fixtures import sim_station
from rig.campaign import runner
from rig.campaign.progress import Progress
from rig.config import campaign_file
from rig.interface.fleet.dashboard import create_app
from rig.interface.fleet.views import StoreView
from tests.campaign.test_sim_campaign import campaign_text
from tests.cli_runner import rig
from tests.notify.test_notify import notify_table
from tests.notify_receivers import hanging_receiver, smtp_server

CYCLES = 12
DOWN = "json://127.0.0.1:9/"  # nothing listens on the discard port: connection refused


def run(tmp_path: Path, text: str, terminal: io.StringIO | None = None) -> runner.RunResult:
    return runner.run(
        lambda c, on_edge, db: sim_station.build(c)[0],
        campaign=campaign_file.parse(text),
        db=str(tmp_path / "n.sqlite"),
        progress=Progress(terminal or io.StringIO(), live=False),
    )


def mail_url(port: int, extra: str = "") -> str:
    return f"mailto://127.0.0.1:{port}/ops@lab.example?from=rig@lab.example{extra}"


def test_a_receiver_that_hangs_or_is_down_delays_no_other_url(tmp_path: Path) -> None:
    """The hanging and the refusing URL come first: the mail after them still gets every notice
    (one sender thread sent to each URL in turn, and the first held back the rest)."""
    # 30 cuts: beside 2 busy loops 12 cuts once held no flushed write for the lying drive to
    # lose, so it never failed and there was no FAIL notice to deliver
    text = campaign_text(["lying-flush", "plp"], 30, flush_every=2)
    with hanging_receiver() as hang, smtp_server() as (mailbox, port):
        urls = (f"json://127.0.0.1:{hang.port}/", DOWN, mail_url(port))
        run(tmp_path, text + notify_table(*urls, extra='events = ["fail", "campaign_end"]'))
        subjects = mailbox.subjects()
        assert hang.accepted  # the hanging receiver was reached and held its sender
    assert any("FAIL on ch0" in s for s in subjects), subjects
    assert any("campaign done" in s for s in subjects), subjects


def test_what_is_not_delivered_reaches_the_terminal_status_and_dashboard(tmp_path: Path) -> None:
    terminal = io.StringIO()
    # 12 cuts: the lying drive must lose a flushed write for `rig status` to fail, and with the
    # cut at its stated instant 4 short cycles sometimes held no flushed write to lose
    text = campaign_text(["lying-flush"], 12, flush_every=2)
    result = run(tmp_path, text + notify_table(DOWN, extra='events = ["campaign_end"]'), terminal)
    said = [line for line in terminal.getvalue().splitlines() if line.startswith("rig: notify:")]
    assert said and all("127.0.0.1" in line for line in said), terminal.getvalue()[-2000:]
    status = rig("status", result.db, cwd=tmp_path)
    assert status.returncode == 1, status.stderr  # the lying drive fails
    assert "notifications not delivered:" in status.stdout, status.stdout
    page = create_app(StoreView([result.db])).test_client().get("/fragment/overview")
    assert "notifications not delivered:" in page.get_data(as_text=True)


def test_the_end_mail_keeps_its_lines_and_names_the_station_and_store(tmp_path: Path) -> None:
    text = campaign_text(["lying-flush", "plp"], 4, flush_every=2)
    events = 'events = ["campaign_end"]'
    with smtp_server() as (mailbox, port):
        urls = (mail_url(port), mail_url(port, "&format=html"))
        result = run(tmp_path, text + notify_table(*urls, extra=events))
        messages = list(mailbox.messages)
    assert len(messages) == 2, [m["Subject"] for m in messages]
    store = str(Path(result.db).resolve())
    for message in messages:
        plain = message.get_body(("plain",))
        assert plain is not None
        lines = plain.get_content().splitlines()
        assert any(line.startswith("ch0 SIM lying-flush") for line in lines), lines
        assert any(line.startswith("ch1 SIM plp") for line in lines), lines
        assert f"station: {socket.gethostname()}" in lines and f"store: {store}" in lines
    html = next(m for m in messages if m.get_body(("html",)) is not None).get_body(("html",))
    assert html is not None
    content = html.get_content()
    assert content.count("<br") >= 3 and "ch1&nbsp;SIM&nbsp;plp" in content, content
