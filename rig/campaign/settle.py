"""Sequential verdicts while a campaign runs (docs/decisions.md, "Plans run per model while the
campaign runs, one SPRT per class"): each model's plans (pooled over its drives in this
campaign) or each drive's, updated after every recorded cut in the order the cuts
were recorded; once they decide, that decision and the cut that made it are an event of the
drive whose cut it was (`settled`), and with `[stop] when = "settled"` the drives it covers stop.

A plan judges each class its criteria count on its own (docs/campaign.md, "Sequential plans"):
a class's plan steps only on the cuts exposed to that class (rig/check/exposure.py), so cuts
that could not have failed a class are no trials of it. The drive (or model) settles FAIL when
one class's plan fails, or at the first failing cut of a zero-tolerance class whatever the plans
say; PASS once every judged class's plan has passed. A class no cut exposed keeps it open.

A fixed-sample verdict (the report's Clopper-Pearson bound) is never looked at here: peeking at
it after every cut would inflate both of its error rates."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from rig.check import exposure, failures
from rig.config.campaign import Campaign, Criteria
from rig.health import maintenance
from rig.verdict.sequential import CONTINUE, FAIL, PASS, Plan, Settled

CUT_STATUSES = ("ok", "dead")  # a cycle whose cut reached the drive (as reports/load/cuts.py)


@dataclass
class Tally:
    """One key's plans: per judged class the exposed cuts, failing cuts and its decision."""

    cuts: int = 0
    failing: int = 0
    exposed: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    decided: dict[str, str] = field(default_factory=dict)
    rule: str = ""  # what decided the key, once it is decided


class Settlement:
    """The plans of one campaign, shared by its drives' threads."""

    def __init__(self, criteria: Criteria) -> None:
        assert criteria.sequential is not None
        self.plan: Plan = criteria.sequential
        self.scope = criteria.scope
        self.classes = tuple(criteria.classes or failures.failure_names())
        self.zero = frozenset(criteria.zero_tolerance) & frozenset(self.classes)
        self.lock = threading.Lock()
        self.tallies: dict[str, Tally] = {}
        self.decided: dict[str, Settled] = {}
        # judged classes no cut of a key can expose (the workload, a drive without health
        # readings): reported "not exercised", and not waited for by the key's PASS
        self.never: dict[str, set[str]] = {}
        self.never_all: frozenset[str] = frozenset()

    def cannot_exercise(self, key: str, classes: Iterable[str]) -> None:
        """No cut of `key` can expose these classes (said once, at the start of its run)."""
        with self.lock:
            self.never.setdefault(key, set()).update(classes)

    def key(self, model: str, channel: int) -> str:
        """What one plan runs over: the drive's model, or the drive itself."""
        return model if self.scope == "model" else f"ch{channel}"

    def add(
        self,
        key: str,
        status: str,
        classes: Iterable[str],
        exposed: frozenset[str] | None = None,
    ) -> Settled | None:
        """Count a recorded cycle (if it is a cut, and its plans are still open) with the
        failure classes it showed and the classes it was exposed to (None: not known, a cut of
        an older store: counted for every class, as before exposure was kept); the decision it
        makes, if it makes one."""
        if status not in CUT_STATUSES:
            return None
        found = frozenset(classes)
        with self.lock:
            if key in self.decided:
                return None
            t = self.tallies.setdefault(key, Tally())
            t.cuts += 1
            t.failing += not found.isdisjoint(self.classes)
            for cls in self.classes:
                if exposure.is_exposed(exposed, cls) is False or cls in t.decided:
                    continue
                t.exposed[cls] = t.exposed.get(cls, 0) + 1
                t.failed[cls] = t.failed.get(cls, 0) + (cls in found)
                decision = self.plan.decide(t.exposed[cls], t.failed[cls])
                if decision != CONTINUE:
                    t.decided[cls] = decision
            decision = self._decision(t, found, self.never_all | self.never.get(key, set()))
            if decision == CONTINUE:
                return None
            self.decided[key] = Settled(decision, t.cuts, t.failing)
            return self.decided[key]

    def _decision(self, t: Tally, found: frozenset[str], never: Iterable[str]) -> str:
        zero = sorted(self.zero & found)
        if zero:
            t.rule = f"zero tolerance: {', '.join(zero)}"
            return FAIL
        failed = [c for c in self.classes if t.decided.get(c) == FAIL]
        if failed:
            t.rule = f"sequential plan: {', '.join(failed)} failed on its exposed cuts"
            return FAIL
        # (a class thought unexercisable that a cut did expose, e.g. slow_ready on a drive that
        # advertises its timeout, is judged)
        judged = [c for c in self.classes if c not in never or t.exposed.get(c)]
        if judged and all(t.decided.get(c) == PASS for c in judged):
            t.rule = "sequential plan: every judged class passed on its exposed cuts"
            if len(judged) < len(self.classes):
                t.rule += f" (not exercised: {', '.join(c for c in self.classes if c in never)})"
            return PASS
        return CONTINUE

    def decision(self, key: str) -> Settled | None:
        with self.lock:
            return self.decided.get(key)

    def told(self, key: str) -> str:
        """The decision's rule and per judged class its failing/exposed cuts, for people (the
        progress line, the notifications)."""
        with self.lock:
            t = self.tallies.get(key, Tally())
            per = ", ".join(f"{c} {t.failed.get(c, 0)}/{t.exposed.get(c, 0)}" for c in self.classes)
            return f"{t.rule}; failing/exposed cuts per class: {per}"

    def not_exercised(self, key: str) -> list[str]:
        """The judged classes no cut of `key` has exposed so far."""
        with self.lock:
            t = self.tallies.get(key, Tally())
            return [c for c in self.classes if not t.exposed.get(c)]

    def event(self, key: str, settled: Settled, seq: int) -> dict[str, object]:
        """The `settled` event's detail: with per judged class its exposed and failing cuts and
        its plan's decision (docs/schema.md)."""
        with self.lock:
            t = self.tallies.get(key, Tally())
            per_class = {
                c: {
                    "exposed": t.exposed.get(c, 0),
                    "failing": t.failed.get(c, 0),
                    "decision": t.decided.get(c, CONTINUE if t.exposed.get(c) else "NOT EXERCISED"),
                }
                for c in self.classes
            }
            rule = t.rule
        return {
            "scope": self.scope,
            "key": key,
            "decision": settled.decision,
            "cuts": settled.cuts,
            "failing": settled.failing,
            "seq": seq,
            "plan": self.plan.as_json(),
            "rule": rule,
            "classes": per_class,
        }


def for_campaign(
    campaign: Campaign,
    recorded: Iterable[tuple[str, int, str, list[str], frozenset[str] | None]] = (),
) -> Settlement | None:
    """The campaign's plans (None without `[criteria.sequential]`), with the cycles already
    `recorded` (model, channel, status, failure classes, exposure; in record order) counted in:
    a resume continues each plan where it was instead of looking at the data afresh."""
    if campaign.criteria.sequential is None:
        return None
    settlement = Settlement(campaign.criteria)
    settlement.never_all = frozenset(unexercisable(campaign)) & frozenset(settlement.classes)
    for model, channel, status, classes, exposed in recorded:
        settlement.add(settlement.key(model, channel), status, classes, exposed)
    return settlement


def unexercisable(campaign: Campaign) -> tuple[str, ...]:
    """Judged classes the campaign leaves no cut exposed to: the durable-write classes without a
    flush (`never_durable`), a resurrected discard without discards, an erase that survived
    without a cut during a format or sanitize. (A class a cut does expose after all is judged:
    `Settlement._decision`.)"""
    judged = campaign.criteria.classes or failures.failure_names()
    never = set(never_durable(campaign))
    if not campaign.workload.discard_share:
        never.add(failures.RESURRECTED)
    op = campaign.cut.maintenance
    if op is None or op.operation == maintenance.FIRMWARE:
        never.add(failures.SURVIVED_ERASE)
    return tuple(c for c in judged if c in never)


def never_durable(campaign: Campaign) -> tuple[str, ...]:
    """Without a flush (and no FUA) no write is ever durable, so no durable write can be lost
    or reordered."""
    load = campaign.workload
    if load.flush_every or load.flush_every_ms or load.durable_writes:
        return ()
    judged = campaign.criteria.classes or failures.failure_names()
    return tuple(c for c in (failures.LOST_DURABLE, failures.UNSERIALIZABLE) if c in judged)


def start_notes(campaign: Campaign) -> list[str]:
    """The one line `rig run` says at the start when its workload leaves the durable-write
    classes unexercisable (none when it leaves none)."""
    never = never_durable(campaign)
    if not never:
        return []
    return [
        f"note: the workload never makes a write durable (flush_every = 0, no flush_every_ms,"
        f" no durable_writes): {', '.join(never)} cannot be judged (reported not exercised)"
    ]
