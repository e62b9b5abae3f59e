"""Every example in firmware/PROTOCOL.md runs against the host build and the AVR image."""

from __future__ import annotations

import pytest

from tests.firmware.board_client import Client
from tests.firmware.protocol_examples import Example, load_examples, run

EXAMPLES = load_examples()


def test_protocol_md_has_examples() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"line{e.line_no}" for e in EXAMPLES])
def test_example(example: Example, client: Client) -> None:
    run(example, client)
