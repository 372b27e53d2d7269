"""Holds a benchmark's process and its local PostgreSQL server sessions on one CPU.

A round trip to a server on the same machine takes one of two times, by where the scheduler
runs the server session against the client: on the client's own CPU (a context switch, about
27 us on this machine for ``SELECT 1``) or on the other (a cross-CPU wake-up, about 62 us).
A session keeps its placement for seconds at a time, so two connections measured side by
side, alternating, still differ by 35 us a round trip whatever they do: in one run the same
read took 0.09 ms on two ledgers and 0.16 ms on the two others, in the next run on other
ones. A benchmark that compares connections (a ledger's history sizes, the library against
bare SQL) holds them all on one CPU, so that each round trip costs what it costs on every
connection alike, and says so in its output.

Only a server on this machine (a Unix socket, or a loopback address) can be held, and only
where the OS lets this process set the server sessions' affinity (its own user's processes,
or root); elsewhere the benchmark runs as it is and prints why.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from typing import Any

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def server_session(conn: Any) -> tuple[str, int]:
    """(host, server process id) of a psycopg connection."""
    return conn.info.host, conn.info.backend_pid


def ledger_session(ledger: Any) -> tuple[str, int]:
    """(host, server process id) of a PostgreSQL ledger's connection."""
    return server_session(ledger.backend._conn)


@contextlib.contextmanager
def one_cpu(sessions: Iterable[tuple[str, int]]) -> Iterator[str]:
    """While inside, this process and the given server sessions run on one CPU (the last
    this process may use). Yields a line saying what was done, or why nothing was."""
    sessions = list(sessions)
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        yield "one CPU only: every round trip already runs on it"
        return
    remote = sorted({host for host, _ in sessions if not _is_local(host)})
    if remote:
        yield f"server sessions not held on one CPU: server on {', '.join(remote)}"
        return
    cpu = max(allowed)
    held: dict[int, set[int]] = {}  # each session's CPUs before
    try:
        for _, pid in sessions:
            before = os.sched_getaffinity(pid)
            os.sched_setaffinity(pid, {cpu})
            held[pid] = before
        os.sched_setaffinity(0, {cpu})
    except OSError as exc:
        _release(held)
        yield f"server sessions not held on one CPU: {exc.strerror or exc}"
        return
    try:
        yield (
            f"this process and its {len(sessions)} server sessions held on CPU {cpu}, so that "
            "a round trip costs the same on every connection (bench/_one_cpu.py)"
        )
    finally:
        os.sched_setaffinity(0, allowed)
        _release(held)


def _is_local(host: str) -> bool:
    return host.startswith("/") or host in _LOCAL_HOSTS


def _release(held: dict[int, set[int]]) -> None:
    for pid, cpus in held.items():
        # A session that ended meanwhile has nothing left to release.
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, cpus)
