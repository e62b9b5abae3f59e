"""Line-level access to the relay board for tests: the protocol's conformance examples, noise,
watchdog trips. The production driver opens and identifies the board, then stands aside
(`RelayBoard.stand_aside`) while a `RawSession` sends lines as given and reads every line the
board sends, in order; the driver re-reads the board when the session ends."""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable, Iterator

from rig.errors import PowerTimeoutError
from rig.power.relay import RelayBoard, frame, parse_line


class RawSession:
    def __init__(self) -> None:
        self._write: Callable[[bytes], None] | None = None
        self._lines: queue.Queue[tuple[bytes, int]] = queue.Queue()

    def attach(self, write: Callable[[bytes], None]) -> None:
        """The writer the driver lends while it stands aside."""
        self._write = write

    def receive(self, raw: bytes, rx_ns: int) -> None:
        """A line from the board (the driver's reader thread calls this)."""
        self._lines.put((raw, rx_ns))

    def send(self, body: str) -> None:
        """Send `body` with its `*CRC` and newline (`frame`)."""
        self.send_bytes(frame(body))

    def send_bytes(self, data: bytes) -> None:
        """Send `data` exactly as given (framing errors, noise, partial lines)."""
        assert self._write is not None, "not attached to a board"
        self._write(data)

    def read_raw(self, timeout_s: float = 2.0) -> bytes:
        """The next non-empty line from the board, without its newline, unchecked."""
        try:
            raw, _ = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise PowerTimeoutError(f"no line from the relay board within {timeout_s} s") from None
        return raw

    def read_line(self, timeout_s: float = 2.0) -> str:
        """The next line with its checksum verified and `*CRC` removed; `BadLine` if it fails."""
        raw = self.read_raw(timeout_s)
        parse_line(raw)
        return raw.removesuffix(b"\r").decode("ascii").rpartition("*")[0]

    def drain(self, quiet_s: float = 0.2) -> list[bytes]:
        """Every line that arrives until none did for `quiet_s`."""
        lines = []
        while True:
            try:
                lines.append(self.read_raw(quiet_s))
            except PowerTimeoutError:
                return lines


@contextlib.contextmanager
def raw_session(board: RelayBoard) -> Iterator[RawSession]:
    """The board's line while the block runs; the driver takes it back afterwards."""
    session = RawSession()
    with board.stand_aside(session.receive) as write:
        session.attach(write)
        yield session
