"""The dashboard in headless Chromium over one station's store while `rig run` writes it (a
one-station lab, no PostgreSQL): the campaign page's progress moves between two screenshots
without a reload, and the page carries the HTML report's content with a three-state verdict."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.pgcluster import free_port
from tests.fleet import browser

REPO = Path(__file__).resolve().parents[2]


def campaign_text(cycles: int) -> str:
    text = (REPO / "fixtures" / "demo.toml").read_text()
    return text.replace("cycles = 60", f"cycles = {cycles}").replace(
        'twin = "simavr"', 'twin = "in-process"'
    )


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "rig.interface.cli", *argv],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def end(proc: subprocess.Popen[bytes]) -> None:
    """Stop a child we started, by its PID (SIGTERM: the rig stops safely), then kill."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def wait_http(port: int, timeout_s: float = 30) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/fragment/overview", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"dashboard on port {port} did not answer")


def shots_differ(a: bytes, b: bytes) -> bool:
    from PIL import Image, ImageChops

    first, second = Image.open(io.BytesIO(a)), Image.open(io.BytesIO(b))
    return (
        first.size != second.size
        or ImageChops.difference(first.convert("RGB"), second.convert("RGB")).getbbox() is not None
    )


@pytest.fixture
def running_store(tmp_path: Path) -> Iterator[Path]:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(campaign_text(400))
    store = tmp_path / "station.sqlite"
    proc = start(["run", str(campaign), "--db", str(store), "--quiet"], tmp_path / "run.log")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _has_cycles(store):
            assert proc.poll() is None, (tmp_path / "run.log").read_text()
            time.sleep(0.3)
        yield store
    finally:
        end(proc)


def _has_cycles(store: Path) -> bool:
    import sqlite3

    if not store.exists():
        return False
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            return bool(db.execute("SELECT count(*) FROM cycle").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return False


def test_campaign_progress_moves_in_the_browser(running_store: Path, tmp_path: Path) -> None:
    why = browser.requirements()
    if why:
        pytest.skip(why)
    port = free_port()
    server = start(
        ["serve", "--db", str(running_store), "--port", str(port)], tmp_path / "serve.log"
    )
    try:
        wait_http(port)
        with browser.chromium() as page:
            page.get(f"http://127.0.0.1:{port}/campaign/0/1")
            done = page.find_element("css selector", "span.done")
            first_count, first_shot = int(done.text), page.get_screenshot_as_png()
            deadline = time.monotonic() + 60
            count = first_count
            while count <= first_count and time.monotonic() < deadline:
                time.sleep(0.5)
                count = int(page.find_element("css selector", "span.done").text)
            second_shot = page.get_screenshot_as_png()
            (tmp_path / "first.png").write_bytes(first_shot)
            (tmp_path / "second.png").write_bytes(second_shot)
            assert count > first_count, "the page's progress did not move while cuts ran"
            assert shots_differ(first_shot, second_shot)
            # no reload happened: the live part was fetched in place
            assert (
                page.execute_script("return performance.getEntriesByType('navigation').length") == 1
            )
            body = page.find_element("tag name", "body").text
            assert "Power-fault reliability report" in body
            assert "RIGSIM Lying Flush" in body and "NOT YET DEMONSTRATED" in body
    finally:
        end(server)
