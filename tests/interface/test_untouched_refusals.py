"""Every refusal that opens a store leaves every byte of every file as it was (and adds no file):
`rig run --db` on a store of a newer schema or on a store that already holds a campaign, a
refused `rig run --resume`, `rig status`, `rig report` and `rig serve` on what is not a store,
`rig demo --out` on a folder holding an earlier demo. Compared as the folder's files' bytes."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rig.store import SCHEMA_VERSION, Store
from tests.campaign.test_sim_campaign import campaign_text
from tests.cli_runner import rig

CYCLES = 3


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2 with one line on stderr naming `words`."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a campaign file and the store of one short in-process campaign run by it."""
    where = tmp_path_factory.mktemp("recorded")
    (where / "camp.toml").write_text(campaign_text(["plp", "torn"], CYCLES))
    done = rig("run", "camp.toml", "--db", "s.sqlite", "--quiet", cwd=where)
    assert done.returncode == 1, done.stderr  # the torn drive fails
    return where


def copy_of(recorded: Path, tmp_path: Path) -> Path:
    for name, data in files(recorded).items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


def test_a_second_campaign_on_a_store_is_refused_and_the_store_untouched(
    recorded: Path, tmp_path: Path
) -> None:
    where = copy_of(recorded, tmp_path)
    before = files(where)
    again = rig("run", "camp.toml", "--db", "s.sqlite", "--quiet", cwd=where)
    refused(again, "s.sqlite", "already holds campaign 't'", "--resume")
    assert files(where) == before
    # the store still holds one campaign: the report does not pool two runs as one drive
    db = sqlite3.connect(where / "s.sqlite")
    assert db.execute("SELECT COUNT(*) FROM campaign").fetchone()[0] == 1


def test_a_store_of_a_newer_schema_is_refused_naming_it_and_left_byte_for_byte(
    tmp_path: Path,
) -> None:
    Store(str(tmp_path / "future.sqlite")).close()
    db = sqlite3.connect(tmp_path / "future.sqlite")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    (tmp_path / "camp.toml").write_text(campaign_text(["plp"], CYCLES))
    before = files(tmp_path)
    result = rig("run", "camp.toml", "--db", "future.sqlite", "--quiet", cwd=tmp_path)
    refused(result, "future.sqlite", "newer")
    assert files(tmp_path) == before  # no WAL switch, no change counter, no log left
    for command in (("status", "future.sqlite"), ("report", "future.sqlite", "--out", "r")):
        refused(rig(*command, cwd=tmp_path), "future.sqlite")
        assert files(tmp_path) == before


def test_a_refused_resume_leaves_the_store_byte_for_byte(recorded: Path, tmp_path: Path) -> None:
    where = copy_of(recorded, tmp_path)
    before = files(where)
    result = rig("run", "--resume", "s.sqlite", "--quiet", cwd=where)
    refused(result, "s.sqlite", "simulated")
    assert files(where) == before


@pytest.mark.parametrize(
    "content",
    [b"", b"not a database at all" * 50, b"sqlite"],
    ids=["empty", "garbage", "other-db"],
)
def test_readers_refuse_what_is_not_a_store_and_leave_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.sqlite"
    if content == b"sqlite":  # another program's database
        other = sqlite3.connect(path)
        other.execute("CREATE TABLE t (a)")
        other.commit()
        other.close()
    else:
        path.write_bytes(content)
    before = files(tmp_path)
    for command in (
        ("status", "x.sqlite"),
        ("report", "x.sqlite", "--out", "r"),
        ("serve", "--db", "x.sqlite", "--port", "9"),
        ("run", "--resume", "x.sqlite"),
    ):
        result = rig(*command, cwd=tmp_path)
        refused(result, "x.sqlite")
        assert files(tmp_path) == before, command
        assert not (tmp_path / "r").exists()


def test_report_with_bad_options_touches_no_store(recorded: Path, tmp_path: Path) -> None:
    where = copy_of(recorded, tmp_path)
    before = files(where)
    refused(rig("report", "s.sqlite", "--confidence", "2", cwd=where), "--confidence")
    refused(rig("report", "s.sqlite", "--cut-rows", cwd=where), "--cut-rows")
    assert files(where) == before


def test_demo_out_on_a_folder_with_an_earlier_demo_is_refused_and_kept(tmp_path: Path) -> None:
    out = tmp_path / "d"
    first = rig("demo", "--in-process", "--cycles", "2", "--quiet", "--out", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = files(out)
    again = rig("demo", "--in-process", "--cycles", "2", "--quiet", "--out", str(out), cwd=tmp_path)
    refused(again, str(out), "earlier demo")
    assert files(out) == before


def test_an_interrupted_simulated_campaign_offers_no_resume_and_leaves_no_intent_log(
    tmp_path: Path,
) -> None:
    """Its drives die with the rig: no `--resume` hint (that command refuses), no `.intent-N`."""
    (tmp_path / "camp.toml").write_text(campaign_text(["plp", "plp", "plp"], 100_000))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rig.interface.cli",
            "run",
            "camp.toml",
            "--db",
            "s.sqlite",
            "--quiet",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("s.sqlite.intent-*")):  # the drives are mid-campaign
        assert time.monotonic() < deadline and proc.poll() is None, "no cycle started"
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, out
    assert "stopped by SIGINT" in out and "cannot be resumed" in out
    assert "--resume" not in out
    assert not list(tmp_path.glob("s.sqlite.intent-*"))
