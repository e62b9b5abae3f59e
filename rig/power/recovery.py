"""Cuts during a drive's recovery (`[cut.recovery]`, docs/campaign.md "Cuts during recovery").

After the cycle's cut and its power-on, a burst of `burst` further cuts, each `on_ms` after the
power-on before it (uniform in [low, high], drawn per cut), with the campaign's `off_ms`
between: the drive is cut while it boots, while it answers on the bus but is not ready, or
once ready, as the on-time falls. The burst is one cycle, judged once after the last power-on
against what was durable at the cycle's first cut (rig/campaign/cutcycle/recovery.py).

Read here, beside the other keys of the cut's power schedule (shapes.py); a recovery delay
outside the cycle (beyond `return_timeout_s`, when the rig would call the drive dead) or a
burst without an on-time is refused before anything is written.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rig.config.tables import Table
from rig.errors import UserError

MAX_BURST = 1000


@dataclass(frozen=True)
class RecoverySpec:
    burst: int  # cuts after the cycle's own, each at a delay after a power-on
    on_ms: tuple[float, float]  # each power-on lasts this long before the next cut

    def draw_s(self, rng: random.Random) -> float:
        """One power-on's length before its cut, seconds."""
        return rng.uniform(*self.on_ms) / 1000


def settings(cut_t: Table, return_timeout_s: float) -> RecoverySpec | None:
    """[cut.recovery], if given."""
    if "recovery" not in cut_t.data:
        return None
    table = cut_t.table("recovery")
    burst = table.whole("burst", 1, 1, MAX_BURST)
    if "on_ms" not in table.data:
        raise UserError("campaign: [cut.recovery] needs 'on_ms' (each power-on's length)")
    on_ms = table.range_ms("on_ms", [0.0, 0.0])
    table.done()
    if on_ms[1] <= 0:
        raise UserError("campaign: [cut.recovery].on_ms must be above 0 (a burst needs on-time)")
    if on_ms[1] > return_timeout_s * 1000:
        raise UserError(
            f"campaign: [cut.recovery].on_ms = {on_ms[1]:g} ms is outside the cycle: beyond"
            f" [cut].return_timeout_s ({return_timeout_s:g} s) the drive counts as dead"
        )
    return RecoverySpec(burst, on_ms)
