"""The structured log of a campaign run: one JSON object per line, appended, flushed per line.

Every line has `t` (wall clock, seconds since the epoch) and `kind`; the other fields depend on
the kind (docs/campaign.md, "Run log"). The store stays the record a report is built from; this
log is for following and auditing a run (starts, resumes, signals, every cycle, stops).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any


class RunLog:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"t": round(time.time(), 3), "kind": kind, **fields}, sort_keys=True)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
