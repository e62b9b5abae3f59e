"""Sequential verdicts while a campaign runs (decision 172): each model's plan (pooled over its
drives in this campaign) or each drive's, updated after every recorded cut in the order the cuts
were recorded; once a plan decides, that decision and the cut that made it are an event of the
drive whose cut it was (`settled`), and with `[stop] when = "settled"` the drives it covers stop.

A fixed-sample verdict (the report's Clopper-Pearson bound) is never looked at here: peeking at
it after every cut would inflate both of its error rates."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from rig.campaign_spec import Campaign, Criteria
from rig.check import failures
from rig.sequential import CONTINUE, Plan, Settled

CUT_STATUSES = ("ok", "dead")  # a cycle whose cut reached the drive (as reports/cuts.py)


class Settlement:
    """The plans of one campaign, shared by its drives' threads."""

    def __init__(self, criteria: Criteria) -> None:
        assert criteria.sequential is not None
        self.plan: Plan = criteria.sequential
        self.scope = criteria.scope
        self.classes = frozenset(criteria.classes or failures.failure_names())
        self.lock = threading.Lock()
        self.tallies: dict[str, tuple[int, int]] = {}  # key -> (cuts, failing cuts)
        self.decided: dict[str, Settled] = {}

    def key(self, model: str, channel: int) -> str:
        """What one plan runs over: the drive's model, or the drive itself."""
        return model if self.scope == "model" else f"ch{channel}"

    def failing(self, classes: Iterable[str]) -> bool:
        """A failing cut: one with a failure of a class the criteria count."""
        return not self.classes.isdisjoint(classes)

    def add(self, key: str, status: str, classes: Iterable[str]) -> Settled | None:
        """Count a recorded cycle (if it is a cut, and its plan is still open); the decision it
        makes, if it makes one."""
        if status not in CUT_STATUSES:
            return None
        with self.lock:
            if key in self.decided:
                return None
            cuts, failing = self.tallies.get(key, (0, 0))
            cuts, failing = cuts + 1, failing + self.failing(classes)
            self.tallies[key] = (cuts, failing)
            decision = self.plan.decide(cuts, failing)
            if decision == CONTINUE:
                return None
            self.decided[key] = Settled(decision, cuts, failing)
            return self.decided[key]

    def decision(self, key: str) -> Settled | None:
        with self.lock:
            return self.decided.get(key)

    def event(self, key: str, settled: Settled, seq: int) -> dict[str, object]:
        """The `settled` event's detail."""
        return {
            "scope": self.scope,
            "key": key,
            "decision": settled.decision,
            "cuts": settled.cuts,
            "failing": settled.failing,
            "seq": seq,
            "plan": self.plan.as_json(),
        }


def for_campaign(
    campaign: Campaign, recorded: Iterable[tuple[str, int, str, list[str]]] = ()
) -> Settlement | None:
    """The campaign's plans (None without `[criteria.sequential]`), with the cycles already
    `recorded` (model, channel, status, failure classes; in record order) counted in: a resume
    continues each plan where it was instead of looking at the data afresh."""
    if campaign.criteria.sequential is None:
        return None
    settlement = Settlement(campaign.criteria)
    for model, channel, status, classes in recorded:
        settlement.add(settlement.key(model, channel), status, classes)
    return settlement
