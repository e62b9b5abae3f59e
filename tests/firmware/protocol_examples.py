"""Reads the executable examples of firmware/PROTOCOL.md (section 5) and runs them through the
production driver standing aside (`tests.power.raw_session`, over `RelayBoard.stand_aside()`)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from tests.power.raw_session import RawSession

PROTOCOL_MD = Path(__file__).resolve().parents[2] / "firmware" / "PROTOCOL.md"


@dataclass(frozen=True)
class Example:
    line_no: int  # of the opening fence, for messages
    steps: tuple[str, ...]


def load_examples(path: Path = PROTOCOL_MD) -> list[Example]:
    examples: list[Example] = []
    lines = path.read_text().splitlines()
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


def run(example: Example, raw: RawSession) -> None:
    for step in example.steps:
        where = f"PROTOCOL.md:{example.line_no} step {step!r}"
        if step.startswith(">> "):
            raw.send_bytes(raw_bytes(step[3:]) + b"\n")
        elif step.startswith("> "):
            raw.send(step[2:])
        elif step.startswith("< "):
            got = raw.read_line(timeout_s=3.0)
            assert pattern(step[2:]).fullmatch(got), f"{where}: got {got!r}"
        elif step.startswith("~ "):
            time.sleep(int(step[2:]) / 1000)
        else:
            raise AssertionError(f"{where}: unknown step")
    leftover = raw.drain(quiet_s=0.2)
    assert not leftover, f"PROTOCOL.md:{example.line_no}: unexpected lines {leftover}"
