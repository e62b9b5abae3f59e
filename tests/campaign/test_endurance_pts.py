"""The PTS test flow of an endurance campaign: its keys, the purge choice through fake tools,
and preconditioning then rounds through the production campaign code on the in-process
simulated rig."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from fixtures import sim_station
from rig.campaign.observer import CampaignEvents, Lines, Observer, ResumeReconciliation
from rig.campaign.parallel import run_campaign
from rig.config import campaign_file
from rig.drive.identity import DriveIdentity
from rig.drive.node import DriveNode
from rig.errors import UserError
from rig.health.errors import ToolMissing
from rig.health.tools import ToolResult
from rig.station import purge
from rig.station.build import ToolDrives
from rig.store import Store
from tests.campaign.test_sim_campaign import campaign_text

PTS = """
[endurance]
intervals = 6
interval_s = 0.2
verify_every = 0
precondition = true
steady_window = 3
max_rounds = 4
"""


def _with(extra: str) -> str:
    return campaign_text(["plp"], cycles=1).replace("[cut]", extra + "[cut]")


def test_pts_keys_are_checked() -> None:
    spec = campaign_file.parse(_with(PTS)).endurance
    assert spec is not None and spec.precondition and spec.max_rounds == 4
    assert spec.purge == "none" and not spec.stop_at_steady
    with pytest.raises(UserError, match=r"\[endurance\]\.purge must be one of"):
        campaign_file.parse(_with("[endurance]\nintervals = 1\npurge = 'wipe'\n"))
    with pytest.raises(UserError, match="in-process virtual drives cannot"):
        campaign_file.parse(_with("[endurance]\nintervals = 1\npurge = 'auto'\n"))
    with pytest.raises(UserError, match="max_rounds = 3 is shorter than steady_window = 5"):
        campaign_file.parse(_with("[endurance]\nintervals = 1\nmax_rounds = 3\n"))
    with pytest.raises(UserError, match=r"\[endurance\]\.precondition has the wrong type"):
        campaign_file.parse(_with("[endurance]\nintervals = 1\nprecondition = 1\n"))


class FakeTools:
    """Canned answers per tool name; records what ran."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers = answers
        self.ran: list[list[str]] = []

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> ToolResult:
        self.ran.append(list(argv))
        key = " ".join(argv[:2])
        if key not in self.answers and argv[0] not in self.answers:
            raise ToolMissing(f"{argv[0]}: not found on PATH", tuple(argv))
        code, out = self.answers.get(key, self.answers.get(argv[0], (0, "")))
        return ToolResult(tuple(argv), code, out, "" if code == 0 else "refused")


def test_nvme_purge_prefers_sanitize_then_format() -> None:
    tools = FakeTools({"nvme id-ctrl": (0, json.dumps({"oacs": 0x17, "sanicap": 0x2}))})
    caps = purge.probe("/dev/nvme0n1", "nvme", tools, discard_max_bytes=0)
    assert caps.nvme_sanitize and caps.nvme_format
    assert purge.choose("auto", caps) == "nvme_sanitize"
    only_format = FakeTools({"nvme id-ctrl": (0, json.dumps({"oacs": 0x2, "sanicap": 0}))})
    caps = purge.probe("/dev/nvme0n1", "nvme", only_format, discard_max_bytes=0)
    assert purge.choose("auto", caps) == "nvme_format"
    with pytest.raises(purge.PurgeRefused, match=r"nvme_sanitize refused.*does not support"):
        purge.choose("nvme_sanitize", caps)


def test_frozen_ata_falls_back_to_discard_or_is_refused_with_the_reason() -> None:
    frozen = {"ata_security": {"enabled": False, "frozen": True}}
    tools = FakeTools({"smartctl -g": (0, json.dumps(frozen))})
    caps = purge.probe("/dev/sdb", "ata", tools, discard_max_bytes=1 << 30)
    assert caps.ata_security and caps.ata_frozen
    assert purge.choose("auto", caps) == "discard"
    with pytest.raises(purge.PurgeRefused, match="frozen"):
        purge.choose("ata_secure_erase", caps)
    no_trim = purge.probe("/dev/sdb", "ata", tools, discard_max_bytes=0)
    with pytest.raises(purge.PurgeRefused, match=r"frozen.*takes no discard"):
        purge.choose("auto", no_trim)
    thawed = FakeTools({"smartctl -g": (0, json.dumps({"ata_security": {"frozen": False}}))})
    caps = purge.probe("/dev/sdb", "ata", thawed, discard_max_bytes=0)
    assert purge.choose("auto", caps) == "ata_secure_erase"


def _ata(security: dict[str, object] | None) -> purge.Capabilities:
    answer = {"smartctl": {"version": [7, 3]}} | ({"ata_security": security} if security else {})
    tools = FakeTools({"smartctl -g": (0, json.dumps(answer))})
    return purge.probe("/dev/sdb", "ata", tools, discard_max_bytes=0)


def test_ata_security_is_read_from_the_identify_word_smartctl_reports() -> None:
    """smartctl's `ata_security.state` is IDENTIFY word 128; these are the states real drives
    report (with smartctl's own strings)."""
    sec1 = _ata({"state": 33, "string": "Disabled, NOT FROZEN [SEC1]", "enabled": False,
                 "frozen": False})  # fmt: skip
    assert purge.choose("auto", sec1) == "ata_secure_erase"
    sec2 = _ata({"state": 41, "string": "Disabled, frozen [SEC2]", "enabled": False,
                 "frozen": True})  # fmt: skip
    with pytest.raises(purge.PurgeRefused, match="frozen"):
        purge.choose("ata_secure_erase", sec2)
    # a password someone else set: the erase needs it; refused, not attempted
    sec5 = _ata({"state": 35, "string": "ENABLED, PW level HIGH, not locked, not frozen [SEC5]",
                 "enabled": True, "frozen": False})  # fmt: skip
    with pytest.raises(purge.PurgeRefused, match="password is already set"):
        purge.choose("ata_secure_erase", sec5)
    with pytest.raises(purge.PurgeRefused, match="password is already set"):
        purge.choose("auto", sec5)
    sec4 = _ata({"state": 39, "string": "ENABLED, PW level HIGH, **LOCKED** [SEC4]",
                 "enabled": True})  # fmt: skip
    assert not sec4.ata_frozen and sec4.ata_password_set
    # the feature set is not there: smartctl prints "Unavailable" (state without bit 0), or
    # nothing at all
    for unavailable in ({"state": 0, "string": "Unavailable"}, None):
        caps = _ata(unavailable)
        assert not caps.ata_security
        with pytest.raises(purge.PurgeRefused, match="supports no sanitize"):
            purge.choose("auto", caps)


def test_scsi_sanitize_from_opcodes_and_a_tool_that_is_missing() -> None:
    caps = purge.probe("/dev/sdc", "scsi", FakeTools({"sg_opcodes": (0, "ok")}), 0)
    assert purge.choose("auto", caps) == "scsi_sanitize"
    unsupported = purge.probe("/dev/sdc", "scsi", FakeTools({"sg_opcodes": (5, "")}), 0)
    assert not unsupported.scsi_sanitize
    missing = purge.probe("/dev/sdc", "scsi", FakeTools({}), 0)
    with pytest.raises(purge.PurgeRefused, match="no purge applies to this scsi device"):
        purge.choose("auto", missing)


def test_purge_runs_the_tools_and_reports_a_failure() -> None:
    tools = FakeTools({"hdparm": (0, "")})
    purge.run("ata_secure_erase", "/dev/sdb", tools)
    assert [argv[3] for argv in tools.ran] == ["--security-set-pass", "--security-erase"]
    assert all(argv[-1] == "/dev/sdb" for argv in tools.ran)
    failing = FakeTools({"sg_sanitize": (1, "")})
    with pytest.raises(Exception, match=r"purge scsi_sanitize: sg_sanitize --block failed"):
        purge.run("scsi_sanitize", "/dev/sdc", failing)


def test_preconditioning_then_rounds_on_the_simulated_rig(tmp_path: Path) -> None:
    campaign = campaign_file.parse(_with(PTS))
    station, _ = sim_station.build(campaign)
    store = Store(str(tmp_path / "p.sqlite"))
    run_campaign(campaign, station, store, Observer())
    rows = store.query("SELECT * FROM endurance_interval ORDER BY seq")
    kinds = [r["kind"] for r in rows]
    assert kinds == ["precondition"] * 2 + ["write"] * 6
    region = campaign.region_bytes
    pre = rows[:2]
    # each pass writes the region once in 128 KiB writes (the last ones may run past its end)
    assert all(r["bytes_written"] >= region for r in pre)
    assert rows[1]["host_bytes_total"] >= 2 * region
    assert rows[1]["fill_fraction"] == pytest.approx(1.0)
    assert [r["interval_no"] for r in rows] == [None, None, 1, 2, 3, 4, 5, 6]
    rounds = [json.loads(r["detail"])["pts"] for r in rows[2:]]
    assert [p["round"] for p in rounds] == [1, 2, 3, 4, 5, 6]
    verdicts = [p["verdict"] for p in rounds]
    # never steady before a full window of rounds after preconditioning
    assert verdicts[:2] == ["filling", "filling"]
    assert not any(r["steady"] for r in rows[:4])
    final = verdicts[3]
    assert final in ("reached", "not reached")
    assert all(v == final for v in verdicts[3:])  # reached or not reached is final at max_rounds
    assert all(r["steady"] == (v == "reached") for r, v in zip(rows[2:], verdicts, strict=True))
    events = store.query(
        "SELECT kind, detail FROM event WHERE kind IN ('precondition', 'steady_state')"
    )
    assert [e["kind"] for e in events] == ["precondition", "steady_state"]
    store.close()


def test_a_real_station_purges_as_the_drive_says() -> None:
    """ToolDrives.purge (the station capability): the NVMe node's id-ctrl answer picks sanitize
    and the tool runs on that node; a node of no known transport without discard is refused."""
    tools = FakeTools(
        {
            "nvme id-ctrl": (0, json.dumps({"oacs": 0x2, "sanicap": 0x2})),
            "nvme sanitize": (0, ""),
            "nvme sanitize-log": (0, json.dumps({"sstat": 1})),
        }
    )
    node = DriveNode(DriveIdentity("M", "S", ""), "/dev/nvme9n1", 1 << 30)
    assert ToolDrives(tools).purge(node, "auto") == "nvme_sanitize"
    assert tools.ran[-2] == ["nvme", "sanitize", "/dev/nvme9n1", "--sanact=2"]
    assert tools.ran[-1][:2] == ["nvme", "sanitize-log"]
    other = DriveNode(DriveIdentity("M", "S", ""), "/dev/rig-no-such-node", 1 << 30)
    with pytest.raises(purge.PurgeRefused, match="no purge applies to this other device"):
        ToolDrives(FakeTools({})).purge(other, "auto")


class SanitizeLog(FakeTools):
    """nvme sanitize starts; the sanitize log says in progress, then the given end state."""

    def __init__(self, states: list[int]) -> None:
        super().__init__({"nvme sanitize": (0, "")})
        self.states = states

    def run(self, argv: Sequence[str], timeout_s: float | None = None) -> ToolResult:
        if list(argv[:2]) == ["nvme", "sanitize-log"]:
            self.ran.append(list(argv))
            return ToolResult(tuple(argv), 0, json.dumps({"sstat": self.states.pop(0)}), "")
        return super().run(argv, timeout_s)


def test_nvme_sanitize_waits_for_the_sanitize_log() -> None:
    tools = SanitizeLog([2, 2, 0x101])  # in progress twice, then completed (with other bits)
    naps: list[float] = []
    purge.run("nvme_sanitize", "/dev/nvme0n1", tools, sleep=naps.append)
    assert naps == [purge.SANITIZE_POLL_S] * 2
    assert [a[1] for a in tools.ran] == ["sanitize", "sanitize-log", "sanitize-log", "sanitize-log"]
    naps.clear()
    with pytest.raises(Exception, match="reports the sanitize failed"):
        purge.wait_sanitized("/dev/nvme0n1", SanitizeLog([2, 3]), sleep=naps.append)
    assert naps == [purge.SANITIZE_POLL_S]
    with pytest.raises(Exception, match="not done within 0 s"):
        purge.wait_sanitized("/dev/nvme0n1", SanitizeLog([2]), timeout_s=0, sleep=naps.append)
    with pytest.raises(Exception, match="the sanitize log cannot be read"):
        purge.wait_sanitized("/dev/nvme0n1", FakeTools({}), sleep=naps.append)


def test_a_resume_before_the_first_round_finishes_preconditioning_first(tmp_path: Path) -> None:
    """Stopped after the first preconditioning pass (as a kill during the second leaves the
    store: a pass cut short by a kill records nothing), a resumed run does the second pass
    before its first round: no round, hence no steady state, on a drive preconditioned once."""
    from rig.campaign import resume

    campaign = campaign_file.parse(_with(PTS))
    station, _ = sim_station.build(campaign)  # its drives live on in this process
    store = Store(str(tmp_path / "p.sqlite"))
    stop = threading.Event()

    def progress(line: str) -> None:
        if "preconditioning pass 1/" in line:
            stop.set()

    run_campaign(campaign, station, store, Lines(progress), stop)
    first = store.query("SELECT kind, detail FROM endurance_interval ORDER BY seq")
    assert [r["kind"] for r in first] == ["precondition"]
    resumable = resume.load(store)

    quiet = Observer()  # as `rig run --resume` does: each region read back as the drives start
    run_campaign(
        resumable.campaign,
        station,
        store,
        CampaignEvents(ResumeReconciliation(resumable, store, quiet)),
        campaign_id=resumable.campaign_id,
        resume=resumable.points,
    )
    rows = store.query("SELECT * FROM endurance_interval ORDER BY seq")
    assert [r["kind"] for r in rows] == ["precondition"] * 2 + ["write"] * 6
    passes = [json.loads(r["detail"]) for r in rows[:2]]
    assert [(p["pass"], p["complete"]) for p in passes] == [(1, True), (2, True)]
    assert rows[1]["host_bytes_total"] >= 2 * campaign.region_bytes
    assert [json.loads(r["detail"])["pts"]["round"] for r in rows[2:]] == [1, 2, 3, 4, 5, 6]
    events = store.query("SELECT kind FROM event WHERE kind = 'precondition'")
    assert len(events) == 1  # preconditioning done: once, after its second pass
    store.close()
