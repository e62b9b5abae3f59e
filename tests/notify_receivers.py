"""Real notification receivers on loopback for the notification tests: an SMTP server
(aiosmtpd), an HTTP endpoint that keeps every JSON post, and one that accepts a connection and
never answers (a receiver that hangs)."""

from __future__ import annotations

import email
import email.message
import email.policy
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Mailbox:
    messages: list[email.message.EmailMessage] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(parsed, email.message.EmailMessage)
        self.messages.append(parsed)
        return "250 OK"

    def subjects(self) -> list[str]:
        return [str(m["Subject"]) for m in self.messages]

    def body(self, subject_part: str) -> str:
        for m in self.messages:
            if subject_part in str(m["Subject"]):
                part = m.get_body(("plain", "html"))
                return part.get_content() if part is not None else ""
        raise KeyError(subject_part)


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    """An SMTP server on 127.0.0.1 that keeps every message; yields (mailbox, port)."""
    from aiosmtpd.controller import Controller

    box = Mailbox()
    with socket.socket() as probe:  # a free port (the controller's own check cannot use 0)
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


@contextmanager
def json_endpoint() -> Iterator[tuple[list[dict[str, Any]], int]]:
    """An HTTP endpoint on 127.0.0.1 that keeps every JSON body posted; yields (posts, port)."""
    posts: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            posts.append(json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="json-endpoint", daemon=True)
    thread.start()
    try:
        yield posts, int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class Hang:
    """What the hanging receiver saw: when each connection came (wall clock), and whether it
    ever answered one (it never does)."""

    port: int = 0
    accepted: list[float] = field(default_factory=list)
    answered: int = 0


@contextmanager
def hanging_receiver() -> Iterator[Hang]:
    """Accepts connections and never answers any: each stays open, unanswered, until the
    receiver is closed (longer than the notifier's timeouts and any campaign of the tests)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    hang = Hang(port=listener.getsockname()[1])
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            hang.accepted.append(time.time())
            held.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=serve, name="hanging-receiver", daemon=True)
    thread.start()
    try:
        yield hang
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
