"""A campaign's pass criteria as stored with it: a value every layer above the campaign file
reads (the run's end table, the report, `rig status`). Its own module, beside
rig/config/campaign.py which parses it, so that a reader of the stored criteria pays for none of
the campaign file's sections (`rig status` imports no numpy or scipy: docs/decisions.md,
"A command imports only what it runs")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rig.verdict.sequential import Plan


@dataclass(frozen=True)
class Criteria:
    """The pass criteria stored with the campaign; reports compute the verdict from them
    (docs/schema.md, `campaign.criteria`)."""

    max_failure_probability: float = 1e-3  # per cut, the upper bound must stay below this
    confidence: float = 0.95  # one-sided confidence of that bound
    classes: tuple[str, ...] = ()  # failure classes that count; empty = every failure class
    min_cycles: int = 0  # judged cycles a drive needs before it can pass; 0 = from the above
    sequential: Plan | None = None  # [criteria.sequential] (rig/verdict/sequential.py)
    scope: str = "model"  # rig.verdict.sequential.SCOPES: what one plan runs over
    # the lab's own limit on readiness after power-on, seconds (None: only the drive's promise)
    ready_limit_s: float | None = None
    # classes whose first occurrence fails the drive and its model whatever a plan or bound
    # says (rig/check/failures.py ZERO_TOLERANCE by default; [criteria].zero_tolerance)
    zero_tolerance: tuple[str, ...] = (
        "lost_durable_write",
        "flying_write",
        "bit_corruption",
        "dead_device",
    )

    def as_json(self) -> dict[str, object]:
        stated: dict[str, object] = {
            "max_failure_probability": self.max_failure_probability,
            "confidence": self.confidence,
            "classes": list(self.classes),
            "min_cycles": self.min_cycles,
            "zero_tolerance": list(self.zero_tolerance),
        }
        if self.ready_limit_s is not None:  # (stated only when set: older stores read alike)
            stated["ready_limit_s"] = self.ready_limit_s
        if self.sequential is not None:
            stated["sequential"] = {**self.sequential.as_json(), "scope": self.scope}
        return stated
