"""Model against model: Fisher's exact test on every pair, Holm-corrected over the family."""

from __future__ import annotations

from collections.abc import Sequence

from reports.analysis.record import Comparison, ModelReport, Proportion
from rig.check import failures
from rig.verdict import stats

ANY_FAILURE = "any failure"


def compare(models: Sequence[ModelReport], confidence: float) -> list[Comparison]:
    """Every pair of models, Fisher's exact test (two-sided) on cuts with vs without the outcome,
    for any failure and for each failure class seen; Holm-corrected over all those tests."""
    classes = failures.ordered(s.cls for m in models for s in m.classes)

    def outcome(m: ModelReport, name: str) -> Proportion:
        if name == ANY_FAILURE:
            return m.any_failure
        found = next((s.cuts for s in m.classes if s.cls == name), None)
        return found or Proportion(0, m.cuts, 0.0 if m.cuts else None, None, None, None)

    tests = [
        (name, a, b, outcome(a, name), outcome(b, name))
        for name in (ANY_FAILURE, *classes)
        for i, a in enumerate(models)
        for b in models[i + 1 :]
        if a.cuts and b.cuts
    ]
    # a class neither model of a pair ever showed says nothing (p = 1): not a test in the family
    tests = [t for t in tests if t[0] == ANY_FAILURE or t[3].failed or t[4].failed]
    raw = [
        stats.fisher_exact(pa.failed, pa.trials - pa.failed, pb.failed, pb.trials - pb.failed)
        for _, _, _, pa, pb in tests
    ]
    adjusted = stats.holm(raw)
    return [
        Comparison(name, a.model, b.model, pa, pb, p, q, q < 1.0 - confidence)
        for (name, a, b, pa, pb), p, q in zip(tests, raw, adjusted, strict=True)
    ]
