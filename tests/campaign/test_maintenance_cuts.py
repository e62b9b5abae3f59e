"""Cuts during maintenance ([cut.maintenance], rig/campaign/cutcycle/maintenance.py): a format,
a sanitize or a firmware commit cut on in-process virtual drives through the production
campaign code, scored against the fault core's ground truth (fixtures/statefaults.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fixtures import statefaults
from rig.check import failures
from rig.store import Store
from tests.cli_runner import rig
from tests.interface.test_cli_refusals import assert_one_line_refusal
from tests.scoring import campaign_text, run

# the profiles' operations take 200 ms of powered time: a cut 5..150 ms after one is issued
# falls while it runs
TABLE = '[cut.maintenance]\noperation = "{op}"\nafter_ms = [{low}, {high}]\n{extra}'


def maintenance_campaign(
    profiles: list[str],
    cycles: int,
    op: str,
    low: float = 5,
    high: float = 150,
    extra: str = "",
    return_timeout_s: float = 30.0,
) -> str:
    text = campaign_text(profiles, cycles).replace(
        "[cut]\n", f"[cut]\nreturn_timeout_s = {return_timeout_s}\n"
    )
    head, drives = text.split("[[drive]]", 1)
    table = TABLE.format(op=op, low=low, high=high, extra=extra)
    return head + table + "[[drive]]" + drives


def _findings(store: Store, cls: str) -> dict[int, set[int]]:
    rows = store.query(
        "SELECT c.seq, f.lba_first, f.lba_count FROM finding f JOIN cycle c ON c.id = f.cycle_id"
        " WHERE f.class = ?",
        (cls,),
    )
    found: dict[int, set[int]] = {}
    for r in rows:
        found.setdefault(r["seq"], set()).update(
            range(r["lba_first"], r["lba_first"] + r["lba_count"])
        )
    return found


def _events(store: Store, kind: str) -> list[dict[str, Any]]:
    rows = store.query("SELECT detail FROM event WHERE kind = ? ORDER BY id", (kind,))
    return [json.loads(r["detail"]) for r in rows]


@pytest.mark.parametrize("op", ["sanitize_block", "sanitize_crypto", "format"])
def test_a_forgotten_erase_is_found_block_by_block(tmp_path: Path, op: str) -> None:
    """Every block the drive left holding its old data (truth `erase_survived`) is a
    survived_erase finding of that cycle, and nothing else fails."""
    summaries, drives, store = run(
        tmp_path / "s.sqlite", maintenance_campaign(["sanitize-forgets"], 4, op)
    )
    assert not summaries[0].errors
    truth: dict[int, set[int]] = {}
    for e in drives[0].core.truth:
        if e.kind == statefaults.ERASE_SURVIVED:
            truth.setdefault(e.cut, set()).add(e.lba)
    # (a cut a loaded host made late can fall after the operation completed: that cycle's
    # drive kept nothing old, and nothing is found there either)
    assert len(truth) >= 2 and all(truth.values())
    assert _findings(store, failures.SURVIVED_ERASE) == truth
    others = store.query(
        "SELECT class FROM finding WHERE failure = 1 AND class != ?", (failures.SURVIVED_ERASE,)
    )
    assert not others
    assert {d["state"] for d in _events(store, "maintenance")} == {"completed"}


@pytest.mark.parametrize("op", ["sanitize_block", "sanitize_overwrite", "format"])
def test_an_interrupted_erase_resumes_and_nothing_is_invented(tmp_path: Path, op: str) -> None:
    summaries, drives, store = run(
        tmp_path / "s.sqlite", maintenance_campaign(["maintainable"], 4, op)
    )
    assert not summaries[0].errors and not summaries[0].dead
    assert not store.query("SELECT class FROM finding WHERE failure = 1")
    done = _events(store, "maintenance")
    assert len(done) == 4 and all(d["resumed"] and d["state"] == "completed" for d in done)
    cuts = [e for e in drives[0].core.truth if e.kind == statefaults.MAINTENANCE_CUT]
    assert len(cuts) == 4
    assert not drives[0].core.read(0, 512).any()  # erased at the end


FIRMWARE = 'firmware_file = "/lib/firmware/RSIM0200.bin"\nfirmware_revision = "RSIM0200"\n'


def test_a_bricking_firmware_commit_is_a_dead_device(tmp_path: Path) -> None:
    # a bricked drive never comes back: 3 s of waiting say so as surely as the default 30
    text = maintenance_campaign(["fw-brick"], 3, "firmware", extra=FIRMWARE, return_timeout_s=3)
    summaries, drives, store = run(tmp_path / "s.sqlite", text)
    assert summaries[0].dead
    assert [e.kind for e in drives[0].core.truth if e.kind == statefaults.FIRMWARE_BRICKED]
    dead = store.query(
        "SELECT c.seq FROM finding f JOIN cycle c ON c.id = f.cycle_id WHERE class = ?",
        (failures.DEAD,),
    )
    assert [r["seq"] for r in dead] == [1]  # its first cut


@pytest.mark.parametrize(
    ("low", "high", "revision"), [(5, 150, "RSIM0100"), (260, 300, "RSIM0200")]
)
def test_firmware_cut_short_or_done_runs_a_valid_image_and_keeps_its_data(
    tmp_path: Path, low: float, high: float, revision: str
) -> None:
    """Cut during the commit: the old image; cut after it completed: the new one; either way
    the data durable before is all there (the ordinary check, of the whole region)."""
    text = maintenance_campaign(["maintainable"], 3, "firmware", low, high, FIRMWARE)
    summaries, drives, store = run(tmp_path / "s.sqlite", text)
    assert not summaries[0].errors and not summaries[0].dead
    assert not store.query("SELECT class FROM finding WHERE failure = 1")
    assert _events(store, "maintenance")[0]["revision"] == revision
    assert drives[0].core.revision == revision  # (the image running at the end)
    assert store.query("SELECT COUNT(*) AS n FROM cycle WHERE full_scan = 1")[0]["n"] == 3


@pytest.mark.parametrize(
    "profile, op, extra, words",
    [
        ("honest", "sanitize_block", "", ("does not support sanitize_block",)),
        ("fw-brick", "sanitize_crypto", "", ("does not support sanitize_crypto",)),
        ("maintainable", "firmware", "", ("needs firmware_file and firmware_revision",)),
        ("maintainable", "defrag", "", ("operation must be one of",)),
    ],
)
def test_maintenance_the_drive_cannot_do_is_refused_before_any_write(
    tmp_path: Path, profile: str, op: str, extra: str, words: tuple[str, ...]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(maintenance_campaign([profile], 2, op, extra=extra))
    assert_one_line_refusal(rig("run", str(path), cwd=tmp_path), *words)
    assert not list(tmp_path.glob("*.sqlite"))


def test_an_erase_beyond_the_test_region_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    text = maintenance_campaign(["maintainable"], 2, "format").replace(
        "region_mib = 2", "region_kib = 1024"
    )
    path.write_text(text)
    assert_one_line_refusal(rig("run", str(path), cwd=tmp_path), "erases its whole namespace")
    assert not list(tmp_path.glob("*.sqlite"))
