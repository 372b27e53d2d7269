"""The call a daemon's child runs (:mod:`onstation.cli.daemon`): it becomes the client's
command (the client's descriptors as its standard streams, its directory, environment, umask
and argument vector), waits for the client's go-ahead, runs the console entry point exactly
as the client would have, and reports its exit status to the client itself, then what it
learnt to the daemon. Everything here runs in the forked child only.
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import signal
import socket
import sys
import time
from typing import NoReturn

from onstation.cli import daemon_pages
from onstation.ledger import fastpath

#: Seconds the daemon waits for a client's frame and go-ahead before dropping it (and a
#: child for the go-ahead).
CLIENT_TIMEOUT = 2.0


def _std_stream(fd: int, encoding: str, errors: str) -> io.TextIOWrapper:
    """A standard stream on ``fd`` made as Python makes it at start-up."""
    tty = os.isatty(fd)
    if fd == 0:
        return io.TextIOWrapper(io.BufferedReader(io.FileIO(fd, "rb", closefd=False)),
                                encoding=encoding, errors=errors, line_buffering=tty)  # fmt: skip
    raw = io.FileIO(fd, "wb", closefd=False)
    if fd == 2:  # stderr: line-buffered and backslash-escaping, terminal or not
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding,
                                errors="backslashreplace", line_buffering=True)  # fmt: skip
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors=errors,
                            line_buffering=tty)  # fmt: skip


def _go_ahead(conn_fd: int, channel: socket.socket) -> bool:  # pragma: no cover - child
    """Wait (bounded) for the client's go-ahead byte; once it is here, tell the daemon (``r``
    on the channel) that the command runs."""
    poller = select.poll()
    poller.register(conn_fd, select.POLLIN)
    try:
        if not poller.poll(int(CLIENT_TIMEOUT * 1000)) or os.read(conn_fd, 1) != b"g":
            return False
        channel.sendall(b"r")
    except OSError:
        return False
    return True


def run_call(
    caller: int, frame: bytes, fds: list[int], channel: socket.socket, *, learn: bool = False
) -> None:  # pragma: no cover - child
    """Become the client's command and, on the client's go-ahead, run it; never returns (the
    process exits). ``learn``: once the client has the outcome, send the daemon the pages the
    call dirtied (a spare that copied nothing ahead)."""
    code = 1
    try:
        fields = frame.split(b"\0")
        argc = int(fields[4])
        argv = [os.fsdecode(a) for a in fields[5 : 5 + argc]]
        environ = dict(
            os.fsdecode(item).split("=", 1) for item in fields[5 + argc :] if b"=" in item
        )
        os.fchdir(fds[3])
        os.close(fds[3])
        for target, fd in enumerate(fds[:3]):
            if fd != target:
                os.dup2(fd, target)
        for fd in set(fds[:3]) - {0, 1, 2}:
            os.close(fd)
        os.umask(int(fields[3]))
        # Only what differs is changed: most of a caller's environment is the daemon's own.
        for key in [k for k in os.environ if k not in environ]:
            del os.environ[key]
        for key, value in environ.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
        time.tzset()
        import tempfile

        tempfile.tempdir = None  # the client's TMPDIR, not the daemon's
        encoding, errors = _stdio_encoding(environ)
        sys.stdin = _std_stream(0, encoding, errors)
        sys.stdout = _std_stream(1, encoding, errors)
        sys.stderr = _std_stream(2, encoding, errors)
        # As at start-up, the originals are the streams (code that restores them finds these).
        setattr(sys, "__stdin__", sys.stdin)  # noqa: B010 - typeshed calls them Final
        setattr(sys, "__stdout__", sys.stdout)  # noqa: B010
        setattr(sys, "__stderr__", sys.stderr)  # noqa: B010
        sys.argv = ["onstation", *argv]
        from onstation.harness import witness

        witness.adopt_caller(caller)
        from onstation.cli.entry import dispatch

        if not _go_ahead(fds[4], channel):
            os._exit(0)  # nothing ran; the client runs it itself, or is gone
        _report_on_exit(fds[4], channel, learn)
        fastpath.defer_settling()  # a WAL checkpoint waits until the client has its outcome
        dispatch(argv)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    # As at the end of a process of its own: the exit handlers, then the streams flushed.
    import atexit

    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    _flush()
    os._exit(code)


def _report_on_exit(
    conn_fd: int, channel: socket.socket, learn: bool
) -> None:  # pragma: no cover - child
    """Make every way this process ends on purpose (``os._exit``, which the hook fast path
    and its watchdog call directly, and the end of :func:`run_call`) first flush the
    standard streams, let go of the client's descriptors and tell the client the status;
    then, off the client's clock and with ``learn``, tell the daemon which pages the call
    dirtied (``d`` first, on the channel, before the client can have the outcome: the daemon
    then leaves this process alone when the client hangs up)."""
    real_exit = os._exit

    def finish(status: int) -> NoReturn:
        _flush()
        with contextlib.suppress(OSError):
            channel.sendall(b"d")
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)  # the host sees end of output now, not after teardown
            os.write(conn_fd, b"exit %d\n" % (status & 0xFF))
        except OSError:
            pass
        with contextlib.suppress(Exception):  # a checkpoint that fails: a later call's
            fastpath.settle_deferred()
        with contextlib.suppress(OSError):  # never waits: what does not fit is not sent
            channel.setblocking(False)
            channel.send(daemon_pages.report(learn))
        real_exit(status)

    os._exit = finish  # this process only: it ends the way the command chose, reported


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):  # the stream is gone; the exit code still says it
        sys.stderr.write(f"{code}\n")
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
            stream.flush()


def _stdio_encoding(environ: dict[str, str]) -> tuple[str, str]:
    """The standard streams' encoding and error handler, as Python picks them at start-up:
    ``PYTHONIOENCODING`` when set, else the daemon's own (the same user's locale)."""
    given = environ.get("PYTHONIOENCODING", "")
    base = sys.__stdin__ if sys.__stdin__ is not None else sys.stdin
    encoding = getattr(base, "encoding", None) or "utf-8"
    errors = getattr(base, "errors", None) or "strict"
    if given:
        name, _, handler = given.partition(":")
        encoding = name or encoding
        errors = handler or errors
    return encoding, errors
