"""PostgreSQL server sessions a daemon holds and lends to its children, one call at a time.

A call a daemon's child ran on a PostgreSQL ledger used a server session of its own, made by
the spare while it waited (``ledger.pg_ahead``): a new server process for every call, which
costs the server its start and authentication, and which starts with none of the ledger's
tables and indexes in its catalog caches (the admission's one statement took 0.8 ms to plan
on a new session and 0.14 ms on a warm one). On two cores that work ran beside the call it
was made for, or beside the next one. So the daemon itself now holds the connection and
lends it to the child that runs a call (issue 14: "a per-user local daemon that holds the
ledger connection"); the server session, and what its server process has cached, outlives
the call.

The rules (docs/daemon.md, "Server sessions lent"):

- The connection is made as a spare made its own (:func:`pg_ahead.connect_as`): under the
  libpq environment a call of that ledger brought, to a migrated ledger only, nothing
  created; and a child takes it (:func:`pg_ahead.take`) only for the same URL and the same
  libpq environment. A call never writes through a connection it could not have made.
- It is never encrypted. TLS and GSSAPI keep the session's cipher state in the process that
  uses it: a child would advance it without the daemon's copy knowing. A connection that
  turns out encrypted is closed, and that ledger's calls go on connecting ahead as before
  (the daemon does not try it again: its URL and environment asked for the encryption).
- The daemon never touches a lent connection; exactly one child holds it. It comes back with
  the child's report, sent after its client has the outcome: clean (open, no transaction,
  not in pipeline mode) or not. Anything but clean, and a child that ended without a report
  (killed, crashed), and the daemon discards it: it shuts the socket down first, so that the
  server sees the stream end and rolls back whatever the child left open, with nothing
  appended to a message the child may have left half-written.
- Nothing of the session is changed by a call: the ledger sets its schema's search path
  once, at the connection (its only session setting; every other is ``SET LOCAL``), and a
  lent connection never prepares statements (``prepare_threshold`` None: a statement a
  child prepared would be unknown to the daemon's copy, and the next child's prepare of the
  same name would fail). The statements the warm-up prepares by name when the daemon makes
  the connection (``relief.hotpath_pg.warm``, SQL ``PREPARE``, which psycopg does not track)
  are the session's from the start; children only EXECUTE them.
- A connection older than :data:`pg_ahead.MAX_AGE` is not lent again; it is closed and made
  anew. At most :data:`MOST_PER_LEDGER` are held per ledger and environment: a call that
  finds none free connects itself, and the daemon makes one more at its next quiet moment.
- The daemon makes a connection only at a quiet moment (no call in flight), and only for a
  ledger a call has just used; one it could not make is not tried again for
  :data:`RETRY_AFTER` seconds (the daemon waits for the server at most
  :data:`pg_ahead.CONNECT_TIMEOUT` seconds, while a call that arrives waits).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onstation.ledger import pg_ahead

if TYPE_CHECKING:
    from onstation.ledger.pg_backend import PostgresBackend

#: The most server sessions held for one ledger and libpq environment.
MOST_PER_LEDGER = 4
#: The most ledgers (URL and libpq environment) sessions are held for.
MOST_LEDGERS = 4
#: Seconds before a ledger whose connection could not be made (or was encrypted) is tried
#: again.
RETRY_AFTER = 60.0

_Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class _Held:
    """One connection the daemon holds: for which ledger, made when, lent to whom."""

    key: _Key
    environ: dict[str, str]
    backend: PostgresBackend
    made: float
    lent_to: int | None = None


def _encrypted(backend: PostgresBackend) -> bool:
    pgconn = backend._conn.pgconn
    return bool(pgconn.ssl_in_use or pgconn.used_gssapi)


def _discard(backend: PostgresBackend, *, clean: bool) -> None:
    """End a held connection. One not known clean has its socket shut down first: the server
    reads the end of the stream and rolls back what was left open, and no terminate message
    is appended to whatever a child may have left half-sent."""
    if not clean:
        with (
            contextlib.suppress(Exception),
            socket.socket(fileno=os.dup(backend._conn.pgconn.socket)) as sock,
        ):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        backend.close()


class LentSessions:
    """The daemon's held connections (its side), and what a child does with the one lent to
    it (:meth:`adopt`, :func:`state`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held: dict[int, _Held] = {}
        self._next = 0
        #: Ledgers a call used that want one more connection, with the environment to make
        #: it under.
        self._wanted: dict[_Key, tuple[str, dict[str, str]]] = {}
        #: Ledgers not to try again before a monotonic time.
        self._refused: dict[_Key, float] = {}
        #: Calls that were lent a connection.
        self.lent = 0

    @staticmethod
    def key(url: str, environ: Mapping[str, str]) -> _Key:
        return (url, pg_ahead.libpq_environment(environ))

    # -- the daemon's side --------------------------------------------------------------------

    def slots(self) -> frozenset[int]:
        """The connections held now (a spare forked now has them all)."""
        return frozenset(self._held)

    def fds(self) -> list[int]:
        """Every held connection's socket (a spare keeps them open)."""
        found = []
        for held in self._held.values():
            with contextlib.suppress(Exception):
                found.append(held.backend._conn.pgconn.socket)
        return found

    def has(self, url: str, environ: Mapping[str, str]) -> bool:
        """Whether a connection is held for this ledger and environment (lent or not): a
        spare then connects to it ahead no more."""
        key = self.key(url, environ)
        return any(held.key == key for held in self._held.values())

    def want(self, url: str, environ: Mapping[str, str]) -> None:
        """A call used this ledger under this environment: hold a connection for it, made at
        the daemon's next quiet moment, unless one is held and free already."""
        key = self.key(url, environ)
        if self._refused.get(key, 0.0) > self._clock():
            return
        mine = [held for held in self._held.values() if held.key == key]
        if any(held.lent_to is None for held in mine) or len(mine) >= MOST_PER_LEDGER:
            return
        if not mine and len({held.key for held in self._held.values()}) >= MOST_LEDGERS:
            return
        self._wanted[key] = (url, dict(environ))

    def wanted(self) -> bool:
        return bool(self._wanted)

    def make_wanted(self, warm: Callable[[PostgresBackend], None] | None = None) -> None:
        """Make the connections wanted (blocking: called when no call is in flight)."""
        while self._wanted:
            key, (url, environ) = self._wanted.popitem()
            backend = pg_ahead.connect_as(url, environ, warm)
            if backend is not None and _encrypted(backend):
                # Its URL and environment ask for encryption: so will the next connection.
                _discard(backend, clean=True)
                self._refused[key] = math.inf
                continue
            if backend is None:
                self._refused[key] = self._clock() + RETRY_AFTER
                continue
            backend._conn.prepare_threshold = None
            self._held[self._next] = _Held(key, environ, backend, self._clock())
            self._next += 1

    def lend(
        self, url: str, environ: Mapping[str, str], pid: int, inherited: frozenset[int]
    ) -> int | None:
        """A free connection for this ledger and environment, lent to child ``pid`` (which
        must have been forked holding it: ``inherited``); None when there is none (the call
        connects itself, and one more is wanted)."""
        key = self.key(url, environ)
        now = self._clock()
        for slot, held in list(self._held.items()):
            if held.key != key or held.lent_to is not None:
                continue
            if now - held.made > pg_ahead.MAX_AGE:
                del self._held[slot]
                _discard(held.backend, clean=True)
                continue
            if slot in inherited:
                held.lent_to = pid
                self.lent += 1
                return slot
        self.want(url, environ)
        return None

    def returned(self, pid: int, state: bytes) -> None:
        """Child ``pid`` ended; ``state`` is what its report said of the connection lent to it
        (:func:`state`; empty: no report). Clean, it is free again; else it is discarded."""
        for slot, held in list(self._held.items()):
            if held.lent_to != pid:
                continue
            if state == b"c":
                held.lent_to = None
            else:
                del self._held[slot]
                _discard(held.backend, clean=False)
                self.want(held.key[0], held.environ)

    def close(self) -> None:
        """End every held connection (the daemon stops; none is lent by then)."""
        for held in self._held.values():
            _discard(held.backend, clean=held.lent_to is None)
        self._held.clear()

    # -- the child's side ---------------------------------------------------------------------

    def adopt(self, slot: int) -> None:
        """In the child the daemon lent ``slot`` to: hold its connection for the call to take
        (:func:`pg_ahead.take`), and remember it for :func:`state`."""
        held = self._held.get(slot)
        if held is None:
            return
        held.backend.lent = True
        pg_ahead.hold(held.key[0], held.environ, held.backend, held.made)
        _LENT[:] = [held.backend]


#: The connection this process (a daemon's child) was lent, if any.
_LENT: list[PostgresBackend] = []


def state() -> bytes:
    """What a child says of the connection it was lent: ``c`` clean (open, no transaction,
    not in pipeline mode; also when the call never took it), ``x`` not, ``-`` none lent."""
    if not _LENT:
        return b"-"
    conn = _LENT[0]._conn
    try:
        from psycopg import pq

        pgconn = conn.pgconn
        clean = (
            not conn.closed
            and pgconn.status == pq.ConnStatus.OK
            and pgconn.transaction_status == pq.TransactionStatus.IDLE
            and pgconn.pipeline_status == pq.PipelineStatus.OFF
        )
    except Exception:
        clean = False
    return b"c" if clean else b"x"
