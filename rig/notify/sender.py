"""The sender: notifications leave the campaign's threads at once and are sent by background
threads, one per URL, so a receiver that is down or hangs never stops or slows a cut, nor delays
what the other URLs are sent.

- `notify_event` only appends to each URL's bounded queue (never waits on the network); when a
  queue is full its oldest notice is dropped, and the drop is logged;
- each URL's daemon thread sends its notices through Apprise, with a timeout per send and a few
  tries with growing pauses between them; every send and every failure goes to the run log;
- `close` gives the queues a few seconds (in all) to drain, then gives up (logged per URL): the
  campaign's end never waits on a receiver for longer than that.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

LogWrite = Callable[..., None]  # RunLog.write: (kind, **fields)

CAPACITY = 100  # notices waiting; beyond it the oldest is dropped
ATTEMPTS = 3  # tries per notice and URL
BACKOFF_S = 2.0  # pause before the second try; doubled before each further one
CONNECT_TIMEOUT_S = 5.0  # per send: Apprise's socket timeouts, set on every service
READ_TIMEOUT_S = 10.0
EXIT_WAIT_S = 5.0  # what `close` waits for the queue to drain
# Apprise spaces sends to one service (mail: 5.5 s); a campaign's end sends two or three
# notices at once, which would then miss the 5 s they get at exit, so the pause is capped at this
MAX_PAUSE_S = 1.0

# Apprise's notification types by how bad the event is
LEVELS = ("info", "success", "warning", "failure")


@dataclass(frozen=True)
class Notice:
    kind: str  # one of rig.notify.settings.EVENTS (or another name a caller gives)
    title: str
    body: str
    level: str = "info"  # LEVELS


@dataclass
class Service:
    """One URL's Apprise service, and the URL as logged (secrets masked by Apprise)."""

    send: Callable[[Notice], tuple[bool, str]]
    shown: str


def apprise_services(urls: Sequence[str], config: str = "") -> list[Service]:
    """One Apprise service per URL, those of the Apprise configuration file `config` too (so
    each succeeds or fails on its own), with the sender's timeouts. The URLs and the file were
    checked when the campaign file was read."""
    import apprise

    plugins: list[Any] = []
    for url in urls:
        plugin = apprise.Apprise.instantiate(url)
        if plugin is None:
            raise ValueError(f"not a notification URL: {url.split('://', 1)[0]}://...")
        plugins.append(plugin)
    if config:
        loaded = apprise.AppriseConfig()
        loaded.add(config)
        services_of_file = apprise.Apprise()
        services_of_file.add(loaded)
        plugins.extend(services_of_file)
    services = []
    for plugin in plugins:
        plugin.socket_connect_timeout = CONNECT_TIMEOUT_S
        plugin.socket_read_timeout = READ_TIMEOUT_S
        plugin.request_rate_per_sec = min(plugin.request_rate_per_sec, MAX_PAUSE_S)
        services.append(Service(_sender(plugin), plugin.url(privacy=True)))
    return services


def _sender(plugin: Any) -> Callable[[Notice], tuple[bool, str]]:
    import apprise

    def send(notice: Notice) -> tuple[bool, str]:
        with apprise.LogCapture(level=apprise.logging.WARNING) as captured:
            ok = bool(
                plugin.notify(
                    body=notice.body,
                    title=notice.title,
                    notify_type=notice.level,
                    body_format=apprise.NotifyFormat.TEXT,
                )
            )
            why = captured.getvalue().strip().splitlines()
        return ok, (why[-1] if why else "the service refused it")[:300]

    return send


class Notifier:
    """Notices in, sent by one background thread per URL; see the module's docstring."""

    def __init__(
        self,
        services: list[Service],
        log: LogWrite,
        *,
        capacity: int = CAPACITY,
        attempts: int = ATTEMPTS,
        backoff_s: float = BACKOFF_S,
        exit_wait_s: float = EXIT_WAIT_S,
    ) -> None:
        self.services = services
        self.log = log
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.exit_wait_s = exit_wait_s
        self.capacity = capacity
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._counts = threading.Lock()
        self.closing = threading.Event()
        self._lanes = [_Lane(self, service, i) for i, service in enumerate(services)]

    def notify_event(self, kind: str, title: str, body: str, level: str = "info") -> None:
        """Queue a notice for every URL; never waits on a receiver (any thread may call it)."""
        notice = Notice(kind, title, body, level if level in LEVELS else "info")
        for lane in self._lanes:
            lane.put(notice)

    def close(self) -> None:
        """Let the senders drain their queues for at most `exit_wait_s` in all, then give up on
        each URL still sending (logged)."""
        self.closing.set()
        for lane in self._lanes:
            lane.wake()
        deadline = time.monotonic() + self.exit_wait_s
        for lane in self._lanes:
            lane.thread.join(max(0.0, deadline - time.monotonic()))
        for lane in self._lanes:
            if lane.thread.is_alive():
                pending, busy = lane.abandon()
                self.log(
                    "notify_gave_up",
                    url=lane.service.shown,
                    waited_s=self.exit_wait_s,
                    sending=busy,
                    pending=pending,
                )

    def count(self, name: str) -> None:
        with self._counts:
            setattr(self, name, getattr(self, name) + 1)


class _Lane:
    """One URL's queue and the daemon thread that sends it."""

    def __init__(self, owner: Notifier, service: Service, index: int) -> None:
        self.owner, self.service = owner, service
        self._queue: deque[Notice] = deque()
        self._ready = threading.Condition()
        self._busy: Notice | None = None  # the notice being sent
        self.thread = threading.Thread(target=self._run, name=f"notify-sender-{index}", daemon=True)
        self.thread.start()

    def put(self, notice: Notice) -> None:
        dropped: Notice | None = None
        with self._ready:
            if len(self._queue) >= self.owner.capacity:
                dropped = self._queue.popleft()
                self.owner.count("dropped")
            self._queue.append(notice)
            self._ready.notify()
        if dropped is not None:
            self.owner.log(
                "notify_dropped",
                event=dropped.kind,
                title=dropped.title,
                url=self.service.shown,
                queue=self.owner.capacity,
            )

    def wake(self) -> None:
        with self._ready:
            self._ready.notify()

    def abandon(self) -> tuple[list[str], str | None]:
        """(kinds still queued, the kind being sent): the queue is emptied."""
        with self._ready:
            pending = [n.kind for n in self._queue]
            self._queue.clear()
            busy = self._busy.kind if self._busy is not None else None
        return pending, busy

    def _run(self) -> None:
        closing = self.owner.closing
        while True:
            with self._ready:
                while not self._queue and not closing.is_set():
                    self._ready.wait()
                if not self._queue:
                    return
                self._busy = notice = self._queue.popleft()
            self._deliver(notice)
            with self._ready:
                self._busy = None

    def _deliver(self, notice: Notice) -> None:
        owner, service = self.owner, self.service
        for attempt in range(1, owner.attempts + 1):
            try:
                ok, why = service.send(notice)
            except Exception as error:  # a plugin's bug must not end the sender
                ok, why = False, repr(error)[:300]
            # the thread that waited on the receiver: always this URL's sender, never a cycle's
            thread = threading.current_thread().name
            if ok:
                owner.count("sent")
                owner.log(
                    "notify_sent",
                    event=notice.kind,
                    url=service.shown,
                    attempt=attempt,
                    thread=thread,
                )
                return
            owner.count("failed")
            last = attempt == owner.attempts or owner.closing.is_set()
            owner.log(
                "notify_failed",
                event=notice.kind,
                url=service.shown,
                attempt=attempt,
                error=why,
                retry=not last,
                thread=thread,
            )
            if last:
                return
            owner.closing.wait(owner.backoff_s * 2 ** (attempt - 1))  # a close cuts it short
