"""`rig status` exits 1 when a drive failed; `--json` on `rig status`, `rig drives` and
`rig fleet status` prints documents of a versioned schema (docs/json.md, docs/json/); `rig
--version`; shell completion through argcomplete. The production `rig` runs in a child process
(tests/cli_runner.py) or as the installed console script; outputs are validated with jsonschema
against the published schema files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from reports.load import summary
from rig.interface import cli_json
from rig.interface import station_check as check_cli
from rig.interface.fleet.views import StoreView
from rig.notify import failures
from rig.power.relay.wire import FIRMWARE_VERSION, PROTOCOL_VERSION
from rig.store import Store
from rig.verdict import stats
from tests.cli_runner import rig
from tests.json_schemas import documented_fields, schema_fields, validate
from tests.loopdev import attached, loop_available
from tests.reports.storebuilder import DriveSpec, build

SCHEMAS = (
    cli_json.STATUS_SCHEMA,
    cli_json.DRIVES_SCHEMA,
    cli_json.FLEET_STATUS_SCHEMA,
    check_cli.SCHEMA,
)
CONFIG = '[campaign]\nname = "qual"\n[criteria]\nmax_failure_probability = 0.05\n'
CRITERIA = json.dumps({"max_failure_probability": 0.05, "confidence": 0.95, "min_cycles": 0})


def _status(db: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    done = rig("status", str(db), *extra, cwd=db.parent)
    return done, json.loads(done.stdout) if "--json" in extra and done.stdout else None


def test_status_exits_1_when_a_drive_fails_and_its_json_says_why(tmp_path: Path) -> None:
    db = build(
        tmp_path / "failing.sqlite",
        [
            DriveSpec("Enough", "E1", ["ok"] * 59, channel=0),
            DriveSpec("Short", "S1", ["ok"] * 10, channel=1),
            DriveSpec("Lost", "L1", ["ok"] * 20 + ["lost_durable_write"], channel=2),
        ],
        config=CONFIG,
        criteria_column=CRITERIA,
    )
    text, _ = _status(db)
    assert text.returncode == 1, text.stderr
    assert "FAIL" in text.stdout
    done, doc = _status(db, "--json")
    assert done.returncode == 1, done.stderr
    assert doc is not None
    validate(doc)
    assert doc["schema"] == "rig.status/1" and doc["failing"] is True
    store = Store(str(db))
    try:
        expected = {d.serial: d.verdict for d in summary.load(store).drives}
    finally:
        store.close()
    assert {d["serial"]: d["verdict"] for d in doc["drives"]} == expected
    assert set(expected.values()) == {"PASS", "NOT YET DEMONSTRATED", "FAIL"}
    lost = next(d for d in doc["drives"] if d["serial"] == "L1")
    assert lost["failures"] == {"lost_durable_write": 1} and lost["cuts_with_failure"] == 1
    assert lost["cycles"] == 21 and lost["criteria"]["max_failure_probability"] == 0.05


def test_status_exits_0_without_a_failure_and_1_for_a_dead_drive(tmp_path: Path) -> None:
    db = build(tmp_path / "clean.sqlite", [DriveSpec("Fine", "F1", ["ok"] * 12)], config=CONFIG)
    done, doc = _status(db, "--json")
    assert done.returncode == 0, done.stderr
    assert doc is not None
    validate(doc)
    assert doc["failing"] is False and doc["drives"][0]["verdict"] == "NOT YET DEMONSTRATED"
    assert doc["undelivered_notices"] == {"counts": {}, "last": []}
    store = Store(str(db))
    try:
        store.set_drive_status(int(store.all_drives()[0]["id"]), "dead")
    finally:
        store.close()
    done, doc = _status(db, "--json")
    assert done.returncode == 1 and doc is not None and doc["drives"][0]["verdict"] == "DEAD"


def test_status_states_the_upper_bound_per_exposed_class_without_scipy(tmp_path: Path) -> None:
    """Beside exposed and failing cuts, each class's one-sided Clopper-Pearson bound per exposed
    cut, the report's figure (rig.verdict.stats, scipy) computed without scipy, in text and JSON."""
    db = build(
        tmp_path / "exposed.sqlite",
        [DriveSpec("Lost", "L1", ["ok"] * 20 + ["lost_durable_write"])],
        config=CONFIG,
        criteria_column=CRITERIA,
    )
    store = Store(str(db))
    try:
        drive = int(store.all_drives()[0]["id"])
        with store.transaction() as tx:
            for cls, exposed, failing in (("lost_durable_write", 17, 1), ("shorn_write", 21, 0)):
                tx.execute(
                    "INSERT INTO exposure_total VALUES (?, ?, ?, ?)", (drive, cls, exposed, failing)
                )
    finally:
        store.close()
    done, doc = _status(db, "--json")
    assert doc is not None, done.stderr
    validate(doc)
    exposure = doc["drives"][0]["exposure"]
    for cls, (exposed, failing) in {"lost_durable_write": (17, 1), "shorn_write": (21, 0)}.items():
        bound = stats.clopper_pearson_upper(failing, exposed, 0.95)
        assert exposure[cls]["exposed"] == exposed and exposure[cls]["failing"] == failing
        assert exposure[cls]["upper_bound"] == pytest.approx(bound, rel=1e-9)
    text, _ = _status(db)
    line = f"lost_durable_write 16/17 (<= {100 * stats.clopper_pearson_upper(1, 17, 0.95):.3g} %)"
    assert "exposed cuts (passing/exposed, 95 % upper bound)" in text.stdout
    assert line in text.stdout and "shorn_write 21/21 (<= 13.3 %)" in text.stdout


SECRET_URL = "json://bob:hunter2@hooks.example:8443/T0KEN/x?key=s3cr3t"


def test_status_json_lists_undelivered_notices_without_the_urls_secrets(tmp_path: Path) -> None:
    """Notices not delivered, written by the runner's own `Told` (rig/notify/failures.py):
    counts per kind and the newest five, each with its URL's scheme and host only, its time
    and reason; a retried try is no failure. Neither the JSON nor the text shows the URL's
    user, password, path or query, even where the service's error quotes the URL."""
    db = build(tmp_path / "n.sqlite", [DriveSpec("Fine", "F1", ["ok"] * 3)], config=CONFIG)
    store = Store(str(db))
    before = time.time()
    try:
        told = failures.Told(lambda *a, **k: None, lambda line: None, store)
        failed = {"event": "fail", "url": SECRET_URL, "attempt": 3, "retry": False}
        for _ in range(6):
            told.write("notify_failed", **failed, error=f"refused: {SECRET_URL} said 401")
        told.write("notify_failed", **{**failed, "retry": True}, error="retried")
        told.write("notify_dropped", event="fail", title="FAIL", url=SECRET_URL, queue=100)
        told.write("notify_gave_up", url=SECRET_URL, sending="campaign_end", pending=["fail"])
    finally:
        store.close()
    done, doc = _status(db, "--json")
    assert done.returncode == 0 and doc is not None, done.stderr
    validate(doc)
    notices = doc["undelivered_notices"]
    assert notices["counts"] == {"notify_dropped": 1, "notify_failed": 6, "notify_gave_up": 1}
    last = notices["last"]
    assert [n["kind"] for n in last] == ["notify_gave_up", "notify_dropped"] + ["notify_failed"] * 3
    assert {(n["scheme"], n["host"]) for n in last} == {("json", "hooks.example:8443")}
    assert all(before - 0.001 <= n["at"] <= time.time() for n in last)  # rounded to ms
    assert last[0]["notice"] == "campaign_end" and "2 notice(s) not delivered" in last[0]["reason"]
    assert last[2] == {
        **last[2],
        "notice": "fail",
        "reason": "refused: json://hooks.example:8443 said 401",
    }
    text, _ = _status(db)
    assert "notifications not delivered: 6 notify_failed" in text.stdout, text.stdout
    for secret in ("bob", "hunter2", "T0KEN", "s3cr3t"):
        assert secret not in done.stdout and secret not in text.stdout


def test_status_bad_input_is_exit_2_with_one_line_and_no_document(tmp_path: Path) -> None:
    for extra in ((), ("--json",)):
        done = rig("status", str(tmp_path / "missing.sqlite"), *extra, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_help_documents_the_exit_statuses() -> None:
    top = rig("--help", cwd=Path.cwd()).stdout
    for line in ("1    a drive FAILed or is DEAD", "2    bad input", "3    a fault of the rig"):
        assert line in top, top
    status = " ".join(rig("status", "--help", cwd=Path.cwd()).stdout.split())
    assert "1 when any drive FAILed or is DEAD" in status and "--json" in status


def test_a_one_station_overview_validates_as_fleet_status(tmp_path: Path) -> None:
    """The fleet document of a one-station overview (the dashboard's StoreView): the same
    builder `rig fleet status --json` uses (tests/fleet/test_fleet_status_json.py runs that
    against PostgreSQL)."""
    db = build(
        tmp_path / "s.sqlite",
        [DriveSpec("A", "A1", ["ok", "shorn_write"], channel=0), DriveSpec("B", "B1", ["ok"])],
        config=CONFIG,
    )
    doc = json.loads(cli_json.dumps(cli_json.fleet_status(StoreView([str(db)]).overview())))
    validate(doc)
    (campaign,) = doc["campaigns"]
    assert campaign["cycles"] == 3 and campaign["findings"] == {"shorn_write": 1}
    assert {d["serial"] for d in campaign["drives"]} == {"A1", "B1"}


@pytest.mark.parametrize("name", SCHEMAS)
def test_docs_describe_exactly_the_schema_fields(name: str) -> None:
    assert documented_fields(name) == schema_fields(name)


@pytest.mark.skipif(bool(loop_available()), reason=loop_available() or "ok")
def test_drives_json_lists_identity_and_refusals(tmp_path: Path) -> None:
    clean, used = tmp_path / "clean.img", tmp_path / "used.img"
    for image in (clean, used):
        with image.open("wb") as handle:
            handle.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(used)], check=True, capture_output=True)
    with attached(clean) as clean_node, attached(used, direct_io=False) as used_node:
        done = rig("drives", "--json", cwd=tmp_path)
        both = rig("drives", "--json", "--stanza", clean_node, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    validate(doc)
    by_node = {d["node"]: d for d in doc["drives"]}
    assert by_node[clean_node]["serial"] == str(clean)
    assert by_node[clean_node]["size_bytes"] == 16 << 20
    assert by_node[clean_node]["safe"] is True and by_node[clean_node]["refusals"] == []
    assert by_node[used_node]["safe"] is False
    assert "holds a ext4 signature" in by_node[used_node]["refusals"]
    for drive in doc["drives"]:
        assert drive["safe"] == (drive["refusals"] == [])
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1


def test_version_names_the_package_and_the_board_protocol(tmp_path: Path) -> None:
    done = rig("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"rig {metadata.version('powerfault-rig')} ")
    assert f"protocol v{PROTOCOL_VERSION}" in done.stdout and FIRMWARE_VERSION in done.stdout


def _complete(line: str, tmp_path: Path) -> set[str]:
    """What the installed `rig` script answers a completing shell for `line` (argcomplete's
    protocol: _ARGCOMPLETE, COMP_LINE, COMP_POINT; the answer in a file instead of fd 8)."""
    answer = tmp_path / "completions"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    script = Path(sys.executable).parent / "rig"
    done = subprocess.run(
        [str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return {word.strip() for word in answer.read_text().split("\n") if word.strip()}


def test_completion_through_argcomplete(tmp_path: Path) -> None:
    usage = re.search(r"\{([a-z,-]+)\}", rig("--help", cwd=tmp_path).stdout)
    assert usage is not None
    assert _complete("rig ", tmp_path) >= set(usage.group(1).split(","))
    assert _complete("rig st", tmp_path) == {"station", "status"}
    assert _complete("rig fleet st", tmp_path) == {"status", "stop"}
    assert _complete("rig status --j", tmp_path) == {"--json"}
    # global completion (activate-global-python-argcomplete) finds the marker in
    # rig/interface/cli.py
    script = Path(sys.executable).parent / "rig"
    check = subprocess.run(
        [sys.executable, "-m", "argcomplete._check_console_script", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr


def test_completion_in_bash_as_the_readme_registers_it() -> None:
    """`eval "$(register-python-argcomplete rig)"`, then bash's completion function itself."""
    venv_bin = Path(sys.executable).parent
    script = (
        'eval "$(register-python-argcomplete rig)"\n'
        'COMP_LINE="rig fleet st"; COMP_POINT=${#COMP_LINE}\n'
        "COMP_WORDS=(rig fleet st); COMP_CWORD=2\n"
        "_python_argcomplete rig st fleet\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == {"status", "stop"}


def test_station_check_json_validates_against_its_published_schema(tmp_path: Path) -> None:
    """On the in-process twin (no board, no rail: both null); the relay board's document with
    board and rail is validated in tests/station/test_station_check_loop.py."""
    from tests.campaign.test_sim_campaign import campaign_text

    (tmp_path / "c.toml").write_text(campaign_text(["plp", "torn"], 1))
    done = rig("station", "check", "c.toml", "--json", cwd=tmp_path)
    # 1: another program's disk left the bus during a cut, as other tests' loop devices do
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["board"] is None and [c["channel"] for c in doc["channels"]] == [0, 1]
