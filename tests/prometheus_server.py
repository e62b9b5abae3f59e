"""A real Prometheus server (Debian's `prometheus` binary) on loopback for the metrics tests: a
temporary config scraping the given targets every second, its TSDB in a temporary folder, ended by
its PID however the test ends."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BINARY = "prometheus"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def available() -> str:
    """Why no Prometheus server can run here ("" when one can)."""
    return "" if shutil.which(BINARY) else "Debian's prometheus is not installed (make setup)"


class Prometheus:
    def __init__(self, base: str, log: Path) -> None:
        self.base = base
        self.log = log

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant query's result vector (HTTP API /api/v1/query)."""
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(self, promql: str, timeout_s: float = 90.0) -> list[dict[str, Any]]:
        """The query's result once it has one (the first scrapes take a few seconds)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                result = self.query(promql)
            except OSError:
                result = []
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.5)


@contextmanager
def prometheus(targets: list[str], work: Path) -> Iterator[Prometheus]:
    """Prometheus scraping `targets` (host:port, path /metrics) every second."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: rig\n    metrics_path: /metrics\n"
        f"    static_configs:\n      - targets: {json.dumps(targets)}\n"
    )
    port = free_port()
    log = work / "prometheus.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                BINARY,
                f"--config.file={config}",
                f"--storage.tsdb.path={work / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield Prometheus(f"http://127.0.0.1:{port}", log)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
