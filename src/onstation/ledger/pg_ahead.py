"""A PostgreSQL ledger connected ahead of its call, by a daemon's waiting spare.

Every call a daemon's child runs on a PostgreSQL ledger opens its own server connection:
about 4 ms here (the connection, the schema's search path, its version), a fifth of such a
hook call. So the spare a daemon forks ahead of the next call, while it waits, connects to
the ledger the last call used (docs/daemon.md, "The ledger opened ahead"), and the call
takes that connection instead of making one. The connection is the spare's own, made after
its fork, as an SQLite ledger opened ahead is. (Once the daemon holds a server session for
that ledger, ``ledger.pg_lent``, its spares connect ahead no more: the call is lent the
daemon's, and takes it here, by the same rules.)

A call must never write through a connection it could not have made itself. So the spare
connects under the very environment the last call brought (libpq reads the ``PG*``
variables, ``~/.pgpass``, the service file and certificates under ``HOME``, Kerberos' and
OpenSSL's settings) and never creates a schema; and the call takes the connection only for
the same URL and the same such environment, only in the process that made it, only while
it is younger than :data:`MAX_AGE`, and only after a round trip shows it alive (the hook
fast path's first statement is that round trip: a connection failing it is closed). Anything
else, and the call connects as it always did. The spare waits for the server at most
:data:`CONNECT_TIMEOUT` seconds: a call that arrives meanwhile waits for it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onstation.ledger.pg_backend import PostgresBackend

#: Seconds a connection made ahead may wait for its call; an older one is closed instead
#: (credentials or server settings may have changed since it was made).
MAX_AGE = 300.0
#: The environment variables libpq reads when it connects (by prefix), and ``HOME``.
_LIBPQ_PREFIXES = ("PG", "KRB5", "SSL_CERT_", "OPENSSL_")
#: Seconds a spare waits for the server (libpq's least): a call that arrives meanwhile
#: waits for the spare, and a guess must not hold it up as long as a call's own connection.
CONNECT_TIMEOUT = 2

#: The connection made ahead: (URL, libpq environment) -> (backend, pid, monotonic time).
#: A process-wide resource, as ``ledger.fastpath``'s SQLite one: empty in every process but
#: a daemon's spare and the call it becomes.
_AHEAD: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[PostgresBackend, int, float]] = {}
#: The PostgreSQL ledger this process last opened (what a daemon's child reports): one item.
_USED: list[str] = []


def _read_by_libpq(name: str) -> bool:
    return name.startswith(_LIBPQ_PREFIXES) or name == "HOME"


def libpq_environment(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What of ``environ`` a libpq connection depends on, sorted."""
    return tuple(sorted((k, v) for k, v in environ.items() if _read_by_libpq(k)))


def used(url: str) -> None:
    """Note that this process opens the PostgreSQL ledger ``url``."""
    _USED[:] = [url]


def last_used() -> str | None:
    """The PostgreSQL ledger this process last opened, or None."""
    return _USED[0] if _USED else None


def connect_ahead(
    url: str, environ: Mapping[str, str], warm: Callable[[PostgresBackend], None] | None = None
) -> bool:
    """Connect to the ledger ``url`` as a process with ``environ`` would (its libpq
    variables, for the time of the connection), for a call to come; whether a connection is
    now held. Never creates anything: a missing or unmigrated ledger is not connected to.
    ``warm`` then runs on it (the hook fast path's reads: ``relief.hotpath_pg.warm``); a
    connection it fails on is closed, not held."""
    key = (url, libpq_environment(environ))
    if key in _AHEAD:
        return True
    backend = connect_as(url, environ, warm)
    if backend is None:
        return False
    _AHEAD[key] = (backend, os.getpid(), time.monotonic())
    return True


def connect_as(
    url: str, environ: Mapping[str, str], warm: Callable[[PostgresBackend], None] | None = None
) -> PostgresBackend | None:
    """A connection to the migrated ledger ``url`` made as a process with ``environ`` would
    make it (its libpq variables, for the time of the connection; nothing created), warmed
    by ``warm`` when given; None when it cannot be made or warmed (it is then closed)."""
    from onstation.ledger.pg_backend import PostgresBackend

    saved = dict(os.environ)
    try:
        for name in [k for k in os.environ if _read_by_libpq(k)]:
            del os.environ[name]
        os.environ.update(libpq_environment(environ))
        backend = PostgresBackend(url, require_migrated=True, create=False,
                                  connect_timeout=CONNECT_TIMEOUT)  # fmt: skip
    except Exception:  # anything at all: the call connects itself
        return None
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if warm is not None:
        try:
            warm(backend)
        except Exception:  # anything at all: the call connects itself
            with contextlib.suppress(Exception):
                backend.close()
            return None
    return backend


def hold(url: str, environ: Mapping[str, str], backend: PostgresBackend, made: float) -> None:
    """Hold ``backend`` (made at monotonic time ``made``) for this process's call to take as
    one made ahead: a daemon's child holds so the server session its daemon lent it
    (``ledger.pg_lent``)."""
    _AHEAD[(url, libpq_environment(environ))] = (backend, os.getpid(), made)


def take(url: str, environ: Mapping[str, str], *, check: bool = True) -> PostgresBackend | None:
    """The connection made ahead for ``url`` under the libpq part of ``environ`` (once), or
    None: none was made for them, it was made in another process (a fork), it is older than
    :data:`MAX_AGE`, or (``check``) the server no longer answers on it (then it is closed).
    Unchecked, the caller's first statement tells instead, and the caller closes the
    connection if it fails (the hook fast path: a round trip saved)."""
    entry = _AHEAD.pop((url, libpq_environment(environ)), None)
    if entry is None:
        return None
    backend, pid, made = entry
    if pid != os.getpid():
        return None  # a forked copy shares the server session: never used, never closed
    if time.monotonic() - made > MAX_AGE or (check and not backend.answers()):
        with contextlib.suppress(Exception):
            backend.close()
        return None
    _TAKEN.append(url)
    return backend


#: The ledgers this process took connected ahead (what a daemon's child reports).
_TAKEN: list[str] = []


def took_ahead() -> bool:
    """Whether this process took a connection a daemon's spare made ahead."""
    return bool(_TAKEN)


def held() -> int:
    """How many connections made ahead this process holds (none: nothing to look up)."""
    return len(_AHEAD)
