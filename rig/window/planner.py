"""The window strategy in a running campaign: one sequential design per drive model (a model's
drives pool their cuts; a model with one drive is that drive), asked for each cycle's delay and
told each recorded cycle's response. Drive threads share it, so every call takes its lock."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from rig.window import spec as window_spec
from rig.window.design import WindowDesign
from rig.window.spec import WindowSpec


class WindowPlanner:
    def __init__(self, spec: WindowSpec, models: Iterable[str]) -> None:
        self.spec = spec
        self._lock = threading.Lock()
        self._designs = {
            m: WindowDesign(spec.min_ms, spec.max_ms, spec.quantile) for m in sorted(set(models))
        }

    def design(self, model: str) -> WindowDesign:
        return self._designs[model]

    def next_delay_ms(self, model: str, rng: random.Random) -> float:
        with self._lock:
            return self._designs[model].next_delay_ms(rng)

    def observe(
        self,
        model: str,
        context: Mapping[str, Any] | None,
        findings: Iterable[tuple[str, Mapping[str, Any]]],
    ) -> tuple[float, bool] | None:
        """A recorded cut's (delay, lost), told to the model's design; None when the cut has
        no delay after the event (no such event before its edge)."""
        delay = window_spec.delay_ms(self.spec, context)
        if delay is None:
            return None
        lost = window_spec.lost(self.spec, findings)
        with self._lock:
            self._designs[model].observe(delay, lost)
        return delay, lost
