"""Round trips counted in libpq's own trace of a connection (issue 14's PostgreSQL tests)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def tracing(conn: Any) -> Iterator[list[str]]:
    """libpq's trace of the psycopg connection ``conn`` while inside (without timestamps, in
    regress mode); the list yielded holds its text once the block is left."""
    from psycopg import pq

    traced: list[str] = []
    fd, name = tempfile.mkstemp(prefix="onstation-libpq-trace-")
    try:
        conn.pgconn.trace(fd)
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield traced
        finally:
            conn.pgconn.untrace()
        traced.append(Path(name).read_text())
    finally:
        os.close(fd)
        os.unlink(name)


def waits(trace: str) -> int:
    """The client's waits for the server in a libpq trace (``Trace.REGRESS_MODE``): each time
    an answer is received after the client sent something, it had waited for it."""
    count, last = 0, None
    for line in trace.splitlines():
        direction = line.split("\t", 1)[0]
        if direction == "B" and last == "F":
            count += 1
        last = direction
    return count
