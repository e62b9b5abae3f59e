"""A notification that could not be delivered is said where people look, not only in the run
log: one line on the operator's terminal, and an event in the store, which `rig status` and the
dashboard count (`notify_failed`: the last try of a notice to a URL failed; `notify_gave_up`:
the campaign's end left a URL still sending; `notify_dropped`: a full queue dropped a notice)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# the kinds shown: what was not delivered (a failed try that will be retried is only logged)
SHOWN = ("notify_failed", "notify_gave_up", "notify_dropped")


LAST = 5  # the newest notices not delivered that `rig status --json` lists


class FailureRows(Protocol):
    """The store's reads of them (rig/store/summary.py)."""

    def notify_failures(self) -> Sequence[Any]: ...

    def notify_failures_last(self, limit: int) -> Sequence[Any]: ...


@dataclass(frozen=True)
class Undelivered:
    """One notice not delivered, as it may be shown anywhere: the URL's scheme and host only
    (never its user, password, path or query, where services keep their tokens), the wall
    time (None for an event stored before it was kept) and the reason."""

    kind: str  # one of SHOWN
    notice: str  # the notice's own kind (`campaign_end`, `fail`, ...); "" when none was sent
    scheme: str
    host: str
    at: float | None
    reason: str

    @property
    def where(self) -> str:
        return f"{self.scheme}://{self.host}" if self.scheme else "?"


@dataclass
class NotDelivered:
    """A store's (or a replicated campaign's) notices not delivered: per kind the count and
    the newest one, and the newest few of any kind, newest first."""

    kinds: dict[str, tuple[int, Undelivered]] = field(default_factory=dict)
    last: list[Undelivered] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per kind, with the newest one's notice, URL and reason: what `rig status`
        and the dashboards show (none when every notice went out)."""
        lines = []
        for kind, (n, u) in sorted(self.kinds.items()):
            why = f": {u.reason}" if u.reason else ""
            lines.append(
                f"notifications not delivered: {n} {kind} (last: {u.notice} to {u.where}{why})"
            )
        return lines


def undelivered(kind: str, detail: str | dict[str, Any]) -> Undelivered:
    """An event row's kind and detail (JSON) as shown."""
    try:
        fields = json.loads(detail) if isinstance(detail, str) else detail
    except ValueError:
        fields = {}
    fields = fields if isinstance(fields, dict) else {}
    scheme, host = scheme_and_host(str(fields.get("url", "")))
    at = fields.get("at")
    return Undelivered(
        kind,
        str(fields.get("event") or fields.get("sending") or ""),
        scheme,
        host,
        float(at) if isinstance(at, int | float) else None,
        _reason(kind, fields),
    )


def scheme_and_host(url: str) -> tuple[str, str]:
    """The URL's scheme and host (with its port); ("", "") for what is no URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.isidentifier():
        return "", ""
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return scheme.lower(), netloc.rpartition("@")[2]


def scrubbed(text: str) -> str:
    """`text` with every URL in it cut to its scheme and host (an error message may quote
    the URL it failed on)."""
    return _URL.sub(lambda m: "{}://{}".format(*scheme_and_host(m.group(0))), text)


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")


def _reason(kind: str, fields: dict[str, Any]) -> str:
    if kind == "notify_gave_up":
        pending = len(fields.get("pending", ())) + (1 if fields.get("sending") else 0)
        return f"gave up at the end: {pending} notice(s) not delivered"
    if kind == "notify_dropped":
        title = scrubbed(str(fields.get("title", "")))
        return f"queue full ({fields.get('queue', '?')}): dropped '{title}'"
    return scrubbed(str(fields.get("error", "")))


def read(store: FailureRows, last: int = LAST) -> NotDelivered:
    """The store's notices not delivered."""
    return NotDelivered(
        {
            row["kind"]: (int(row["n"]), undelivered(row["kind"], row["last"]))
            for row in store.notify_failures()
        },
        [undelivered(r["kind"], r["detail"]) for r in store.notify_failures_last(last)]
        if last
        else [],
    )


def summary_lines(store: FailureRows) -> list[str]:
    """One line per kind of notification not delivered (`NotDelivered.lines`)."""
    return read(store, 0).lines()


class EventQueue(Protocol):
    def queue_event(
        self, drive_id: int | None, host_ns: int, kind: str, detail: dict[str, Any]
    ) -> None: ...


def line(kind: str, fields: dict[str, Any]) -> str:
    """The terminal's one line for a notice not delivered."""
    url = fields.get("url", "?")
    if kind == "notify_gave_up":
        sending = fields.get("sending")
        pending = len(fields.get("pending", ())) + (1 if sending else 0)
        return f"rig: notify: gave up on {url} at the end: {pending} notice(s) not delivered"
    if kind == "notify_dropped":
        return f"rig: notify: queue full for {url}: dropped '{fields.get('title', '')}'"
    return (
        f"rig: notify: '{fields.get('event', '')}' to {url} failed after"
        f" {fields.get('attempt', '?')} tries: {fields.get('error', '')}"
    )


class Told:
    """The sender's log callable (rig/notify/sender.py: `LogWrite`): every record to the run
    log; what was not delivered also to `say` (the progress display's message line) and to the
    store as an event."""

    def __init__(
        self, log: Callable[..., None], say: Callable[[str], None], store: EventQueue
    ) -> None:
        self.log, self.say, self.store = log, say, store

    def write(self, kind: str, **fields: Any) -> None:
        self.log(kind, **fields)
        if kind not in SHOWN or (kind == "notify_failed" and fields.get("retry")):
            return
        self.say(line(kind, fields))
        # the wall time too: an event's host_ns is the monotonic clock, no time to show
        self.store.queue_event(None, time.monotonic_ns(), kind, {**fields, "at": time.time()})
