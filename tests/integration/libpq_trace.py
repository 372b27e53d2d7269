"""Round trips counted in libpq's own trace of a connection (issue 14's PostgreSQL tests)."""

from __future__ import annotations


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
