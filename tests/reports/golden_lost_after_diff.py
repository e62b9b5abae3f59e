"""The golden references of a git revision against the working tree's: every file identical but
the lost-after parts that became [ms, count] pairs (docs/decisions.md, "Per-cut outputs are
streamed, aggregates come from columns": report.json's lost_after_ack_ms / lost_after_flush_ms
lists, the lost-after chart of each HTML page), and the new lists equal the old values rounded
by `rig.store.lost_after_ms` and counted.

Run: .venv/bin/python -m tests.reports.golden_lost_after_diff [REV]   (REV: main by default)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from typing import Any

from tests.reports.golden_report import CASES, GOLDEN

CHART = re.compile(
    r"<svg[^>]*>(?:(?!</svg>).)*?Lost durable writes: time they had been.*?</svg>", re.S
)
LISTS = ("lost_after_ack_ms", "lost_after_flush_ms")


def _rounded(ms: float) -> float:
    return float(f"{ms:.3g}")  # rig.store.lost_after_ms on ms (ns / 1e6) instead of ns


def _masked_json(text: str) -> tuple[str, list[Any]]:
    body = json.loads(text)
    lists = []
    for model in body.get("models", []):
        for name in LISTS:
            lists.append(model[name])
            model[name] = "<lost-after>"
    return json.dumps(body, indent=1), lists


def compare(old: str, new: str, name: str) -> tuple[bool, str]:
    """(only the lost-after parts differ, what differs)."""
    if old == new:
        return True, "identical"
    if name.endswith(".json"):
        (a, old_lists), (b, new_lists) = _masked_json(old), _masked_json(new)
        counted = all(
            Counter(_rounded(v) for v in was) == {v: n for v, n in now}
            and [v for v, _ in now] == sorted(v for v, _ in now)
            for was, now in zip(old_lists, new_lists, strict=True)
        )
        sizes = ", ".join(
            f"{len(w)} values -> {len(n)} pairs"
            for w, n in zip(old_lists, new_lists, strict=True)
            if w
        )
        return a == b and counted, f"lost-after lists ({sizes}; rounded and counted: {counted})"
    same = CHART.sub("<chart>", old) == CHART.sub("<chart>", new)
    return same, f"lost-after chart ({len(CHART.findall(old))} in the page)"


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "main"
    bad = 0
    for case in CASES:
        for path in sorted((GOLDEN / case).iterdir()):
            where = path.relative_to(GOLDEN.parents[2])
            old = subprocess.run(
                ["git", "show", f"{rev}:{where}"], capture_output=True, text=True, check=True
            ).stdout
            ok, what = compare(old, path.read_text(encoding="utf-8"), path.name)
            bad += not ok
            print(f"{case}/{path.name}: {what}{'' if ok else '  <-- OTHER DIFFERENCE'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
