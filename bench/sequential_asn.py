"""How many cuts a sequential plan spends against the fixed-sample plan with the same risks.

For each plan: the exact average sample number (rig/verdict/sequential.py, the recursion over the
truncated binomial walk) at p = 0, p0, p1 and 10 x p1 (capped at 1), the fixed-sample size n
with the same alpha and beta (scipy.stats.binom: the smallest n and c with P(more than c fail |
p0) <= alpha and P(at most c fail | p1) <= beta), and their ratio. The plans: the demo
acceptance test's, a qualification-grade pair around 1e-3, and a tight pair (p1 = 2 p0).
Exact figures, no randomness: the same on every machine; the time is the recursion's.

Run: .venv/bin/python bench/sequential_asn.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rig.verdict.sequential import Plan, curves, fixed_sample_size  # noqa: E402

PLANS = [
    Plan(0.01, 0.1, 0.05, 0.1, 200),
    Plan(0.001, 0.01, 0.05, 0.1, 5000),
    Plan(1e-4, 1e-3, 0.05, 0.05, 50_000),
    Plan(0.001, 0.002, 0.05, 0.05, 60_000),
]


def main() -> None:
    print(
        f"{'plan (p0, p1, alpha, beta, max_cuts)':<40} {'fixed n':>8} {'p':>8} {'ASN':>9}"
        f" {'ASN/n':>7} {'P(PASS)':>8}  {'recursion s':>11}"
    )
    for plan in PLANS:
        fixed_n, _ = fixed_sample_size(plan.p0, plan.p1, plan.alpha, plan.beta)
        ps = [0.0, plan.p0, plan.p1, min(1.0, 10 * plan.p1)]
        start = time.perf_counter()
        c = curves(plan, ps)
        took = time.perf_counter() - start
        name = f"{plan.p0:g}, {plan.p1:g}, {plan.alpha:g}, {plan.beta:g}, {plan.max_cuts}"
        assert plan.problem() == "", plan.problem()
        for i, p in enumerate(ps):
            asn = float(c.asn[i])
            print(
                f"{name if i == 0 else '':<40} {fixed_n if i == 0 else '':>8} {p:>8.4g}"
                f" {asn:>9.1f} {asn / fixed_n:>7.3f} {float(c.pass_probability[i]):>8.4f}"
                f"  {f'{took:.2f}' if i == 0 else '':>11}"
            )


if __name__ == "__main__":
    main()
