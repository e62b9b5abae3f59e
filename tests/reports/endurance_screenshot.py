"""docs/report-endurance.png: the Endurance part of the report of some stores, in headless
Chromium (the same browser invocation as tests/reports/test_render.py).

    .venv/bin/python -m tests.reports.endurance_screenshot OUT.png STORE.sqlite [STORE ...]

The report is built by the production code (`export.write_report`); for the picture, each model
section keeps its heading and its Endurance part (the sections above and below it are cut from
a copy of report.html, nothing is redrawn)."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from reports import export
from tests.reports.test_render import CHROMIUM, chromium

SECTION = re.compile(r'(<section class="model"[^>]*>)(.*?)</section>', re.S)


def endurance_only(page: str) -> str:
    opening = re.search(r"<body[^>]*>", page)
    assert opening is not None
    head, body = page[: opening.start()], page[opening.end() :]
    kept = []
    for opening, inner in SECTION.findall(body):
        title = re.search(r"<h2>.*?</h2>", inner, re.S)
        start = inner.find("<h3>Endurance</h3>")
        end = inner.find("<h3>Rail fall</h3>")
        if start < 0:
            continue
        part = inner[start : end if end > start else len(inner)]
        kept.append(f"{opening}{title.group(0) if title else ''}{part}</section>")
    return f"{head}{opening.group(0)}{''.join(kept)}</body></html>"


def shoot(out_png: Path, stores: list[str], width: int = 1280, height: int = 7600) -> None:
    if CHROMIUM is None:
        raise SystemExit("chromium is not installed (make setup installs it)")
    with tempfile.TemporaryDirectory(prefix="rig-endurance-shot-") as tmp:
        page = Path(export.write_report(stores, tmp))
        cut = page.with_name("endurance.html")
        cut.write_text(endurance_only(page.read_text(encoding="utf-8")), encoding="utf-8")
        result = chromium(cut, f"--screenshot={out_png}", f"--window-size={width},{height}")
    if result.returncode != 0 or not out_png.exists():
        raise SystemExit(f"chromium failed: {result.stderr[-2000:]}")
    crop_blank_bottom(out_png)


def crop_blank_bottom(png: Path, margin: int = 24) -> None:
    """Cut the white space below the last drawn row (the window is taller than the page)."""
    image = Image.open(png).convert("RGB")
    pixels = np.asarray(image)
    page = pixels[:-20, :-20]  # not the window's scrollbars
    drawn = np.nonzero((page < 250).any(axis=(1, 2)))[0]
    if len(drawn):
        image.crop((0, 0, image.width, min(image.height, int(drawn[-1]) + margin))).save(png)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    shoot(Path(sys.argv[1]).resolve(), sys.argv[2:])
