"""One connection to the central database, and the query helpers the store's parts share.

Connections carry TCP keepalives and a user timeout, so a cut network link ends a statement with
an error within seconds instead of hanging it; the server's end of the session gets the same
(SERVER_LINK_SETTINGS), so a session whose client vanished mid-transaction is ended within
seconds too, instead of holding its row locks (and the keys it inserted) while the server's TCP
retransmits for many minutes: the client's next session would wait on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from rig.errors import UserError

Row = dict[str, Any]

# a link that stops answering ends the statement in seconds (libpq keepalives, TCP_USER_TIMEOUT)
LINK_OPTIONS = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}


class CentralUnavailable(UserError):
    """The central database cannot be reached (link down, server stopped, wrong address)."""


# the same on the server's side of each session (settings any role may set for its session)
SERVER_LINK_SETTINGS = (
    "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3"
    " -c tcp_user_timeout=10000"
)


def with_link_options(dsn: str) -> str:
    """The DSN with the link options it does not set itself (server-side settings it gives in
    `options` come after ours, so they win)."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as error:
        raise UserError(f"central database: not a libpq DSN ({error})") from error
    options = f"{SERVER_LINK_SETTINGS} {given.get('options') or ''}".strip()
    return make_conninfo("", **{**LINK_OPTIONS, **given, "options": options})


class CentralConnection:
    """One connection to the central database (the base of every part of the CentralStore)."""

    def __init__(self, dsn: str, *, autocommit: bool = False) -> None:
        self.dsn = dsn
        try:
            self._db = psycopg.connect(
                with_link_options(dsn), row_factory=dict_row, autocommit=autocommit
            )
        except psycopg.OperationalError as error:
            raise CentralUnavailable(str(error).strip().splitlines()[0]) from error

    def close(self) -> None:
        self._db.close()

    @property
    def closed(self) -> bool:
        """Closed, or broken by a lost link: open a new one."""
        return bool(self._db.closed or self._db.broken)

    def reopened(self) -> Self:
        """A new connection to the same database (a reader whose own was closed since)."""
        return type(self)(self.dsn)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Row]]:
        with self._db.transaction():
            yield self._db

    def _all(
        self, query: str | sql.Composed, args: Sequence[Any] | dict[str, Any] = ()
    ) -> list[Row]:
        with self._db.cursor() as cur:
            cur.execute(query, args)
            return cur.fetchall() if cur.description else []

    def _one(self, query: str, args: Sequence[Any] | dict[str, Any] = ()) -> Row | None:
        rows = self._all(query, args)
        return rows[0] if rows else None

    def _read(
        self, query: str | sql.Composed, args: Sequence[Any] | dict[str, Any] = ()
    ) -> list[Row]:
        """The rows of one query, its transaction ended (a reader holds no snapshot open)."""
        rows = self._all(query, args)
        self._commit()
        return rows

    def _commit(self) -> None:
        if not self._db.autocommit:
            self._db.commit()
