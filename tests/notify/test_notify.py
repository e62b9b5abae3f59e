"""Notifications ([notify], rig/notify/) against real receivers on loopback: mail through a local
SMTP server, JSON posts to a local HTTP endpoint, and a receiver that hangs, which must change no
cut. Campaigns run on the in-process virtual drives through the production runner."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fixtures import sim_station
from rig.campaign import notices as campaign_notices
from rig.campaign import runner
from rig.campaign.model import CycleRecord
from rig.campaign.notices import CampaignNotices
from rig.campaign.progress import Progress
from rig.check import verify
from rig.config import campaign as campaign_spec
from rig.config import campaign_file
from rig.config.campaign import Campaign
from rig.interface.fleet.station_watch import StationWatch
from rig.interface.fleet.views import StationStatus
from rig.notify.sender import Notice, Notifier, Service, apprise_services
from rig.store import Store
from rig.verdict import rule as verdicts
from tests.campaign.test_sim_campaign import campaign_text
from tests.cli_runner import rig
from tests.notify_receivers import hanging_receiver, json_endpoint, smtp_server

CYCLES = 12


def notify_table(*urls: str, extra: str = "") -> str:
    return f"[notify]\nurls = {json.dumps(list(urls))}\n{extra}"


def run(tmp_path: Path, name: str, campaign: Campaign) -> runner.RunResult:
    return runner.run(
        lambda c, on_edge, db: sim_station.build(c)[0],
        campaign=campaign,
        db=str(tmp_path / f"{name}.sqlite"),
        progress=Progress(io.StringIO(), live=False),
    )


def log_lines(result: runner.RunResult, kind: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in Path(result.log).read_text().splitlines()]
    return [line for line in lines if line["kind"] == kind]


def cycles(db: str) -> list[tuple[Any, ...]]:
    store = Store(db, read_only=True)
    try:
        rows = store.query(
            "SELECT d.channel, c.seq, c.cut_delay_ns, c.status, c.ended_at FROM cycle c"
            " JOIN drive d ON d.id = c.drive_id ORDER BY d.channel, c.seq"
        )
        return [tuple(r) for r in rows]
    finally:
        store.close()


def test_a_bad_url_is_one_line_and_exit_2_before_any_write(tmp_path: Path) -> None:
    text = campaign_text(["plp"], 2) + notify_table("json://127.0.0.1:9/", "nosuchservice://x")
    (tmp_path / "c.toml").write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    done = rig("run", "c.toml", "--db", "c.sqlite", "--quiet", cwd=tmp_path, timeout_s=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "[notify].urls[1]" in done.stderr and "nosuchservice://" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(campaign_spec.UserError, match="not an event"):
        campaign_file.parse(campaign_text(["plp"], 2) + notify_table(extra='events = ["fial"]'))


def test_fail_and_campaign_end_reach_a_mail_server_and_a_json_endpoint(tmp_path: Path) -> None:
    with smtp_server() as (mailbox, smtp_port), json_endpoint() as (posts, http_port):
        mail = f"mailto://127.0.0.1:{smtp_port}/ops@lab.example?from=rig@lab.example"
        events = 'events = ["fail", "campaign_end", "verdict"]'
        text = campaign_text(["plp", "lying-flush"], CYCLES, flush_every=2) + notify_table(
            mail, f"json://127.0.0.1:{http_port}/", extra=events
        )
        result = run(tmp_path, "n", campaign_file.parse(text))
    summaries = {s.channel: s for s in result.summaries}
    assert not summaries[0].failures and summaries[1].failures  # the lying drive fails
    subjects = mailbox.subjects()
    assert sum("FAIL on ch1 SIM lying-flush" in s for s in subjects) == 1
    assert not any("FAIL on ch0" in s for s in subjects)
    assert sum("campaign done" in s for s in subjects) == 1
    fail_body = mailbox.body("FAIL on ch1")
    assert "first cut with failures" in fail_body
    assert any(cls in fail_body for cls in summaries[1].failures)
    end_body = mailbox.body("campaign done")
    assert "ch1 SIM lying-flush s/n SN0001: FAIL" in end_body
    assert f"{summaries[0].cycles} cycles" in end_body
    verdicts = [s for s in subjects if "verdicts:" in s]
    assert verdicts == ["rig t: verdicts: FAIL SIM lying-flush s/n SN0001"]  # ch0: not yet passed
    # the same notices as JSON posts (Apprise's json:// body: title, message, type)
    assert sorted(p["title"] for p in posts) == sorted(subjects)
    end_post = next(p for p in posts if "campaign done" in p["title"])
    assert end_post["type"] == "failure" and "FAIL" in end_post["message"]
    sent = log_lines(result, "notify_sent")
    assert len(sent) == 2 * len(subjects) and not log_lines(result, "notify_failed")
    assert all("127.0.0.1" in line["url"] for line in sent)
    assert {line["thread"] for line in sent} == {"notify-sender-0", "notify-sender-1"}


def test_a_receiver_that_hangs_changes_no_cut(tmp_path: Path) -> None:
    text = campaign_text(["lying-flush", "plp"], CYCLES, flush_every=2)
    quiet = run(tmp_path, "quiet", campaign_file.parse(text))
    with hanging_receiver() as hang:
        url = f"json://127.0.0.1:{hang.port}/"
        loud = run(tmp_path, "loud", campaign_file.parse(text + notify_table(url)))
        still_hanging = hang.answered == 0
    assert still_hanging and hang.accepted  # the sender reached it and got no answer
    # every cut as without notifications: the same cycles, cut delays and outcome
    before, after = cycles(quiet.db), cycles(loud.db)
    assert [r[:3] for r in after] == [r[:3] for r in before]
    assert all(r[3] == "ok" for r in after)
    assert [s.cycles for s in loud.summaries] == [CYCLES, CYCLES]
    # cuts went on while the first send hung: cycles ended after the receiver took it
    assert any(r[4] > hang.accepted[0] for r in after)
    assert not log_lines(loud, "notify_sent")
    # no cycle's thread ever waited on the receiver: a try that ended (timed out) during the
    # run was the sender thread's, and at the end the sender was still inside its send
    tries = log_lines(loud, "notify_failed")
    assert all(line["thread"] == "notify-sender-0" for line in tries)
    gave_up = log_lines(loud, "notify_gave_up")
    assert len(gave_up) == 1 and gave_up[0]["sending"] is not None


def test_a_full_queue_drops_the_oldest_and_says_so() -> None:
    """While a send hangs, notices beyond the queue's capacity drop the oldest waiting one,
    each drop logged; the sender goes on with the newest once the receiver answers."""
    entered, release = threading.Event(), threading.Event()
    got: list[str] = []

    def slow(notice: Notice) -> tuple[bool, str]:
        entered.set()
        release.wait(30)
        got.append(notice.title)
        return True, ""

    logged: list[tuple[str, dict[str, Any]]] = []
    notifier = Notifier(
        [Service(slow, "slow://")], lambda kind, **f: logged.append((kind, f)), capacity=2
    )
    notifier.notify_event("fail", "first", "")
    assert entered.wait(30)  # the sender holds "first"; the queue is empty
    for title in ("second", "third", "fourth", "fifth"):
        notifier.notify_event("fail", title, "")
    dropped = [f["title"] for kind, f in logged if kind == "notify_dropped"]
    assert dropped == ["second", "third"]
    release.set()
    notifier.close()
    assert got == ["first", "fourth", "fifth"]
    assert [kind for kind, _ in logged].count("notify_sent") == 3


def test_station_offline_is_told_once_per_fall(tmp_path: Path) -> None:
    """The fleet's station watch (rig/interface/fleet/station_watch.py) through the notifier's API
    `notify_event(kind, title, body)` to a real JSON endpoint."""
    with json_endpoint() as (posts, port):
        notifier = Notifier(apprise_services([f"json://127.0.0.1:{port}/"]), lambda k, **f: None)
        watch = StationWatch(notifier.notify_event)
        online, silent = StationStatus("alpha", 4, 2.0, "a"), StationStatus("alpha", 4, 95.0, "a")
        never = StationStatus("beta", 2, None, "")
        assert watch.look([online, never]) == []
        assert watch.look([silent, never]) == ["alpha"]
        assert watch.look([silent, never]) == []  # still silent: told once
        assert watch.look([online, never]) == []
        assert watch.look([silent, never]) == ["alpha"]  # fell again
        notifier.close()
    assert [p["title"] for p in posts] == ["rig: station alpha offline"] * 2
    assert "95 s" in posts[0]["message"]


class Told:
    """A notifier's API (`notify_event`) that keeps what it is told."""

    def __init__(self) -> None:
        self.notices: list[tuple[str, str]] = []

    def notify_event(self, kind: str, title: str, body: str, level: str = "info") -> None:
        self.notices.append((kind, title))


def test_each_event_is_told_once_when_it_happens() -> None:
    """The event rules of rig/campaign/notices.py on cycles as the runner hands them over: a run
    of rig errors once per run, the first failing cut only, a channel stop, a dead drive; an
    `events` list keeps only its events."""
    text = campaign_text(["plp", "lying-flush"], 2) + notify_table(
        "json://127.0.0.1:9/", extra="rig_error_run = 2"
    )
    campaign = campaign_file.parse(text)
    told = Told()
    notices = CampaignNotices(campaign, told)  # type: ignore[arg-type]
    # what the notices read of a drive's run: its spec, and its sequential plan (none here)
    ch0 = SimpleNamespace(spec=campaign.drives[0], settlement=None, plan_key="")
    ch1 = SimpleNamespace(spec=campaign.drives[1], settlement=None, plan_key="")

    def cycle(seq: int, status: str = "ok", classes: tuple[str, ...] = (), stop: bool = False):
        c = CycleRecord(seq, 0.01, status=status, error=f"{status} {seq}", stop_channel=stop)
        c.findings = [verify.drive_finding(cls, {}) for cls in classes]
        return c

    for seq, status in enumerate(["error", "error", "error", "ok", "error", "error"], 1):
        notices.cycle_recorded(ch0, cycle(seq, status))
    notices.cycle_recorded(ch1, cycle(1, classes=(verify.LOST_DURABLE, verify.LOST_DURABLE)))
    notices.cycle_recorded(ch1, cycle(2, classes=(verify.LOST_DURABLE,)))
    notices.cycle_recorded(ch0, cycle(7, "error", stop=True))
    notices.cycle_recorded(ch1, cycle(3, "dead", classes=(verify.DEAD,)))
    assert told.notices == [
        ("rig_errors", "rig t: 2 rig errors in a row on ch0"),
        ("rig_errors", "rig t: 2 rig errors in a row on ch0"),
        ("fail", "rig t: FAIL on ch1 SIM lying-flush s/n SN0001"),
        ("channel_stopped", "rig t: ch0 stopped"),
        ("dead", "rig t: dead drive on ch1"),
    ]
    only_dead = campaign_file.parse(text + '\nevents = ["dead"]')
    told = Told()
    notices = CampaignNotices(only_dead, told)  # type: ignore[arg-type]
    notices.cycle_recorded(ch1, cycle(1, classes=(verify.LOST_DURABLE,)))
    notices.cycle_recorded(ch1, cycle(2, "dead", classes=(verify.DEAD,)))
    assert [kind for kind, _ in told.notices] == ["dead"]


def test_urls_from_an_apprise_config_file_stay_out_of_the_store(tmp_path: Path) -> None:
    """`[notify] config`: the receivers (and their secrets) in Apprise's own configuration
    file, read when the campaign starts; the store keeps only the campaign file's text."""
    with json_endpoint() as (posts, port):
        secret = f"json://rig:s3cret@127.0.0.1:{port}/"
        apprise_yml = tmp_path / "apprise.yml"
        apprise_yml.write_text(f"urls:\n  - {secret}\n")
        text = campaign_text(["plp"], 2) + (
            f'[notify]\nconfig = "{apprise_yml}"\nevents = ["campaign_end"]\n'
        )
        result = run(tmp_path, "cfg", campaign_file.parse(text))
    assert [p["title"] for p in posts] == ["rig t: campaign done"]
    store = Store(result.db, read_only=True)
    try:
        kept = store.query("SELECT config FROM campaign")[0][0]
    finally:
        store.close()
    assert str(apprise_yml) in kept and "s3cret" not in kept
    sent = log_lines(result, "notify_sent")
    assert len(sent) == 1 and "s3cret" not in sent[0]["url"]  # Apprise masks it in the log
    missing = campaign_text(["plp"], 2) + f'[notify]\nconfig = "{tmp_path / "none.yml"}"\n'
    with pytest.raises(
        campaign_spec.UserError, match=r"\[notify\].config: .*none.yml: no notification"
    ):
        campaign_file.parse(missing)


def test_serve_notify_needs_the_fleet_and_a_good_url(tmp_path: Path) -> None:
    """`rig serve --notify` watches stations, so it needs --central; a URL Apprise cannot use
    is refused before the server starts (one line, exit 2)."""
    no_fleet = rig("serve", "--db", "x.sqlite", "--notify", "json://127.0.0.1:9/", cwd=tmp_path)
    assert no_fleet.returncode == 2 and "needs --central" in no_fleet.stderr
    bad = rig("serve", "--central", "host=/nonexistent", "--notify", "nosuch://x", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--notify #1" in bad.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_sequential_plan_that_settles_is_told_when_it_settles(tmp_path: Path) -> None:
    plan = (
        '[criteria.sequential]\np0 = 0.001\np1 = 0.05\nmax_cuts = 400\n[stop]\nwhen = "settled"\n'
    )
    with json_endpoint() as (posts, http_port):
        text = campaign_text(["plp", "lying-flush"], 40, extra=plan, flush_every=2)
        text += notify_table(f"json://127.0.0.1:{http_port}/", extra='events = ["verdict"]')
        result = run(tmp_path, "s", campaign_file.parse(text))
    told = [p for p in posts if "plan over" in p["title"]]
    # the lying drive's plan FAILs within a few cuts and is told once, with the cuts it used;
    # the PLP drive's plan needs more cuts than 40 to PASS at p1 = 0.05: not told
    assert [p["title"] for p in told] == ["rig t: FAIL: plan over SIM lying-flush"], posts
    assert "Sequential plan settled after" in told[0]["message"]
    # ... naming the rule that decided it and the exposed cuts per class
    assert "zero tolerance: lost_durable_write" in told[0]["message"]
    assert "lost_durable_write 1/1" in told[0]["message"]
    stopped = {s.channel: s.stopped_by for s in result.summaries}
    assert "plan settled: FAIL" in stopped[1]


def test_the_notices_settle_on_the_verdicts_the_report_settles_on() -> None:
    """The notices call the verdict rule (rig/verdict/rule.py) directly: a verdict
    they count as settled is one the rule settles a drive with."""
    settled = {verdicts.PASS, verdicts.FAIL, verdicts.DEAD}
    assert set(campaign_notices.SETTLED_VERDICTS) == settled
    assert verdicts.NOT_YET not in settled
