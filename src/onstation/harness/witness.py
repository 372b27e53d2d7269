"""Process witnesses: an externally observed process identity, never a pid alone.

A :class:`ProcessWitness` records what ``/proc`` said about one process at one moment: the
host, the kernel boot id, the pid, the start time in clock ticks since boot (field 22 of
``/proc/PID/stat``), the executable, and a caller-supplied nonce binding the record to one
launch or challenge. :func:`check` compares a witness with what ``/proc`` says now;
:func:`signal_if_match` sends a signal only through a pidfd obtained while the witness
matched, so a pid recycled between the check and the signal is never hit.

The four states of a :class:`WitnessCheck`:

``MATCH``
    host, boot id, pid, start ticks and executable all agree, and the process carries the
    witnessed marker (when one was recorded): the same process is alive.
``GONE``
    no process has that pid any more, or the witnessed process has exited (a zombie).
``MISMATCH``
    something else now has that pid (different start time, executable or marker). Callers
    treat it as *gone* for safety (the witnessed body cannot be running there), never as
    alive.
``UNKNOWN``
    the witness cannot be verified from here: another host or boot id, ``/proc`` unreadable,
    the marker unreadable, or no pidfd support. Callers must neither assume death nor send
    signals.

The marker is a second fact besides pid, start ticks and executable: a process launched by
onstation carries a random ``ONSTATION_WITNESS_MARKER`` in its environment, and a witness
that recorded it only matches a process whose ``/proc/PID/environ`` still says so. A pid
reused within one clock tick by the same executable has the first three facts right and the
marker wrong.

Linux only; stdlib only, because hook entry points may import it.
"""

from __future__ import annotations

import errno
import os
import signal
import time

from onstation.core.errors import BadInput
from onstation.core.frozen import FrozenRecord

# Hook hot path: typing costs import time on every tool call, so annotations stay
# unevaluated and records are plain classes.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Final

MATCH: Final = "MATCH"
GONE: Final = "GONE"
MISMATCH: Final = "MISMATCH"
UNKNOWN: Final = "UNKNOWN"
STATES: Final = frozenset({MATCH, GONE, MISMATCH, UNKNOWN})

WITNESS_VERSION: Final = 1

PROC: Final = "/proc"
BOOT_ID_PATH: Final = "/proc/sys/kernel/random/boot_id"

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

    ``os.uname().nodename`` is the same value on Linux (glibc's gethostname calls uname) and
    avoids importing :mod:`socket` on the hook path.
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


def _strip_deleted(executable: str | None) -> str | None:
    if executable is not None and executable.endswith(_DELETED_SUFFIX):
        return executable[: -len(_DELETED_SUFFIX)]
    return executable


class _ProcSnapshot:
    """What /proc said about one pid, all read through one directory descriptor.

    ``marker`` is the value of ``MARKER_ENV`` in the process's environment (None when it has
    none); ``marker_error`` says why the environment could not be read (None when it was, or
    when it was not asked for).
    """

    __slots__ = ("executable", "marker", "marker_error", "start_ticks", "state")

    def __init__(
        self,
        state: str,
        start_ticks: int,
        executable: str | None,
        marker: str | None = None,
        marker_error: str | None = None,
    ) -> None:
        self.state = state
        self.start_ticks = start_ticks
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


def _read_proc(pid: int, *, marker: bool = False) -> _ProcSnapshot | None:
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
            return _ProcSnapshot(state, start_ticks, None, None, None)
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
    return _ProcSnapshot(state, start_ticks, executable, found, marker_error)


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


def _validate_iso_utc(value: str, name: str) -> None:
    from datetime import datetime, timedelta

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"process witness {name}: not an ISO 8601 timestamp: {value!r}") from None
    if parsed.utcoffset() != timedelta(0):
        raise BadInput(f"process witness {name}: must be UTC with an explicit offset: {value!r}")


_WITNESS_FIELDS: Final = (
    "host", "boot_id", "pid", "start_ticks", "executable", "nonce", "observed_at", "marker",
)  # fmt: skip
# Witnesses stored before markers existed have no "marker" key; they still load (weaker).
_OPTIONAL_FIELDS: Final = frozenset({"marker"})


class ProcessWitness(FrozenRecord):
    """An externally observed process identity; evidence only, never authority.

    ``host``, ``boot_id``, ``pid`` and ``start_ticks`` identify the process; ``executable``
    (None when it could not be read) guards against a pid reused within one clock tick or a
    process that exec'd something else; ``nonce`` binds the record to one launch or
    challenge; ``observed_at`` is the caller's ISO 8601 UTC timestamp; ``marker`` is the
    value of ``MARKER_ENV`` the process must carry in its environment, or None for a witness
    without one (weaker: pid, start ticks and executable only). Immutable. BadInput when a
    field is malformed.
    """

    __slots__ = _WITNESS_FIELDS

    host: str
    boot_id: str
    pid: int
    start_ticks: int
    executable: str | None
    nonce: str
    observed_at: str
    marker: str | None

    def __init__(
        self,
        *,
        host: str,
        boot_id: str,
        pid: int,
        start_ticks: int,
        executable: str | None,
        nonce: str,
        observed_at: str,
        marker: str | None = None,
    ) -> None:
        for name, value in (("host", host), ("boot_id", boot_id), ("nonce", nonce)):
            if not isinstance(value, str) or not value:
                raise BadInput(f"process witness {name}: must be a non-empty string")
        for name, number in (("pid", pid), ("start_ticks", start_ticks)):
            if isinstance(number, bool) or not isinstance(number, int):
                raise BadInput(f"process witness {name}: must be an integer")
        # pid 0 and negative pids address process groups in kill(2); never a single body.
        if pid <= 0:
            raise BadInput(f"process witness pid: must be positive, got {pid}")
        if start_ticks < 0:
            raise BadInput(f"process witness start_ticks: must not be negative, got {start_ticks}")
        if executable is not None and (not isinstance(executable, str) or not executable):
            raise BadInput("process witness executable: must be a non-empty string or null")
        if not isinstance(observed_at, str) or not observed_at:
            raise BadInput("process witness observed_at: must be a non-empty string")
        _validate_iso_utc(observed_at, "observed_at")
        # An environment entry can hold neither NUL nor be empty and still mark anything.
        if marker is not None and (not isinstance(marker, str) or not marker or "\0" in marker):
            raise BadInput("process witness marker: must be a non-empty string without NUL")
        self._set(host=host, boot_id=boot_id, pid=pid, start_ticks=start_ticks,
                  executable=executable, nonce=nonce, observed_at=observed_at,
                  marker=marker)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict (what the ledger stores); no ``marker`` key without one."""
        data = {"v": WITNESS_VERSION, **self.as_dict()}
        if data["marker"] is None:
            del data["marker"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> ProcessWitness:
        """The witness stored by :meth:`to_json` (a dict or its JSON text); BadInput if not."""
        if isinstance(data, str):
            import json  # only for text input; keeps json off the hook import path

            try:
                data = json.loads(data)
            except ValueError as exc:
                raise BadInput(f"process witness: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise BadInput("process witness: must be a JSON object")
        if data.get("v") != WITNESS_VERSION:
            raise BadInput(f"process witness v: unsupported version {data.get('v')!r}")
        unknown = sorted(set(data) - {"v", *_WITNESS_FIELDS})
        if unknown:
            raise BadInput(f"process witness {unknown[0]}: unknown field")
        missing = [n for n in _WITNESS_FIELDS if n not in data and n not in _OPTIONAL_FIELDS]
        if missing:
            raise BadInput(f"process witness {missing[0]}: missing")
        return cls(**{name: data[name] for name in _WITNESS_FIELDS if name in data})


class WitnessCheck:
    """The result of comparing a witness with ``/proc`` now: a state and a one-line reason.

    ``signalled`` is True only when :func:`signal_if_match` delivered its signal.
    """

    __slots__ = ("reason", "signalled", "state")

    state: str
    reason: str
    signalled: bool

    def __init__(self, state: str, reason: str, *, signalled: bool = False) -> None:
        if state not in STATES:
            raise BadInput(f"witness check state: unknown state {state!r}")
        if not isinstance(reason, str) or "\n" in reason:
            raise BadInput("witness check reason: must be a one-line string")
        if signalled and state != MATCH:
            raise BadInput("witness check signalled: only a MATCH can have signalled")
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "signalled", bool(signalled))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"WitnessCheck is immutable; cannot set {key}")

    @property
    def alive(self) -> bool:
        """True only for MATCH: the witnessed process is running."""
        return self.state == MATCH

    @property
    def gone(self) -> bool:
        """True for GONE and MISMATCH: the witnessed process is not running at that pid."""
        return self.state in (GONE, MISMATCH)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WitnessCheck):
            return NotImplemented
        return (self.state, self.reason, self.signalled) == (
            other.state,
            other.reason,
            other.signalled,
        )

    def __hash__(self) -> int:
        return hash((self.state, self.reason, self.signalled))

    def __repr__(self) -> str:
        return f"WitnessCheck({self.state!r}, {self.reason!r}, signalled={self.signalled!r})"

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict."""
        return {"state": self.state, "reason": self.reason, "signalled": self.signalled}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WitnessCheck:
        """The check stored by :meth:`to_json`; BadInput if malformed."""
        if not isinstance(data, dict):
            raise BadInput("witness check: must be a JSON object")
        signalled = data.get("signalled", False)
        if not isinstance(signalled, bool):
            raise BadInput("witness check signalled: must be a boolean")
        state, reason = data.get("state"), data.get("reason")
        if not isinstance(state, str) or not isinstance(reason, str):
            raise BadInput("witness check: state and reason must be strings")
        return cls(state, reason, signalled=signalled)


def observe(
    pid: int, *, nonce: str, observed_at: str, marker: str | None = None
) -> ProcessWitness | None:
    """Witness the process ``pid`` as it is now.

    Returns None when no such process exists or it is a zombie (exited, not yet reaped):
    neither is a body that can act. ``nonce`` binds the witness to one launch or challenge;
    ``observed_at`` is the caller's ISO 8601 UTC timestamp (no clock is read here).
    ``marker`` is the ``MARKER_ENV`` value the process was launched with, when the caller
    knows it; otherwise the process's own value is recorded when it has one and its
    environment is readable (else the witness has no marker and is weaker). Raises OSError
    when ``/proc`` cannot be read (no boot id, or the pid's entry is unreadable), so an
    unreadable ``/proc`` is never mistaken for an absent process; BadInput for a bad pid.
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise BadInput(f"process witness pid: must be a positive integer, got {pid!r}")
    boot_id = read_boot_id()
    if boot_id is None:
        raise OSError(errno.ENOENT, "cannot read the boot id; is /proc mounted?", BOOT_ID_PATH)
    try:
        snapshot = _read_proc(pid, marker=marker is None)
    except ValueError as exc:
        raise OSError(errno.EIO, f"unreadable stat line: {exc}", f"{PROC}/{pid}/stat") from None
    if snapshot is None or snapshot.state in _DEAD_STATES:
        return None
    return ProcessWitness(
        host=current_host(),
        boot_id=boot_id,
        pid=pid,
        start_ticks=snapshot.start_ticks,
        executable=snapshot.executable,
        nonce=nonce,
        observed_at=observed_at,
        marker=marker if marker is not None else snapshot.marker,
    )


def check(expected: ProcessWitness) -> WitnessCheck:
    """Compare ``expected`` with what ``/proc`` says about its pid now.

    MATCH only when host, boot id, pid, start ticks and executable all agree and, for a
    witness with a marker, the process carries that marker in its environment. A different
    start time, executable or marker at that pid (pid reuse, or an exec) is MISMATCH:
    callers treat it as gone, never as alive. No such process, or the witnessed process is a
    zombie, is GONE. Another host or boot id, an unreadable ``/proc`` or an unreadable
    marker is UNKNOWN. Never raises for an unreadable ``/proc``; the nonce is not compared
    (only the caller knows what it binds).
    """
    host = current_host()
    if expected.host != host:
        return WitnessCheck(UNKNOWN, f"witness is from host {expected.host!r}, this is {host!r}")
    boot_id = read_boot_id()
    if boot_id is None:
        return WitnessCheck(UNKNOWN, "cannot read the boot id; /proc unreadable")
    if expected.boot_id != boot_id:
        # Host names are not unique (containers, clones), so another boot id may be another
        # machine of the same name: we cannot vouch that the process is gone.
        return WitnessCheck(
            UNKNOWN, f"witness is from boot {expected.boot_id!r}, this kernel is boot {boot_id!r}"
        )
    pid = expected.pid
    try:
        snapshot = _read_proc(pid, marker=expected.marker is not None)
    except (OSError, ValueError) as exc:
        return WitnessCheck(UNKNOWN, f"cannot read /proc/{pid}: {_describe(exc)}")
    if snapshot is None:
        if _pid_exists_by_pidfd(pid):
            return WitnessCheck(UNKNOWN, f"pid {pid} exists but /proc/{pid} is hidden")
        return WitnessCheck(GONE, f"no process has pid {pid}")
    if snapshot.start_ticks != expected.start_ticks:
        return WitnessCheck(
            MISMATCH,
            f"pid {pid} started at tick {snapshot.start_ticks}, "
            f"witness says {expected.start_ticks} (pid reused)",
        )
    if snapshot.state in _DEAD_STATES:
        return WitnessCheck(GONE, f"pid {pid} has exited (state {snapshot.state}, not reaped)")
    now_exe = _strip_deleted(snapshot.executable)
    was_exe = _strip_deleted(expected.executable)
    if now_exe != was_exe:
        if now_exe is None or was_exe is None:
            return WitnessCheck(
                UNKNOWN,
                f"pid {pid} executable cannot be compared "
                f"(now {snapshot.executable!r}, witness {expected.executable!r})",
            )
        return WitnessCheck(MISMATCH, f"pid {pid} runs {now_exe!r}, witness says {was_exe!r}")
    if expected.marker is not None:
        if snapshot.marker_error is not None:
            # Never MATCH on three facts when the fourth was asked for and cannot be seen.
            return WitnessCheck(
                UNKNOWN, f"cannot read /proc/{pid}/environ ({snapshot.marker_error}) to verify "
                "its marker"
            )  # fmt: skip
        if snapshot.marker is None:
            return WitnessCheck(MISMATCH, f"pid {pid} carries no {MARKER_ENV} (pid reused)")
        if snapshot.marker != expected.marker:
            return WitnessCheck(
                MISMATCH, f"pid {pid} carries another {MARKER_ENV} than the witness (pid reused)"
            )
    return WitnessCheck(MATCH, f"pid {pid} is the witnessed process")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _pidfd_holds_pid(pidfd: int, pid: int) -> bool | None:
    """Whether the process behind ``pidfd`` still holds ``pid``; None when the kernel won't say.

    ``/proc/self/fdinfo/FD`` shows ``Pid: -1`` once the process is reaped (Linux 5.10+).
    """
    try:
        with open(f"{PROC}/self/fdinfo/{pidfd}", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Pid:"):
                    return int(line.split()[1]) == pid
    except (OSError, ValueError, IndexError):
        return None
    return None


def signal_if_match(expected: ProcessWitness, sig: int) -> WitnessCheck:
    """Send ``sig`` to the witnessed process only if it is provably that process; else nothing.

    Opens a pidfd for the pid, then checks the witness again *after* obtaining it, and
    confirms the pidfd still holds that pid: the pidfd then refers to the witnessed process
    whatever happens next, so a pid reused between check and signal is never hit. For a
    witness with a marker both checks also require the marker in the process's environment,
    so a pid reused within one clock tick by the same executable is never hit either. The
    signal goes through ``signal.pidfd_send_signal`` only. ESRCH at any step is GONE.

    Without pidfd support (Python or kernel < 5.3, or a non-Linux system) this refuses with
    UNKNOWN rather than fall back to a bare ``os.kill``, which could hit a reused pid.

    Returns the check that decided; ``signalled`` is True only when the signal was sent.
    """
    first = check(expected)
    if first.state != MATCH:
        return first
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    if pidfd_open is None or send is None:
        return WitnessCheck(UNKNOWN, "no pidfd support; refusing to signal by bare pid")
    pid = expected.pid
    try:
        pidfd = pidfd_open(pid)
    except ProcessLookupError:
        return WitnessCheck(GONE, f"pid {pid} exited before a pidfd could be opened")
    except OSError as exc:
        # ENOSYS: kernel without pidfd; EINVAL: pid is a thread, not a process leader.
        return WitnessCheck(
            UNKNOWN, f"pidfd_open({pid}) failed ({_describe(exc)}); refusing to signal"
        )
    try:
        # The pidfd names whichever process held the pid when it was opened; only a check
        # made after that moment proves it is the witnessed one.
        second = check(expected)
        if second.state != MATCH:
            return second
        holds = _pidfd_holds_pid(pidfd, pid)
        if holds is False:
            return WitnessCheck(GONE, f"pid {pid} was reaped while being checked")
        try:
            send(pidfd, sig)
        except ProcessLookupError:
            return WitnessCheck(GONE, f"pid {pid} exited before the signal was sent")
        except OSError as exc:
            return WitnessCheck(
                UNKNOWN, f"pidfd_send_signal to pid {pid} failed ({_describe(exc)})"
            )
        return WitnessCheck(MATCH, f"sent signal {sig} to pid {pid} via pidfd", signalled=True)
    finally:
        os.close(pidfd)


def wait_gone(expected: ProcessWitness, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Poll until the witnessed process is GONE or MISMATCH; False if ``timeout_s`` elapses.

    UNKNOWN keeps polling: an unverifiable process is never assumed dead. Durations use
    :func:`time.monotonic`.
    """
    deadline = time.monotonic() + max(0.0, timeout_s)
    poll = max(0.001, poll_s)
    while True:
        if check(expected).gone:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(poll, remaining))
