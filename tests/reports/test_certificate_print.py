"""The report printed: each model prints as its qualification certificate, a page set
per model, every page naming the model and its verdict. Printed to PDF by headless Chromium,
read back with poppler (pdfinfo, pdftotext, pdftoppm)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from reports import export
from reports.render import html
from tests.reports.storebuilder import DriveSpec, build

CHROMIUM = shutil.which("chromium")
POPPLER = all(shutil.which(tool) for tool in ("pdfinfo", "pdftotext", "pdftoppm"))
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or not POPPLER,
    reason="Debian chromium and poppler-utils absent (make setup installs them)",
)
# the verdict badges' colours (reports/render/svg.py VERDICT_FILL through reports/render/html.py
# STYLE; FAIL's stripes are that colour), printed as they are on screen
BADGE = {"FAIL": (0xB2, 0x18, 0x2B), "NOT YET DEMONSTRATED": (0xFE, 0xE0, 0x8B)}


def print_pdf(page: Path) -> Path:
    assert CHROMIUM is not None
    pdf = page.with_suffix(".pdf")
    with tempfile.TemporaryDirectory(prefix="rig-print-") as profile:
        done = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--no-pdf-header-footer",
                f"--user-data-dir={profile}",
                f"--print-to-pdf={pdf}",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert done.returncode == 0 and pdf.exists(), done.stderr[-2000:]
    return pdf


def page_texts(pdf: Path) -> list[str]:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True)
    count = int(next(line for line in info.stdout.splitlines() if line.startswith("Pages:"))[6:])
    return [
        subprocess.run(
            ["pdftotext", "-layout", "-f", str(n), "-l", str(n), str(pdf), "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for n in range(1, count + 1)
    ]


def page_colours(pdf: Path, n: int) -> set[tuple[int, int, int]]:
    stem = pdf.with_name(f"{pdf.stem}-{n}")
    subprocess.run(
        ["pdftoppm", "-png", "-r", "50", "-f", str(n), "-l", str(n), "-singlefile", pdf, stem],
        check=True,
    )
    pixels = np.asarray(Image.open(stem.with_suffix(".png")).convert("RGB")).reshape(-1, 3)
    return {tuple(int(v) for v in p) for p in np.unique(pixels, axis=0)}


def header_of(text: str) -> str:
    """The running header: the page's first line that names the certificate."""
    return next(line for line in text.splitlines() if "qualification certificate" in line)


def verdicts(out: Path) -> dict[str, str]:
    report = json.loads((out / "report.json").read_text())
    return {m["model"]: m["verdict"]["label"] for m in report["models"]}


def test_each_model_prints_as_its_certificate(tmp_path: Path) -> None:
    store = build(
        tmp_path / "s.sqlite",
        [
            DriveSpec("Clean", "C1", ["ok"] * 12),
            DriveSpec("Liar", "L1", ["ok", "lost_durable_write"] * 6, channel=1),
            DriveSpec("Tearer", "T1", ["ok", "shorn_write", "ok"] * 4, channel=2, firmware=""),
        ],
        config='[campaign]\nname = "qual"\ncycles = 12\n[cut]\ndelay_ms = [5, 60]\n',
    )
    out = tmp_path / "r"
    export.write_report([str(store)], str(out))
    expected = verdicts(out)
    assert set(expected.values()) == set(BADGE)
    pages = page_texts(print_pdf(out / "report.html"))
    assert len(pages) == len(expected)  # one page per model (each fits one)
    for n, (text, (model, label)) in enumerate(zip(pages, sorted(expected.items()), strict=True)):
        head = header_of(text)
        assert f"certificate · {model} · verdict" in head and label in text
        for part in ("Criteria", "Plan", "Cuts", "Drives (1)", "Findings per class"):
            assert part in text
        assert "cycles per drive: 12" in text and "cut delay: 5–60 ms" in text
        assert BADGE[label] in page_colours(out / "report.pdf", n + 1)
        assert "Model vs model" not in text and "Method" not in text  # the screen's parts
    assert "(not reported)" in pages[2]  # Tearer's firmware
    # a model's own page is its certificate alone
    alone = page_texts(print_pdf(out / html.model_page("Liar")))
    assert len(alone) == 1 and "certificate · Liar · verdict" in header_of(alone[0])


def test_a_model_with_many_drives_prints_as_a_page_set(tmp_path: Path) -> None:
    """A certificate longer than a page goes on over several, each headed by its model and
    verdict; the next model starts a page of its own."""
    many = [DriveSpec("Big", f"B{i:02}", ["ok"] * 3, channel=i) for i in range(70)]
    store = build(tmp_path / "s.sqlite", [*many, DriveSpec("Small", "S1", ["ok"] * 3)])
    out = tmp_path / "r"
    export.write_report([str(store)], str(out))
    expected = verdicts(out)
    pages = page_texts(print_pdf(out / "report.html"))
    heads = [header_of(text) for text in pages]
    models = [next(m for m in expected if f"· {m} ·" in h) for h in heads]
    sets = [m for i, m in enumerate(models) if i == 0 or models[i - 1] != m]
    assert sets == sorted(expected)  # a page set per model, in the report's order
    assert models.count("Big") >= 2 and models.count("Small") == 1
    for model, text in zip(models, pages, strict=True):
        assert expected[model] in text
