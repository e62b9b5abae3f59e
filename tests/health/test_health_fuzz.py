"""The health parsers are total: any text in, a typed result or ToolOutputError out.

The property runs over mutations of every real capture in fixtures/real-data/smartctl and every
recorded output of the other tools (fixtures/recorded): truncations, deleted or inserted slices,
flipped characters, and values replaced by hostile JSON (4,301-digit and 129-bit integers,
negative numbers, Unicode digits, "9e999999", 4,000 hex digits, nesting deeper than Python's
recursion limit, wrong types). It asserts:
- nothing but ToolOutputError escapes, and never one raised by the parsers' last line of
  defence (`unexpected`): every shape is handled where it is read;
- a snapshot keeps its invariants: value and source None together, every integer within its
  field (non-negative where the field is), fields the store can write as JSON, and a delta
  against the unmutated capture that computes without raising.

CI runs a fixed seed and budget (FUZZ_CI_CASES); the long run is
`.venv/bin/pytest -m slow -s tests/health/test_health_fuzz.py` (RIG_FUZZ_CASES, default 100,000).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from health_mutations import mutated, real_smartctl_files, recorded_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rig.health.delta import diff_snapshots
from rig.health.errors import ToolOutputError
from rig.health.nvme import parse_nvme_id_ctrl, parse_nvme_smart_log, snapshot_from_nvme
from rig.health.ocp import FIELDS, OcpSmartLog, parse_ocp_smart_add_log
from rig.health.regs import parse_nvme_show_regs
from rig.health.scsi import parse_sg_inq, parse_sg_vpd_di
from rig.health.smart import parse_smartctl_json
from rig.health.snapshot import HealthSnapshot
from rig.health.tracker import snapshot_fields
from rig.health.wcache import parse_hdparm_w, parse_nvme_vwc, parse_sdparm_wce

FUZZ_CI_CASES = 2500
LONG_RUN_CASES = int(os.environ.get("RIG_FUZZ_CASES", "100000"))

SOURCED = (
    ("unsafe_shutdowns", "unsafe_shutdowns_source"),
    ("percentage_used", "percentage_used_source"),
    ("host_bytes_written", "host_bytes_written_source"),
    ("media_errors", "media_errors_source"),
)
BYTE_FIELDS = (
    "percentage_used",
    "critical_warning",
    "available_spare",
    "available_spare_threshold",
)
SIGNED_FIELDS = ("temperature_c",)


@cache
def _sources() -> list[tuple[str, str]]:
    """(parser name, text) of every real and recorded output."""
    found = [("smartctl", p.read_text()) for p in real_smartctl_files()]
    for parser, files in recorded_files().items():
        found.extend(
            ("smartctl" if parser == "smartctl recorded" else parser, p.read_text()) for p in files
        )
    return found


@cache
def _nvme_ctrl() -> Any:
    return parse_nvme_id_ctrl(recorded_files()["nvme id-ctrl"][0].read_text())


TEXT_PARSERS: dict[str, Callable[[str], Any]] = {
    "nvme id-ctrl": parse_nvme_id_ctrl,
    "nvme get-feature": parse_nvme_vwc,
    "nvme ocp": lambda text: check_ocp(parse_ocp_smart_add_log(text)),
    "nvme show-regs": parse_nvme_show_regs,
    "sg_inq": parse_sg_inq,
    "sg_vpd": parse_sg_vpd_di,
    "hdparm": parse_hdparm_w,
    "sdparm": parse_sdparm_wce,
}


def check_ocp(log: OcpSmartLog) -> None:
    """Every C0h field is None or fits its width in the page; the two 128-bit totals too."""
    for name, (_, width, _, _, _) in FIELDS.items():
        value = getattr(log, name)
        assert value is None or (type(value) is int and 0 <= value < 1 << 8 * width), name
    for value in (log.physical_media_units_written, log.physical_media_units_read):
        assert value is None or 0 <= value < 1 << 128


def check_snapshot(snap: HealthSnapshot, reference: HealthSnapshot | None) -> None:
    for value, source in SOURCED:
        assert (getattr(snap, value) is None) == (getattr(snap, source) is None), value
    numbers: dict[str, Any] = {
        **{k: v for k, v in vars(snap).items() if k != "identity"},
        **{f"identity.{k}": v for k, v in vars(snap.identity).items()},
    }
    for name, value in numbers.items():
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if name in SIGNED_FIELDS:
            assert -(1 << 15) <= value < 1 << 15, (name, value)
        else:
            assert 0 <= value < 1 << 160, (name, value)  # bytes = 128-bit count x unit
        if name in BYTE_FIELDS or name == "smartctl_exit":
            assert value <= 255, (name, value)
    json.dumps(snapshot_fields(snap))  # what Store.add_health writes, without its safety net
    if reference is not None:
        diff_snapshots(reference, snap)
        diff_snapshots(snap, reference)


def run_one(parser: str, text: str, reference: HealthSnapshot | None, counts: Counter[str]) -> None:
    counts["cases"] += 1
    try:
        if parser == "smartctl":
            check_snapshot(parse_smartctl_json(text), reference)
        elif parser == "nvme smart-log":
            log = parse_nvme_smart_log(text)
            check_snapshot(snapshot_from_nvme(_nvme_ctrl(), log, text), None)
        else:
            TEXT_PARSERS[parser](text)
    except ToolOutputError as error:
        assert not getattr(error, "unexpected", False), (
            f"{parser}: parser slip caught by the safety net: {error}"
        )
        counts["typed errors"] += 1
        return
    counts["parsed"] += 1


def _reference(parser: str, text: str) -> HealthSnapshot | None:
    if parser != "smartctl":
        return None
    try:
        return parse_smartctl_json(text)
    except ToolOutputError:
        return None  # the recorded failures (open-failed, cmdline-error) have no device


def fuzz(cases: int, derandomize: bool) -> Counter[str]:
    counts: Counter[str] = Counter()
    sources = _sources()

    @settings(
        max_examples=cases,
        derandomize=derandomize,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        parser, text = data.draw(st.sampled_from(sources), label="source")
        structural = text.lstrip().startswith("{")
        changed = data.draw(mutated(text, structural), label="mutated")
        run_one(parser, changed, _reference(parser, text), counts)

    prop()
    return counts


def test_every_real_and_recorded_output_parses_unmutated() -> None:
    counts: Counter[str] = Counter()
    for parser, text in _sources():
        run_one(parser, text, _reference(parser, text), counts)
    # typed errors: smartctl open-failed and cmdline-error, hdparm "not supported"
    assert counts["cases"] >= 140 and counts["typed errors"] == 3


def test_fuzz_fixed_seed_and_budget() -> None:
    """CI: a fixed seed (derandomize) and budget; zero untyped exceptions."""
    start = time.monotonic()
    counts = fuzz(FUZZ_CI_CASES, derandomize=True)
    print(f"fuzz: {dict(counts)} in {time.monotonic() - start:.1f} s")
    assert counts["cases"] >= FUZZ_CI_CASES * 0.9
    assert counts["parsed"] and counts["typed errors"]  # both outcomes were reached


@pytest.mark.slow
def test_fuzz_long_run() -> None:
    """>= 100,000 cases with a fresh random seed: `pytest -m slow -s` prints the counts."""
    start = time.monotonic()
    counts = fuzz(LONG_RUN_CASES, derandomize=False)
    summary = {**counts, "seconds": round(time.monotonic() - start, 1)}
    print(f"fuzz long run: {summary}")
    report = os.environ.get("RIG_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps(summary) + "\n")
    assert counts["cases"] >= LONG_RUN_CASES * 0.9
