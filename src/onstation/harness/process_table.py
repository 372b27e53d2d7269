"""The process table as each platform shows it: the readers behind process witnesses.

:mod:`onstation.harness.witness` compares what these readers say about a pid with what a
witness recorded. Two readers: ``proc`` (Linux: one ``/proc/PID`` directory descriptor per
read, so the facts of one read belong to one process; pidfds for existence) and ``psutil``
(every other platform psutil supports; imported on first use only, because hook entry points
import this module). Each reader counts start times in its own clock, and a witness records
which one it was read with.

Stdlib only on Linux; psutil elsewhere.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from onstation.core.errors import BadInput

# Hook hot path: typing costs import time on every tool call, so annotations stay
# unevaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

PROC: Final = "/proc"
BOOT_ID_PATH: Final = "/proc/sys/kernel/random/boot_id"

#: The readers (see the module docstring) and the one this platform uses by default.
PROC_READER: Final = "proc"
PSUTIL_READER: Final = "psutil"
READERS: Final = (PROC_READER, PSUTIL_READER)
DEFAULT_READER: Final = PROC_READER if sys.platform.startswith("linux") else PSUTIL_READER

#: The clocks a witness's start time is counted in: clock ticks since boot (field 22 of
#: ``/proc/PID/stat``; the ``proc`` reader), or microseconds since the epoch
#: (``psutil.Process.create_time``; the ``psutil`` reader).
CLOCK_TICKS: Final = "ticks"
CLOCK_EPOCH_US: Final = "epoch_us"
_READER_OF_CLOCK: Final = {CLOCK_TICKS: PROC_READER, CLOCK_EPOCH_US: PSUTIL_READER}

# Field 22 of /proc/PID/stat; fields after the comm's closing ")" start at field 3 (state).
_START_TICKS_FIELD: Final = 22
_FIRST_FIELD_AFTER_COMM: Final = 3
# A process that has exited but not been reaped (Z), or is being torn down (X, x).
_DEAD_STATES: Final = frozenset({"Z", "X", "x"})
# readlink appends this when the executable file was unlinked or replaced (an upgrade):
# still the same running image, so it is not a change of executable.
_DELETED_SUFFIX: Final = " (deleted)"
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

#: The environment variable a launched body carries its witness marker in (set by the
#: launcher, one random value per launch; inherited by the body's descendants).
MARKER_ENV: Final = "ONSTATION_WITNESS_MARKER"
_MARKER_PREFIX: Final = MARKER_ENV.encode("ascii") + b"="


def current_host() -> str:
    """This machine's host name, as ``socket.gethostname()`` reports it.

    ``os.uname().nodename`` is the same value on Linux and macOS (gethostname calls uname)
    and avoids importing :mod:`socket` on the hook path.
    """
    return os.uname().nodename


def read_boot_id() -> str | None:
    """The kernel's boot id (``/proc/sys/kernel/random/boot_id``), or None when unreadable."""
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as handle:
            value = handle.read().strip()
    except (OSError, ValueError):
        return None
    return value or None


def _parse_stat(text: str) -> tuple[str, int]:
    """(state, start ticks) from one ``/proc/PID/stat`` line; ValueError when malformed."""
    # comm is printed raw (up to 15 bytes, may hold spaces, parentheses, even newlines), so
    # only the LAST ")" reliably ends it; the fields after it never contain ")".
    close = text.rfind(")")
    if close < 0 or text.find("(") < 0 or text.find("(") > close:
        raise ValueError("stat line has no '(comm)' field")
    fields = text[close + 1 :].split()
    index = _START_TICKS_FIELD - _FIRST_FIELD_AFTER_COMM
    if len(fields) <= index:
        raise ValueError(f"stat line has {len(fields) + 2} fields, need {_START_TICKS_FIELD}")
    raw = fields[index]
    if not raw.isascii() or not raw.isdigit():
        raise ValueError(f"stat field {_START_TICKS_FIELD} is not a tick count: {raw!r}")
    return fields[0], int(raw)


def parse_stat_start_ticks(text: str) -> int:
    """Start time in clock ticks since boot (field 22) from a ``/proc/PID/stat`` line.

    Pure. Parses after the last ``)`` because the comm field may contain spaces or
    parentheses. ValueError when the line is malformed.
    """
    return _parse_stat(text)[1]


def parse_stat_parent(text: str) -> tuple[int, str]:
    """(parent pid, comm) from a ``/proc/PID/stat`` line (fields 4 and 2).

    Pure. The comm is what lies between the first ``(`` and the last ``)``. ValueError when
    the line is malformed.
    """
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        raise ValueError("stat line has no '(comm)' field")
    fields = text[close + 1 :].split()
    if len(fields) < 2 or not fields[1].isascii() or not fields[1].isdigit():
        raise ValueError("stat line has no parent pid (field 4)")
    return int(fields[1]), text[open_ + 1 : close]


def _strip_deleted(executable: str | None) -> str | None:
    if executable is not None and executable.endswith(_DELETED_SUFFIX):
        return executable[: -len(_DELETED_SUFFIX)]
    return executable


class _Snapshot:
    """What a reader said about one pid.

    ``state`` is a ``/proc`` state letter (``Z``/``X`` for an exited process; the psutil
    reader maps its zombie and dead statuses to them); ``start`` the start time in the
    reader's clock (None only for an exited process whose start time is gone);
    ``marker`` is the value of ``MARKER_ENV`` in the process's environment (None when it has
    none); ``marker_error`` says why the environment could not be read (None when it was, or
    when it was not asked for).
    """

    __slots__ = ("executable", "marker", "marker_error", "start", "state")

    def __init__(
        self,
        state: str,
        start: int | None,
        executable: str | None,
        marker: str | None = None,
        marker_error: str | None = None,
    ) -> None:
        self.state = state
        self.start = start
        self.executable = executable
        self.marker = marker
        self.marker_error = marker_error


#: How often, and how far apart, an empty environment is read again (at most 0.1 s in all).
_EMPTY_ENVIRON_RETRIES = 20
_EMPTY_ENVIRON_PAUSE = 0.005


def _read_environ(dfd: int) -> bytes:
    fd = os.open("environ", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _read_marker(dfd: int) -> str | None:
    """The value of ``MARKER_ENV`` in the environment behind ``/proc/PID`` (``dfd``).

    None when the process has no such variable (an exiting process or a kernel thread reads
    as an empty environment). OSError when it cannot be read: EACCES/EPERM for another
    user's or a non-dumpable process, ESRCH when the process is gone.
    """
    environ = _read_environ(dfd)
    if not environ:
        # A process caught inside execve (the launcher's Popen returns once the old image's
        # close-on-exec fds are closed, before the kernel sets up the new stack) reads as an
        # empty environment for a moment: read again, briefly, before calling it empty.
        for _ in range(_EMPTY_ENVIRON_RETRIES):
            time.sleep(_EMPTY_ENVIRON_PAUSE)
            environ = _read_environ(dfd)
            if environ:
                break
    for entry in environ.split(b"\0"):
        # The first entry wins, as getenv(3) would answer inside the process.
        if entry.startswith(_MARKER_PREFIX):
            return entry[len(_MARKER_PREFIX) :].decode("utf-8", "surrogateescape")
    return None


def _read_proc(pid: int, *, marker: bool = False) -> _Snapshot | None:
    """Read stat and exe of ``pid`` (and its marker when ``marker``); None when no such
    process. OSError when unreadable.

    All reads go through one open ``/proc/PID`` directory descriptor, which stays bound to
    the process it was opened for: if that process dies and the pid is reused between the
    reads, a later read fails (ESRCH) instead of describing the newcomer.
    """
    try:
        dfd = os.open(f"{PROC}/{pid}", _DIR_FLAGS)
    except (FileNotFoundError, ProcessLookupError):
        return None
    try:
        try:
            sfd = os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
            try:
                raw = os.read(sfd, 4096)
            finally:
                os.close(sfd)
        except (FileNotFoundError, ProcessLookupError):
            return None
        state, start_ticks = _parse_stat(raw.decode("utf-8", "surrogateescape"))
        if state in _DEAD_STATES:
            # Exited (not yet reaped, or being torn down): its exe and environ are gone and
            # reading them fails with ESRCH; the state alone says it is gone.
            return _Snapshot(state, start_ticks, None, None, None)
        try:
            executable: str | None = os.readlink("exe", dir_fd=dfd)
        except ProcessLookupError:
            return None
        except OSError:
            # EACCES/EPERM (another user's process) or ENOENT (kernel thread, or a process
            # whose memory is already torn down): unreadable, not absent.
            executable = None
        found: str | None = None
        marker_error: str | None = None
        if marker:
            try:
                found = _read_marker(dfd)
            except ProcessLookupError:
                return None
            except OSError as exc:
                marker_error = _describe(exc)
    finally:
        os.close(dfd)
    return _Snapshot(state, start_ticks, executable, found, marker_error)


def _pid_exists_by_pidfd(pid: int) -> bool | None:
    """Whether ``pid`` exists according to pidfd_open (True/False), None when unsupported.

    /proc can hide other users' processes (``hidepid``); pidfd_open needs no permission,
    so it tells "hidden" from "absent".
    """
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd = pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:
        return None
    os.close(fd)
    return True


class _Reader:
    """How one platform reads the process table: boot id, one pid's facts, its parent.

    ``name`` is one of :data:`READERS`; ``clock`` the unit of the start times it reads;
    ``source`` names what it reads, for reasons.
    """

    name: str = ""
    clock: str = ""
    source: str = ""

    def boot_id(self) -> str | None:
        """The current boot's id, or None when it cannot be read."""
        raise NotImplementedError

    def read(self, pid: int, *, marker: bool) -> _Snapshot | None:
        """``pid``'s facts (its marker when ``marker``); None when no such process.

        OSError (or ValueError) when the process table cannot be read.
        """
        raise NotImplementedError

    def hidden(self, pid: int) -> bool:
        """Whether ``pid`` exists although :meth:`read` found no such process."""
        raise NotImplementedError

    def parent(self, pid: int) -> tuple[int, str]:
        """(parent pid, process name) of ``pid``; OSError (or ValueError) when unreadable,
        ProcessLookupError when there is no such process."""
        raise NotImplementedError

    def where(self, pid: int) -> str:
        """Where ``pid``'s facts are read, for reasons."""
        raise NotImplementedError


class _ProcReader(_Reader):
    """Linux ``/proc``: one directory descriptor per read, pidfds for existence."""

    name = PROC_READER
    clock = CLOCK_TICKS
    source = PROC

    def boot_id(self) -> str | None:
        return read_boot_id()

    def read(self, pid: int, *, marker: bool) -> _Snapshot | None:
        return _read_proc(pid, marker=marker)

    def hidden(self, pid: int) -> bool:
        return bool(_pid_exists_by_pidfd(pid))

    def parent(self, pid: int) -> tuple[int, str]:
        try:
            with open(f"{PROC}/{pid}/stat", "rb") as handle:
                raw = handle.read(4096)
        except FileNotFoundError:
            raise ProcessLookupError(errno.ESRCH, "no such process", pid) from None
        return parse_stat_parent(raw.decode("utf-8", "surrogateescape"))

    def where(self, pid: int) -> str:
        return f"{PROC}/{pid}"


def _epoch_us(seconds: float) -> int:
    """``create_time()`` seconds as whole microseconds: an exact, comparable integer."""
    return round(seconds * 1_000_000)


class _PsutilReader(_Reader):
    """psutil: any platform it supports. Imported on first use only.

    Its reads are separate system calls, not one descriptor: each read ends by asking for
    the pid's start time again, and reads again (at most three times) when the pid changed
    hands in between.
    """

    name = PSUTIL_READER
    clock = CLOCK_EPOCH_US
    source = "psutil"

    def __init__(self) -> None:
        import importlib

        # Through importlib: the module stays untyped (psutil ships no annotations).
        self.psutil: Any = importlib.import_module("psutil")

    def boot_id(self) -> str | None:
        try:
            boot = float(self.psutil.boot_time())
        except Exception:  # any failure means "cannot tell"
            return None
        # Whole seconds: some systems report the boot time with a jitter below that.
        return f"boottime:{round(boot)}"

    def _start(self, pid: int) -> int | None:
        """``pid``'s start time read afresh; None when no such process or it exited (the
        next read tells which)."""
        ps = self.psutil
        try:
            return _epoch_us(ps.Process(pid).create_time())
        except ps.NoSuchProcess:  # ZombieProcess included
            return None
        except ps.AccessDenied as exc:
            raise PermissionError(errno.EPERM, f"psutil: {exc}") from None

    def read(self, pid: int, *, marker: bool) -> _Snapshot | None:
        for _ in range(3):
            snapshot = self._read_once(pid, marker=marker)
            if snapshot is None or snapshot.start is None or snapshot.state in _DEAD_STATES:
                return snapshot
            again = self._start(pid)
            if again == snapshot.start:
                return snapshot
        raise OSError(errno.EAGAIN, "the pid changed hands while it was being read", pid)

    def _read_once(self, pid: int, *, marker: bool) -> _Snapshot | None:
        ps = self.psutil
        try:
            proc = ps.Process(pid)
        except ps.NoSuchProcess:
            return None
        except ps.AccessDenied as exc:
            raise PermissionError(errno.EPERM, f"psutil: {exc}") from None
        try:
            status = str(proc.status())
        except ps.ZombieProcess:
            status = ps.STATUS_ZOMBIE
        except ps.NoSuchProcess:
            return None
        except ps.AccessDenied:
            status = "?"
        dead = "Z" if status == ps.STATUS_ZOMBIE else "X" if status == ps.STATUS_DEAD else None
        try:
            start: int | None = _epoch_us(proc.create_time())
        except ps.ZombieProcess:
            return _Snapshot(dead or "Z", None, None)
        except ps.NoSuchProcess:
            return None
        except ps.AccessDenied as exc:
            if dead is not None:
                return _Snapshot(dead, None, None)
            raise PermissionError(errno.EPERM, f"psutil: {exc}") from None
        if dead is not None:
            return _Snapshot(dead, start, None)
        try:
            executable: str | None = str(proc.exe()) or None
        except ps.ZombieProcess:
            return _Snapshot("Z", start, None)
        except ps.NoSuchProcess:
            return None
        except (ps.AccessDenied, OSError):
            executable = None
        found: str | None = None
        marker_error: str | None = None
        if marker:
            try:
                found = self._marker(proc)
            except ps.ZombieProcess:
                return _Snapshot("Z", start, None)
            except ps.NoSuchProcess:
                return None
            except (ps.AccessDenied, OSError) as exc:
                marker_error = f"access denied ({type(exc).__name__})"
        return _Snapshot(status, start, executable, found, marker_error)

    def _marker(self, proc: Any) -> str | None:
        environ = proc.environ()
        if not environ:
            # Caught inside an exec, as the proc reader's _read_marker explains.
            for _ in range(_EMPTY_ENVIRON_RETRIES):
                time.sleep(_EMPTY_ENVIRON_PAUSE)
                environ = proc.environ()
                if environ:
                    break
        value = environ.get(MARKER_ENV)
        return None if value is None else str(value)

    def hidden(self, pid: int) -> bool:
        try:
            return bool(self.psutil.pid_exists(pid))
        except Exception:  # cannot tell: not known to exist
            return False

    def parent(self, pid: int) -> tuple[int, str]:
        ps = self.psutil
        try:
            proc = ps.Process(pid)
            return int(proc.ppid()), str(proc.name())
        except ps.NoSuchProcess:
            raise ProcessLookupError(errno.ESRCH, "no such process", pid) from None
        except ps.AccessDenied as exc:
            raise PermissionError(errno.EPERM, f"psutil: {exc}") from None

    def where(self, pid: int) -> str:
        return f"process {pid} (psutil)"


_READER_CACHE: dict[str, _Reader] = {}


def _reader(name: str | None = None) -> _Reader:
    """The reader called ``name`` (the platform's default when None), made once.

    BadInput for an unknown name; ImportError when psutil is asked for and missing.
    """
    chosen = DEFAULT_READER if name is None else name
    reader = _READER_CACHE.get(chosen)
    if reader is None:
        if chosen == PROC_READER:
            reader = _ProcReader()
        elif chosen == PSUTIL_READER:
            reader = _PsutilReader()
        else:
            raise BadInput(f"process witness reader: unknown reader {name!r}")
        _READER_CACHE[chosen] = reader
    return reader


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
