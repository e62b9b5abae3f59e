"""The window strategy's campaign keys ([cut.window]) and what one cut answers: its delay after
the chosen event and whether it lost data of the chosen class (docs/campaign.md, "The window
of vulnerability"). Pure: the campaign and the report read cycles through these alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rig.check.failures import ALLOWED_LOSS, LOST_DURABLE, UNSERIALIZABLE
from rig.config.tables import Table
from rig.drive.identity import DriveIdentity
from rig.errors import UserError

LOST_WRITE = "lost_write"  # an acknowledged write that did not survive (allowed or not)
# the classes with a time axis, and the event their delay is measured from
TIME_AXES = {LOST_DURABLE: "flush", LOST_WRITE: "ack", UNSERIALIZABLE: "ack"}
EVENTS = ("ack", "flush")
DEFAULT_CLASS = {"flush": LOST_DURABLE, "ack": LOST_WRITE}
CONTEXT_KEY = {"flush": "since_last_flush_ns", "ack": "since_last_ack_ns"}


@dataclass(frozen=True)
class WindowSpec:
    after: str = "flush"  # the event each cut's delay is measured from: ack | flush
    min_ms: float = 0.1
    max_ms: float = 60_000.0
    cls: str = LOST_DURABLE  # the class whose loss is the response
    quantile: float = 0.99  # the t_q the design aims at
    # after a flush: how long since the writers' last flush before the rig's own write (their
    # flushes' destage timers have run out by then; default max_ms): see `quiet_s`
    quiet_ms: float | None = None


def parse(table: Table) -> WindowSpec:
    """The [cut.window] table; bad input is a UserError of one line (before any write)."""
    after = table.get("after", str, "flush")
    if after not in EVENTS:
        raise UserError(f"campaign: [cut.window].after must be one of {', '.join(EVENTS)}")
    low = float(table.number("min_ms", 0.1, -1e12, 3_600_000))
    high = float(table.number("max_ms", 60_000.0, -1e12, 3_600_000))
    if low <= 0 or high <= low:
        raise UserError(
            f"campaign: [cut.window] range {low:g}..{high:g} ms is empty or not positive "
            "(need 0 < min_ms < max_ms)"
        )
    cls = table.get("class", str, DEFAULT_CLASS[after])
    if cls not in TIME_AXES:
        axes = ", ".join(f"{c} (after {e})" for c, e in TIME_AXES.items())
        raise UserError(
            f"campaign: [cut.window].class {cls} has no time axis (those with one: {axes})"
        )
    if TIME_AXES[cls] != after:
        raise UserError(
            f"campaign: [cut.window].class {cls} is timed after the {TIME_AXES[cls]}, "
            f"not after the {after}"
        )
    quantile = float(table.number("quantile", 0.99, 0.5, 0.999))
    quiet = None
    if "quiet_ms" in table.data:
        if after != "flush":
            raise UserError("campaign: [cut.window].quiet_ms is for a window after the flush")
        quiet = float(table.number("quiet_ms", 0, 0, 3_600_000))
    table.done()
    return WindowSpec(after, low, high, cls, quantile, quiet)


def quiet_s(spec: WindowSpec | None) -> float:
    """How long the rig waits, after the writers stopped, since their last completed flush
    before it writes and flushes once to time a cut from (rig/campaign/cutcycle/cuts.py). A
    drive whose destage timer each flush (re)arms may still hold an earlier flush's timer:
    should that run out between the rig's write and its flush, the cache is empty at the flush
    and the cut survives whatever its delay, a survival the fit would read as a short window.
    Waiting the longest window the campaign allows for (max_ms, unless quiet_ms says less)
    leaves only the rig's flush's timer running. 0 for a window after the ack: a write's timer
    is (re)armed as it arrives, before its data is cached."""
    if spec is None or spec.after != "flush":
        return 0.0
    return (spec.max_ms if spec.quiet_ms is None else spec.quiet_ms) / 1000


def pool_of(identity: DriveIdentity) -> str:
    """The design a drive uses: its model's; a drive named without a model (by WWN) has its own."""
    return identity.model or identity.label()


def delay_ms(spec: WindowSpec, context: Mapping[str, Any] | None) -> float | None:
    """A cut's delay after its event, from its `cut_context` (None: no such event before it)."""
    if not context:
        return None
    since = context.get(CONTEXT_KEY[spec.after])
    return None if since is None or since <= 0 else since / 1e6


def lost(spec: WindowSpec, findings: Iterable[tuple[str, Mapping[str, Any]]]) -> bool:
    """Whether a cut's findings (class, detail) hold a loss of the spec's class."""
    for cls, detail in findings:
        if cls == spec.cls:
            return True
        if spec.cls == LOST_WRITE:
            if cls in (LOST_DURABLE, UNSERIALIZABLE):
                return True
            if cls == ALLOWED_LOSS and detail.get("acknowledged"):
                return True
    return False


def for_strategy(cut_t: Table, strategy: str, flush_cadence: bool) -> WindowSpec | None:
    """[cut.window]: given exactly when [cut].strategy is "window"; a window after the flush
    needs the workload to flush (`flush_cadence`)."""
    if strategy != "window":
        if "window" in cut_t.data:
            raise UserError('campaign: [cut.window] needs [cut].strategy = "window"')
        return None
    window = parse(cut_t.table("window") if "window" in cut_t.data else Table("[cut.window]", {}))
    if window.after == "flush" and not flush_cadence:
        raise UserError("campaign: a window after the flush needs a flush cadence in [workload]")
    return window
