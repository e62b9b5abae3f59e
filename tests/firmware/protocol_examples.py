"""Reads the executable examples of firmware/PROTOCOL.md (section 5) and runs them."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from tests.firmware.board_client import FIRMWARE, Client, unframe

PROTOCOL_MD = FIRMWARE / "PROTOCOL.md"


@dataclass(frozen=True)
class Example:
    line_no: int  # of the opening fence, for messages
    steps: tuple[str, ...]


def load_examples() -> list[Example]:
    examples: list[Example] = []
    lines = PROTOCOL_MD.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```example":
            start = i + 1
            end = lines.index("```", start)
            steps = tuple(line for line in lines[start:end] if line.strip())
            examples.append(Example(start, steps))
            i = end
        i += 1
    return examples


def pattern(expected: str) -> re.Pattern[str]:
    """`{name}` matches one field value; everything else is literal."""
    parts = re.split(r"\{[a-z_]+\}", expected)
    return re.compile(r"\S+".join(re.escape(part) for part in parts))


def raw_bytes(text: str) -> bytes:
    return re.sub(rb"\\x([0-9a-fA-F]{2})", lambda m: bytes([int(m[1], 16)]), text.encode())


def run(example: Example, board: Client) -> None:
    for step in example.steps:
        where = f"PROTOCOL.md:{example.line_no} step {step!r}"
        if step.startswith(">> "):
            board.send_raw(raw_bytes(step[3:]) + b"\n")
        elif step.startswith("> "):
            board.send(step[2:])
        elif step.startswith("< "):
            got = unframe(board.read_raw_line(timeout=3.0))
            assert pattern(step[2:]).fullmatch(got), f"{where}: got {got!r}"
        elif step.startswith("~ "):
            time.sleep(int(step[2:]) / 1000)
        else:
            raise AssertionError(f"{where}: unknown step")
    leftover = board.drain(quiet=0.2)
    assert not leftover, f"PROTOCOL.md:{example.line_no}: unexpected lines {leftover}"
