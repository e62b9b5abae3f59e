"""Every example in firmware/PROTOCOL.md runs against the host build and the AVR image in
simavr, each on a freshly booted board, through the production pyserial driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from rig.power.relay import PROTOCOL_VERSION, RelayBoard
from tests.firmware.protocol_examples import PROTOCOL_MD, Example, load_examples, pattern, run
from tests.power.raw_session import raw_session
from tests.power.twins import Twin

EXAMPLES = load_examples()


def test_protocol_md_has_examples_of_the_drivers_version() -> None:
    assert len(EXAMPLES) >= 8
    assert f"\nPROTOCOL_VERSION {PROTOCOL_VERSION}\n" in PROTOCOL_MD.read_text()
    versions = {s.split("proto=")[1].split()[0] for e in EXAMPLES for s in e.steps if "proto=" in s}
    assert versions == {str(PROTOCOL_VERSION)}


def test_the_runner_fails_on_a_wrong_line(twin: Twin, board: RelayBoard, tmp_path: Path) -> None:
    """The harness can fail: a block whose expected reply is wrong does not pass."""
    wrong = tmp_path / "wrong.md"
    wrong.write_text("```example\n> 1 STATE\n< 1 OK t={t} on=0,0,0,0 safe={s} pend={p}\n```\n")
    with raw_session(board) as raw, pytest.raises(AssertionError, match="got '1 OK t="):
        run(load_examples(wrong)[0], raw)
    assert pattern("1 OK t={t} ch=2").fullmatch("1 OK t=17 ch=2")
    assert not pattern("1 OK t={t} ch=2").fullmatch("1 OK t=17 ch=3")


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"line{e.line_no}" for e in EXAMPLES])
def test_example(example: Example, twin: Twin, board: RelayBoard) -> None:
    # The BOOT line, read by the driver as it opened the board: a fresh power-on boot.
    boot = board.last_boot
    assert boot is not None and boot.evseq == 0 and boot.on == (True,) * 4, boot
    assert boot.reset_cause == "power" and boot.mcu_us is not None
    if twin.kind == "simavr":  # the AVR's start-up on its own clock (PROTOCOL.md 2.1)
        assert 50 <= boot.mcu_us <= 1000, boot
    with raw_session(board) as raw:
        run(example, raw)
    # The driver takes over again after the block.
    assert board.states().pending == (0,) * 4
