"""Process witnesses: an externally observed process identity, never a pid alone.

A :class:`ProcessWitness` records what the system said about one process at one moment: the
host, the boot, the pid, the start time, the executable, and a caller-supplied nonce binding
the record to one launch or challenge. :func:`check` compares a witness with what the system
says now; :func:`signal_if_match` sends a signal only to a process that matches it.

Two readers, one chosen per platform (:data:`DEFAULT_READER`):

``proc`` (Linux, the default there)
    ``/proc`` and pidfds, standard library only. The boot id is
    ``/proc/sys/kernel/random/boot_id``, the start time is field 22 of ``/proc/PID/stat`` in
    clock ticks since boot, every read goes through one ``/proc/PID`` directory descriptor,
    and :func:`signal_if_match` signals through a pidfd opened while the witness matched, so
    a pid recycled between the check and the signal is never hit.
``psutil`` (every other platform; usable on Linux too)
    psutil, imported only when this reader is used (hook entry points import this module).
    The boot id is ``"boottime:"`` plus :func:`psutil.boot_time` in whole seconds, the start
    time is :meth:`psutil.Process.create_time` in microseconds since the epoch, the
    executable is :meth:`~psutil.Process.exe` and the marker comes from
    :meth:`~psutil.Process.environ` where the system allows it. There is no pidfd:
    :func:`signal_if_match` calls :func:`os.kill` right after a fresh match, which leaves a
    small race (the process exits and its pid is reused between that check and the kill;
    pids are handed out in sequence, so the whole pid space must be cycled within those few
    milliseconds).

A witness records which clock its start time is in (``start_clock``); :func:`check` uses
the reader of that clock, so a witness is always compared by the reader that made it.

The four states of a :class:`WitnessCheck`:

``MATCH``
    host, boot id, pid and start time agree, the process carries the witnessed marker (when
    one was recorded), and it runs the witnessed executable, or, for a witness with a
    marker, another one it exec'd into: the same process is alive.
``GONE``
    no process has that pid any more, or the witnessed process has exited (a zombie).
``MISMATCH``
    something else now has that pid (different start time or marker, or a different
    executable with no marker to vouch for an exec). Callers treat it as *gone* for safety
    (the witnessed body cannot be running there), never as alive.
``UNKNOWN``
    the witness cannot be verified from here: another host or boot id, the process table
    unreadable, the marker unreadable, or no pidfd support. Callers must neither assume
    death nor send signals.

The marker is a second fact besides pid, start time and executable: a process launched by
onstation carries a random ``ONSTATION_WITNESS_MARKER`` in its environment, and a witness
that recorded it only matches a process whose environment still says so. A pid reused
within one clock tick by the same executable has the first three facts right and the
marker wrong.

The exec rule: a process that replaces itself with another program (a version-manager
shim, a shell script ending in ``exec real-binary "$@"``) keeps its pid, start time and
environment but changes its executable. When the witness recorded a marker and the process
still carries it, a different executable is that exec: MATCH, with a reason saying from
what to what and :attr:`WitnessCheck.executable` holding the new one
(:func:`follow_exec` records it in the witness). Without a marker an executable change is
still MISMATCH, because a pid reused within one tick looks the same. The marker is inherited
by the body's descendants, so the rule trusts that none of them takes over the body's pid
within one tick of its death (the same window the marker closes for strangers).

:func:`host_process` finds the process a hook runs for (the harness: Claude Code, Codex, a
fake agent) by walking up the parent chain past shells and wrappers.
"""

from __future__ import annotations

import errno
import os
import signal
import time

from onstation.core.errors import BadInput
from onstation.core.frozen import FrozenRecord

# The platform readers live in process_table; the names a witness's users need are
# re-exported here, so that ``witness`` stays the one module they import.
from onstation.harness.process_table import (
    _DEAD_STATES,
    _READER_OF_CLOCK,
    BOOT_ID_PATH,
    CLOCK_EPOCH_US,
    CLOCK_TICKS,
    DEFAULT_READER,
    MARKER_ENV,
    PROC,
    PROC_READER,
    PSUTIL_READER,
    READERS,
    _describe,
    _Reader,
    _reader,
    _Snapshot,
    _strip_deleted,
    current_host,
    parse_stat_parent,
    parse_stat_start_ticks,
    read_boot_id,
)

# Hook hot path: typing costs import time on every tool call, so annotations stay
# unevaluated and records are plain classes.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any, Final

__all__ = [
    "BOOT_ID_PATH",
    "CLOCK_EPOCH_US",
    "CLOCK_TICKS",
    "DEFAULT_READER",
    "GONE",
    "HOOK_WRAPPERS",
    "MARKER_ENV",
    "MATCH",
    "MISMATCH",
    "PROC",
    "PROC_READER",
    "PSUTIL_READER",
    "READERS",
    "SHELL_WRAPPERS",
    "STATES",
    "UNKNOWN",
    "WITNESS_VERSION",
    "ProcessWitness",
    "WitnessCheck",
    "check",
    "current_host",
    "follow_exec",
    "host_process",
    "is_hook_wrapper",
    "observe",
    "parse_stat_parent",
    "parse_stat_start_ticks",
    "pick_host",
    "pid_descends",
    "read_boot_id",
    "signal_if_match",
    "wait_gone",
]

MATCH: Final = "MATCH"
GONE: Final = "GONE"
MISMATCH: Final = "MISMATCH"
UNKNOWN: Final = "UNKNOWN"
STATES: Final = frozenset({MATCH, GONE, MISMATCH, UNKNOWN})

WITNESS_VERSION: Final = 1

#: Process names :func:`host_process` walks past: the shells a host runs a hook command
#: through, the wrappers such a command may start with, and onstation's own console script.
#: A name is compared without a leading "-" (a login shell's argv[0]).
HOOK_WRAPPERS: Final = frozenset({
    "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "ash", "busybox", "tcsh", "csh",
    "env", "timeout", "nice", "nohup", "setsid", "stdbuf", "time",
    "onstation",
})  # fmt: skip
#: Only the shells and wrappers: what a host's tool call runs a command through. A command
#: onstation itself runs (``onstation fake-agent`` answering its challenge) has an onstation
#: process as its host, so the challenge answer walks past these alone.
SHELL_WRAPPERS: Final = HOOK_WRAPPERS - {"onstation"}
# How far up a parent chain is walked at most (a chain longer than this is not a hook's).
_MAX_CHAIN: Final = 64


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
    "start_clock",
)  # fmt: skip
# Witnesses stored before markers existed have no "marker" key, and every /proc witness has
# no "start_clock" key (it is "ticks"); they still load.
_OPTIONAL_FIELDS: Final = frozenset({"marker", "start_clock"})


class ProcessWitness(FrozenRecord):
    """An externally observed process identity; evidence only, never authority.

    ``host``, ``boot_id``, ``pid`` and ``start_ticks`` identify the process; ``start_ticks``
    is the start time in the clock ``start_clock`` names: :data:`CLOCK_TICKS` (clock ticks
    since boot, the ``proc`` reader; the default, and what every witness stored before
    issue 12 holds) or :data:`CLOCK_EPOCH_US` (microseconds since the epoch, the ``psutil``
    reader). ``executable`` (None when it could not be read) guards against a pid reused
    within one clock tick; ``nonce`` binds the record to one launch or challenge;
    ``observed_at`` is the caller's ISO 8601 UTC timestamp; ``marker`` is the value of
    ``MARKER_ENV`` the process must carry in its environment, or None for a witness without
    one (weaker: pid, start time and executable only, and no exec is tolerated). Immutable.
    BadInput when a field is malformed.
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
    start_clock: str

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
        start_clock: str = CLOCK_TICKS,
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
        if not isinstance(start_clock, str) or start_clock not in _READER_OF_CLOCK:
            raise BadInput(
                f"process witness start_clock: must be one of {sorted(_READER_OF_CLOCK)}, "
                f"got {start_clock!r}"
            )
        self._set(host=host, boot_id=boot_id, pid=pid, start_ticks=start_ticks,
                  executable=executable, nonce=nonce, observed_at=observed_at,
                  marker=marker, start_clock=start_clock)  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict (what the ledger stores); no ``marker`` key without one,
        no ``start_clock`` key for a witness in clock ticks (so it reads as before)."""
        data = {"v": WITNESS_VERSION, **self.as_dict()}
        if data["marker"] is None:
            del data["marker"]
        if data["start_clock"] == CLOCK_TICKS:
            del data["start_clock"]
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
    """The result of comparing a witness with the process table now: a state and a one-line
    reason.

    ``signalled`` is True only when :func:`signal_if_match` delivered its signal.
    ``executable`` is, for a MATCH, the executable the process runs now when it could be
    read (after an exec, not the witness's: :func:`follow_exec` records it); None otherwise.
    """

    __slots__ = ("executable", "reason", "signalled", "state")

    state: str
    reason: str
    signalled: bool
    executable: str | None

    def __init__(
        self, state: str, reason: str, *, signalled: bool = False, executable: str | None = None
    ) -> None:
        if state not in STATES:
            raise BadInput(f"witness check state: unknown state {state!r}")
        if not isinstance(reason, str) or "\n" in reason:
            raise BadInput("witness check reason: must be a one-line string")
        if signalled and state != MATCH:
            raise BadInput("witness check signalled: only a MATCH can have signalled")
        if executable is not None and (not isinstance(executable, str) or not executable):
            raise BadInput("witness check executable: must be a non-empty string or null")
        if executable is not None and state != MATCH:
            raise BadInput("witness check executable: only a MATCH names the executable")
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "signalled", bool(signalled))
        object.__setattr__(self, "executable", executable)

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

    def _key(self) -> tuple[str, str, bool, str | None]:
        return (self.state, self.reason, self.signalled, self.executable)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WitnessCheck):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        extra = "" if self.executable is None else f", executable={self.executable!r}"
        return f"WitnessCheck({self.state!r}, {self.reason!r}, signalled={self.signalled!r}{extra})"

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict (an ``executable`` key only when one is named)."""
        data: dict[str, Any] = {
            "state": self.state,
            "reason": self.reason,
            "signalled": self.signalled,
        }
        if self.executable is not None:
            data["executable"] = self.executable
        return data

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
        return cls(state, reason, signalled=signalled, executable=data.get("executable"))


def observe(
    pid: int,
    *,
    nonce: str,
    observed_at: str,
    marker: str | None = None,
    reader: str | None = None,
) -> ProcessWitness | None:
    """Witness the process ``pid`` as it is now.

    Returns None when no such process exists or it is a zombie (exited, not yet reaped):
    neither is a body that can act. ``nonce`` binds the witness to one launch or challenge;
    ``observed_at`` is the caller's ISO 8601 UTC timestamp (no clock is read here).
    ``marker`` is the ``MARKER_ENV`` value the process was launched with, when the caller
    knows it; otherwise the process's own value is recorded when it has one and its
    environment is readable (else the witness has no marker and is weaker). ``reader`` is
    one of :data:`READERS` (None: :data:`DEFAULT_READER`); the witness's ``start_clock``
    says which one made it. Raises OSError when the process table cannot be read (no boot
    id, or the pid's entry is unreadable), so an unreadable table is never mistaken for an
    absent process; BadInput for a bad pid or reader; ImportError when the psutil reader is
    asked for and psutil is not installed.
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise BadInput(f"process witness pid: must be a positive integer, got {pid!r}")
    source = _reader(reader)
    boot_id = source.boot_id()
    if boot_id is None:
        where = BOOT_ID_PATH if source.name == PROC_READER else "psutil.boot_time()"
        raise OSError(errno.ENOENT, f"cannot read the boot id; is {source.source} usable?", where)
    try:
        snapshot = source.read(pid, marker=marker is None)
    except ValueError as exc:
        raise OSError(errno.EIO, f"unreadable stat line: {exc}", source.where(pid)) from None
    if snapshot is None or snapshot.state in _DEAD_STATES or snapshot.start is None:
        return None
    return ProcessWitness(
        host=current_host(),
        boot_id=boot_id,
        pid=pid,
        start_ticks=snapshot.start,
        executable=snapshot.executable,
        nonce=nonce,
        observed_at=observed_at,
        marker=marker if marker is not None else snapshot.marker,
        start_clock=source.clock,
    )


def check(expected: ProcessWitness) -> WitnessCheck:
    """Compare ``expected`` with what the process table says about its pid now.

    Read by the reader of the witness's ``start_clock`` (the one that made it). MATCH only
    when host, boot id, pid and start time agree, a witness's marker is carried by the
    process, and the executable is the witnessed one, or another one when the marker vouches
    for an exec (the reason says from what to what; :attr:`WitnessCheck.executable` names the
    new one). A different start time or marker at that pid (pid reuse), or a different
    executable with no marker, is MISMATCH: callers treat it as gone, never as alive. No
    such process, or the witnessed process is a zombie, is GONE. Another host or boot id,
    an unreadable process table, an unreadable marker or executable is UNKNOWN. Never raises
    for an unreadable table (UNKNOWN, also when psutil is needed and missing); the nonce is
    not compared (only the caller knows what it binds).
    """
    host = current_host()
    if expected.host != host:
        return WitnessCheck(UNKNOWN, f"witness is from host {expected.host!r}, this is {host!r}")
    try:
        reader = _reader(_READER_OF_CLOCK[expected.start_clock])
    except ImportError as exc:
        return WitnessCheck(UNKNOWN, f"cannot read a {expected.start_clock} witness: {exc}")
    boot_id = reader.boot_id()
    if boot_id is None:
        return WitnessCheck(UNKNOWN, f"cannot read the boot id; {reader.source} unreadable")
    if expected.boot_id != boot_id:
        # Host names are not unique (containers, clones), so another boot id may be another
        # machine of the same name: we cannot vouch that the process is gone.
        return WitnessCheck(
            UNKNOWN, f"witness is from boot {expected.boot_id!r}, this kernel is boot {boot_id!r}"
        )
    pid = expected.pid
    try:
        snapshot = reader.read(pid, marker=expected.marker is not None)
    except (OSError, ValueError) as exc:
        return WitnessCheck(UNKNOWN, f"cannot read {reader.where(pid)}: {_describe(exc)}")
    if snapshot is None:
        if reader.hidden(pid):
            return WitnessCheck(UNKNOWN, f"pid {pid} exists but {reader.where(pid)} is hidden")
        return WitnessCheck(GONE, f"no process has pid {pid}")
    return _compare(expected, snapshot, reader)


def _compare(expected: ProcessWitness, snapshot: _Snapshot, reader: _Reader) -> WitnessCheck:
    """The verdict on one snapshot of the witnessed pid (see :func:`check`)."""
    pid = expected.pid
    unit = "tick" if reader.clock == CLOCK_TICKS else "epoch microsecond"
    if snapshot.start is not None and snapshot.start != expected.start_ticks:
        return WitnessCheck(
            MISMATCH,
            f"pid {pid} started at {unit} {snapshot.start}, "
            f"witness says {expected.start_ticks} (pid reused)",
        )
    if snapshot.state in _DEAD_STATES or snapshot.start is None:
        return WitnessCheck(GONE, f"pid {pid} has exited (state {snapshot.state}, not reaped)")
    now_exe = _strip_deleted(snapshot.executable)
    was_exe = _strip_deleted(expected.executable)
    if now_exe != was_exe and expected.marker is None:
        if now_exe is None or was_exe is None:
            return WitnessCheck(
                UNKNOWN,
                f"pid {pid} executable cannot be compared "
                f"(now {snapshot.executable!r}, witness {expected.executable!r})",
            )
        # Without a marker, an exec and a pid reused within one tick look the same.
        return WitnessCheck(MISMATCH, f"pid {pid} runs {now_exe!r}, witness says {was_exe!r}")
    if expected.marker is not None:
        if snapshot.marker_error is not None:
            # Never MATCH on three facts when the fourth was asked for and cannot be seen.
            return WitnessCheck(
                UNKNOWN, f"cannot read the environment of pid {pid} ({snapshot.marker_error}) "
                "to verify its marker"
            )  # fmt: skip
        if snapshot.marker is None:
            return WitnessCheck(MISMATCH, f"pid {pid} carries no {MARKER_ENV} (pid reused)")
        if snapshot.marker != expected.marker:
            return WitnessCheck(
                MISMATCH, f"pid {pid} carries another {MARKER_ENV} than the witness (pid reused)"
            )
        if now_exe != was_exe:
            if now_exe is None or was_exe is None:
                return WitnessCheck(
                    UNKNOWN,
                    f"pid {pid} executable cannot be compared "
                    f"(now {snapshot.executable!r}, witness {expected.executable!r})",
                )
            # Same pid, boot, start time and marker: the same process, exec'd.
            return WitnessCheck(
                MATCH,
                f"pid {pid} is the witnessed process; it exec'd from {was_exe!r} to {now_exe!r}",
                executable=now_exe,
            )
    return WitnessCheck(MATCH, f"pid {pid} is the witnessed process", executable=now_exe)


def follow_exec(expected: ProcessWitness, result: WitnessCheck) -> ProcessWitness:
    """``expected`` with the executable a MATCH found it running (after an exec), so a later
    check compares against the program it runs now; ``expected`` itself otherwise."""
    if result.state != MATCH or result.executable is None:
        return expected
    if result.executable == _strip_deleted(expected.executable):
        return expected
    return expected.replace(executable=result.executable)


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

    For a ``proc`` witness (clock ticks; Linux): opens a pidfd for the pid, then checks the
    witness again *after* obtaining it, and confirms the pidfd still holds that pid: the
    pidfd then refers to the witnessed process whatever happens next, so a pid reused
    between check and signal is never hit. For a witness with a marker both checks also
    require the marker in the process's environment, so a pid reused within one clock tick
    by the same executable is never hit either. The signal goes through
    ``signal.pidfd_send_signal`` only. ESRCH at any step is GONE. Without pidfd support
    (Python or kernel < 5.3) this refuses with UNKNOWN rather than fall back to a bare
    ``os.kill``, which could hit a reused pid.

    For a ``psutil`` witness (microseconds since the epoch; the other platforms, which have
    no pidfd): :func:`os.kill` right after a fresh match. The residual race: the process
    exits and another takes its pid between that match and the kill (milliseconds; pids
    are handed out in sequence, so the whole pid space would have to be cycled).

    Returns the check that decided; ``signalled`` is True only when the signal was sent.
    """
    first = check(expected)
    if first.state != MATCH:
        return first
    pid = expected.pid
    if expected.start_clock != CLOCK_TICKS:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return WitnessCheck(GONE, f"pid {pid} exited before the signal was sent")
        except OSError as exc:
            return WitnessCheck(UNKNOWN, f"kill of pid {pid} failed ({_describe(exc)})")
        return WitnessCheck(
            MATCH, f"sent signal {sig} to pid {pid} right after a match (no pidfd here)",
            signalled=True, executable=first.executable,
        )  # fmt: skip
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    if pidfd_open is None or send is None:
        return WitnessCheck(UNKNOWN, "no pidfd support; refusing to signal by bare pid")
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
        return WitnessCheck(
            MATCH, f"sent signal {sig} to pid {pid} via pidfd", signalled=True,
            executable=second.executable,
        )  # fmt: skip
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


# --- the host process of a hook ----------------------------------------------------------


def is_hook_wrapper(name: str | None, wrappers: frozenset[str] = HOOK_WRAPPERS) -> bool:
    """Whether a process called ``name`` is one :func:`host_process` walks past.

    Pure. ``name`` is a process name or an executable path (its basename counts); a login
    shell's leading "-" is ignored.
    """
    if not name:
        return False
    base = name.rsplit("/", 1)[-1].removeprefix("-")
    return base in wrappers


def pick_host(
    chain: Iterable[tuple[int, str | None]], wrappers: frozenset[str] = HOOK_WRAPPERS
) -> int | None:
    """The host's pid from a parent chain, nearest ancestor first; None when there is none.

    Pure; consumes ``chain`` only as far as it needs (a lazy walk stops there). Each entry is
    (pid, process name or executable; None when unreadable). The first entry that is not a
    shell or wrapper (:data:`HOOK_WRAPPERS`) is the host. The chain ends without a host at
    pid 1 or below (init/launchd adopts orphans: never a host) and at an unreadable name
    (whether it is a shell cannot be told).
    """
    for pid, name in chain:
        if pid <= 1 or name is None:
            return None
        if not is_hook_wrapper(name, wrappers):
            return pid
    return None


#: The process a command runs for, when that is not this process: the daemon's forked child
#: (:mod:`onstation.cli.daemon`) runs a command for a client process whose pid the kernel
#: vouched for (``SO_PEERCRED``), and every parent-chain walk starts from that client as it
#: would from this process. Set once per process by :func:`adopt_caller`; None otherwise.
_caller: list[int] = []


def adopt_caller(pid: int) -> None:
    """Make ``pid`` the process this one runs commands for (the daemon's child, once)."""
    _caller[:] = [pid]


def caller_pid() -> int:
    """The process this command runs for: this one, or the daemon's client."""
    return _caller[0] if _caller else os.getpid()


def caller_parent_pid(reader: str | None = None) -> int:
    """The parent of :func:`caller_pid`; OSError (or ValueError) when it cannot be read."""
    if not _caller:
        return os.getppid()
    return _reader(reader).parent(_caller[0])[0]


def _utc_now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def host_process(
    start_pid: int | None = None,
    *,
    nonce: str = "host-process",
    observed_at: str | None = None,
    reader: str | None = None,
    wrappers: frozenset[str] = HOOK_WRAPPERS,
) -> ProcessWitness | None:
    """A witness of the process a hook runs for (Claude Code, Codex, a fake agent).

    The host runs a hook command through a shell (``sh -c``, bash, dash, zsh, fish), maybe
    through ``env``/``timeout``-like wrappers; the ``onstation`` console script is this very
    process. Walks up from ``start_pid`` (default: this process's parent) past every
    :data:`HOOK_WRAPPERS` name and witnesses the first other ancestor (:func:`pick_host`).
    None when the walk reaches pid 1, a name cannot be read, the process table cannot be
    read, or the host's child no longer has the host as its parent once the host was
    witnessed (it exited and its pid may have been reused). ``wrappers``: the names walked
    past (:data:`SHELL_WRAPPERS` to stop at an ``onstation`` process, the host of a command
    onstation's own fake agent runs). ``observed_at`` defaults to now
    (UTC, whole seconds); ``reader`` as for :func:`observe`.
    """
    try:
        source = _reader(reader)
    except ImportError:
        return None
    try:
        first = caller_parent_pid(reader) if start_pid is None else start_pid
    except (OSError, ValueError):
        return None
    walked: list[int] = []
    # Each entry's parent: the host's child must still name the host as its parent after
    # the host is witnessed; a process reparented to init or a subreaper has lost it.
    parents: dict[int, int] = {}

    def chain() -> Iterator[tuple[int, str | None]]:
        pid = first
        for _ in range(_MAX_CHAIN):
            if pid <= 1:
                yield pid, None
                return
            try:
                parent, name = source.parent(pid)
            except (OSError, ValueError):
                yield pid, None
                return
            walked.append(pid)
            parents[pid] = parent
            yield pid, name
            pid = parent

    host = pick_host(chain(), wrappers)
    if host is None:
        return None
    try:
        seen = observe(
            host, nonce=nonce, observed_at=observed_at or _utc_now_iso(), reader=source.name
        )
    except OSError:
        return None
    if seen is None:
        return None
    index = walked.index(host)
    try:
        if index == 0:
            still = caller_parent_pid(reader) if start_pid is None else host
        else:
            still = source.parent(walked[index - 1])[0]
    except (OSError, ValueError):
        return None
    return seen if still == host else None


def descends_from(pid: int, ancestor: ProcessWitness, *, reader: str | None = None) -> bool:
    """Whether process ``pid`` is the process ``ancestor`` names or one of its descendants.

    The ancestor must still be the very process witnessed (:func:`check` says MATCH, so a
    reused pid never counts); then ``pid``'s parent chain is walked (``/proc`` or psutil, as
    for :func:`observe`) up to pid 1. A launcher such as Codex's npm wrapper (a Node.js
    process that spawns the native ``codex`` as its child) runs hooks from a child of the
    launched process: that child is the launched body too.
    """
    return check(ancestor).state == "MATCH" and pid_descends(pid, ancestor.pid, reader=reader)


def pid_descends(pid: int, ancestor: int, *, reader: str | None = None) -> bool:
    """Whether ``pid`` is ``ancestor`` or one of its descendants now, by walking ``pid``'s
    parent chain (``/proc`` or psutil) up to pid 1; False when the chain cannot be read."""
    try:
        source = _reader(reader)
    except ImportError:
        return False
    for _ in range(_MAX_CHAIN):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            pid = source.parent(pid)[0]
        except (OSError, ValueError):
            return False
    return False
