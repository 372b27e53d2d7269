"""The pages a call dirties, so that the daemon's next spare copies them before its call comes.

A forked child shares the daemon's memory copy-on-write, and CPython writes to every object
it touches (its reference count), so a call's first touch of each shared page costs a page
fault and a copy: measured here, 600 to 1,300 pages and about 3 ms of a hook call, on the
caller's clock. So a child that has answered its client reads which of the daemon's private
writable pages it now holds a copy of its own (``/proc/self/pagemap``: present and
exclusively mapped) and sends that set to the daemon; the daemon keeps the latest set, and
each new spare, while it waits, asks the kernel to make those copies at once
(``madvise(MADV_POPULATE_WRITE)``, Linux 5.14 and later), a chunk at a time, stopping the
moment its call arrives. The contents of memory never change (the call only faults pages in
writable); only ranges the spare itself holds as private writable memory are touched; where
the kernel lacks the call, or ``/proc`` cannot be read, nothing is done and calls are as fast
as before. The copies cost the same CPU as the faults they replace, moved off the caller's
clock.

The same report names the ledger the call had open, and the next spare opens it while it
waits (``ledger.fastpath.open_ahead``; docs/daemon.md, "The ledger opened ahead").
"""

from __future__ import annotations

import array
import bisect
import os
from collections.abc import Callable

#: ``madvise`` advice: fault the range in writable (copying shared pages), contents unchanged.
MADV_POPULATE_WRITE = 23
PAGE = os.sysconf("SC_PAGE_SIZE")
#: Pages asked for at once by a waiting spare between two looks at its channel.
CHUNK_PAGES = 64
#: The most runs a set holds (a larger one is cut: the rest is faulted in as before).
MAX_RUNS = 4096
#: One spare in this many learns (copies nothing; its call reports what it dirtied).
LEARN_EVERY = 16


def private_writable(maps: str) -> list[tuple[int, int]]:
    """The (start, end) addresses of each private writable mapping in ``maps`` (the text of
    ``/proc/PID/maps``)."""
    ranges = []
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] == "rw-p":
            start, _, end = fields[0].partition("-")
            ranges.append((int(start, 16), int(end, 16)))
    return ranges


def _own_ranges() -> list[tuple[int, int]]:
    with open("/proc/self/maps") as fh:
        return private_writable(fh.read())


#: Each entry's top byte (bits 56-63) mapped to b"1" when bit 63 (present) and bit 56
#: (exclusively mapped) are both set: the scan runs in C, not a Python loop per page.
_OWN = bytes(0x31 if byte & 0x81 == 0x81 else 0x30 for byte in range(256))


def dirtied() -> bytes:
    """This process's own copies among its private writable pages, as runs (first page
    number, count) packed as unsigned 64-bit pairs; b"" when ``/proc`` cannot say."""
    runs = array.array("Q")
    try:
        ranges = _own_ranges()
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError:
        return b""
    try:
        for start, end in ranges:
            first, pages = start // PAGE, (end - start) // PAGE
            entries = os.pread(fd, pages * 8, first * 8)
            marks = entries[7::8].translate(_OWN)  # little-endian: byte 7 is the top one
            at = marks.find(b"1")
            while at >= 0 and len(runs) < 2 * MAX_RUNS:
                stop = marks.find(b"0", at)
                stop = len(marks) if stop < 0 else stop
                runs.extend((first + at, stop - at))
                at = marks.find(b"1", stop)
    except (OSError, ValueError):
        return b""
    finally:
        os.close(fd)
    return runs.tobytes()


def report(learn: bool) -> bytes:
    """What an ended child tells the daemon: the ledger it had open (an SQLite file, or else
    the PostgreSQL ledger it opened: the next spare opens it ahead,
    ``ledger.fastpath.open_ahead``, ``ledger.pg_ahead.connect_ahead``), whether it took one
    opened ahead, the state of the server session it was lent (``ledger.pg_lent.state``),
    and, when ``learn``, the pages it dirtied."""
    from onstation.ledger import pg_ahead, pg_lent
    from onstation.ledger.fastpath import open_ledger_of, took_ahead

    ledger = os.fsencode(open_ledger_of() or pg_ahead.last_used() or "")
    ledger = ledger if len(ledger) < 4096 else b""
    took = b"1" if took_ahead() or pg_ahead.took_ahead() else b"0"
    lent = pg_lent.state()
    return (len(ledger).to_bytes(2, "big") + ledger + took + lent
            + (dirtied() if learn else b""))  # fmt: skip


def environment(items: list[bytes]) -> dict[str, str]:
    """A caller's environment (``NAME=VALUE`` items) as text."""
    pairs = (item.split(b"=", 1) for item in items if b"=" in item)
    return {os.fsdecode(name): os.fsdecode(value) for name, value in pairs}


def named_postgres(items: list[bytes]) -> tuple[str, dict[str, str]] | None:
    """The PostgreSQL ledger a caller's environment names (``ONSTATION_DB``), with that
    environment: the next spare connects to it ahead under it (``ledger.pg_ahead``)."""
    environ = environment(items)
    url = environ.get("ONSTATION_DB", "")
    return (url, environ) if is_postgres(url) else None


def is_postgres(url: str) -> bool:
    """Whether a ledger URL names a PostgreSQL ledger."""
    return url.lower().startswith(("postgresql://", "postgres://"))


def named_ledger(items: list[bytes]) -> str | None:
    """The SQLite ledger a caller's environment (``NAME=VALUE`` items) names
    (``ONSTATION_DB``, else the default file under ``XDG_STATE_HOME`` or ``HOME``) when it is
    an absolute path to an existing file: the next spare's guess, known at the hand-over (a
    child's report, which names what it had open, comes only after its call)."""
    environ = environment(items)
    given = environ.get("ONSTATION_DB", "")
    if given.lower().startswith("sqlite:"):
        given = given[len("sqlite:") :].removeprefix("//")
    if not given:
        base = environ.get("XDG_STATE_HOME", "")
        home = environ.get("HOME", "")
        base = base or (os.path.join(home, ".local", "state") if home else "")
        given = os.path.join(base, "onstation", "ledger.db") if base else ""
    if "://" in given or not os.path.isabs(given) or not os.path.isfile(given):
        return None
    return given


def read_report(data: bytes) -> tuple[str | None, list[tuple[int, int]] | None, bool, bytes]:
    """(the ledger, the pages' runs, whether it took a ledger opened ahead, what it said of
    the server session it was lent) of :func:`report`'s bytes; None (False, b"") for what it
    left out."""
    size = int.from_bytes(data[:2], "big")
    if len(data) < 4 + size:
        return None, None, False, b""
    ledger = os.fsdecode(data[2 : 2 + size]) or None
    took = data[2 + size : 3 + size] == b"1"
    lent = data[3 + size : 4 + size]
    rest = data[4 + size :]
    return ledger, decode(rest) if rest else None, took, lent


def decode(data: bytes) -> list[tuple[int, int]]:
    """The runs of :func:`dirtied`'s bytes (a malformed tail is dropped)."""
    values = array.array("Q")
    values.frombytes(data[: len(data) - len(data) % 16][: 16 * MAX_RUNS])
    return [(values[i], values[i + 1]) for i in range(0, len(values), 2)]


class Prefault:
    """A spare's copying of the pages its call will likely write, a chunk at a time."""

    def __init__(self, runs: list[tuple[int, int]]) -> None:
        self._madvise = _madvise()
        self._chunks: list[tuple[int, int]] = []
        if self._madvise is None or not runs:
            return
        try:
            ranges = _own_ranges()
        except OSError:
            return
        ranges.sort()
        lows = [low for low, _high in ranges]
        for first, count in runs:
            start, end = first * PAGE, (first + count) * PAGE
            # Only memory this process holds private and writable: the ranges that overlap.
            i = max(0, bisect.bisect_right(lows, start) - 1)
            while i < len(ranges) and ranges[i][0] < end:
                a, b = max(start, ranges[i][0]), min(end, ranges[i][1])
                while a < b:
                    step = min(b, a + CHUNK_PAGES * PAGE)
                    self._chunks.append((a, step - a))
                    a = step
                i += 1
        self._chunks.reverse()

    @property
    def done(self) -> bool:
        """Whether every chunk was asked for (or the kernel said no)."""
        return not self._chunks

    def step(self) -> None:
        """Ask for the next chunk; a kernel without the call ends the copying."""
        if not self._chunks or self._madvise is None:
            self._chunks = []
            return
        address, length = self._chunks.pop()
        if self._madvise(address, length, MADV_POPULATE_WRITE) != 0:
            import ctypes

            if ctypes.get_errno() not in (0, 12):  # ENOMEM: a range gone since; go on
                self._chunks = []


def _madvise() -> Callable[[int, int, int], int] | None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.madvise
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    call.restype = ctypes.c_int
    return call
