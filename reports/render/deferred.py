"""Page content too large to hold as one string (a mark per cut in a chart, a JSON entry per
cut): a token stands in the text and a generator makes its pieces when the page is written, so a
report of millions of cuts streams to its file instead of being built in memory
(docs/decisions.md, "Per-cut outputs are streamed, aggregates come from columns").

A token is expanded once: `expand` forgets it as it goes (each rendering makes its own)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator

_made: dict[str, Callable[[], Iterable[str]]] = {}
_numbers = itertools.count()
TOKEN = re.compile("\x00deferred:[0-9]+\x00")


def defer(make: Callable[[], Iterable[str]]) -> str:
    """A token for the text `make()` yields (called when the text is expanded)."""
    token = f"\x00deferred:{next(_numbers)}\x00"
    _made[token] = make
    return token


def expand(text: str) -> Iterator[str]:
    """The text with each token replaced by its pieces (tokens inside pieces expand too)."""
    at = 0
    for match in TOKEN.finditer(text):
        yield text[at : match.start()]
        for piece in _made.pop(match.group())():
            yield from expand(piece) if "\x00" in piece else (piece,)
        at = match.end()
    yield text[at:]


def join(text: str) -> str:
    return "".join(expand(text))


def write(path: str, text: str) -> None:
    """The expanded text to `path` (written whole or not at all: a temporary file, renamed)."""
    import os

    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        batch: list[str] = []
        size = 0
        for piece in expand(text):
            batch.append(piece)
            size += len(piece)
            if size > 1 << 20:
                handle.write("".join(batch))
                batch, size = [], 0
        handle.write("".join(batch))
    os.replace(tmp, path)
