"""The client half of the per-user daemon: hand this command to a warm process, or run it here.

Every hook call is a new Python process, and most of its cost is importing onstation, not
answering. ``onstation daemon start`` keeps one process per user with the package already
imported (:mod:`onstation.cli.daemon`); this module, imported by the console entry point
before anything else, hands it the command as it is: the argument vector, the environment,
the umask, and the process's own standard input, output and error and working directory as
file descriptors (``SCM_RIGHTS``). A forked child of the daemon runs the very same code on
those descriptors while this process waits, then this process ends with the child's exit
status (or dies of the child's signal). Nothing of the command's own behaviour changes: its
output goes straight to the descriptors the host gave, and its ledger writes are its own.

It fails open: no daemon, a daemon of another user, another interpreter or another install,
a daemon that says no, a command it does not serve, or any error before the daemon accepted
the call, and the command runs in this process as if there were no daemon. Once a child has
taken the call it is never run twice. The child reports its own exit status, so the daemon
may go away meanwhile; only when both end without a word does this end with exit 1 and one
line saying the outcome is unknown.

Only the standard library's C modules are imported here (``_socket``, ``_signal``,
``posix``): this runs on every hook call, and ``socket.py`` alone would cost more than the
rest of the client. Not even ``os``: the installed hook command starts Python without the
site module (``python -S``, see :mod:`onstation.cli.hook_launcher`), which is what imports
``os`` otherwise, so the client's hot path keeps to ``posix`` (``os`` is only taken when
another module already loaded it, as its environment is then the one to send).
"""

import posix
import sys

TYPE_CHECKING = False  # typing costs import time on every hook call
if TYPE_CHECKING:
    from collections.abc import Mapping

#: The protocol's first field; a daemon that speaks another one answers "no".
MAGIC = b"onstation-daemon-1"
#: Where the daemon listens (a Unix socket path); ``ONSTATION_DAEMON=off`` never uses one,
#: ``ONSTATION_DAEMON=auto`` starts one in the background when none answers.
SOCKET_ENV = "ONSTATION_DAEMON_SOCKET"
SWITCH_ENV = "ONSTATION_DAEMON"
#: Seconds to connect and to hear the daemon's acceptance; past them the command runs here.
CONNECT_TIMEOUT = 2.0
#: The exit code when the daemon went away after taking the call (its outcome unknown).
EXIT_LOST = 1
#: Signals a waiting client passes on to the child running its command.
FORWARDED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")

#: The commands the daemon serves: short, non-interactive calls over the ledger. A command
#: is served when its first words are one of these. Long-running and process-launching
#: commands (serve, supervise, relieve, demo, simulate, fake-agent, tour), the ones that
#: examine this very process (doctor), and ``--help`` and ``--version`` (answered without
#: click in less time than a hand-over takes) always run in the calling process.
SERVED: frozenset[tuple[str, ...]] = frozenset(
    {
        ("hook",),
        ("statusline",),
        ("lease",),
        ("node",),
        ("history",),
        ("team", "status"),
        ("halts",),
        ("halt",),
        ("unhalt",),
        ("effect",),
        ("task",),
        ("message",),
        ("guard",),
        ("note",),
        ("denials",),
        ("grant",),
        ("episode",),
        ("actor",),
        ("breaker",),
        ("respawn",),
        ("report",),
        ("challenge",),
        ("workspace",),
        ("plan",),
        ("alerts", "list"),
        ("webhook", "list"),
        ("token", "list"),
    }
)


def served(argv: list[str]) -> bool:
    """Whether the daemon serves the command ``onstation ARGV...``."""
    return bool(argv) and ((argv[0],) in SERVED or (len(argv) > 1 and (argv[0], argv[1]) in SERVED))


def _environb() -> "dict[bytes, bytes]":
    """The process's environment as bytes: ``os.environb`` once ``os`` is loaded (it follows
    every change made through ``os.environ``), else the interpreter's own copy."""
    loaded = sys.modules.get("os")
    return loaded.environb if loaded is not None else posix.environ


def _fsencode(text: str) -> bytes:
    return text.encode(sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())


def _getenv(name: str) -> "str | None":
    value = _environb().get(_fsencode(name))
    return None if value is None else value.decode(sys.getfilesystemencoding(),
                                                   sys.getfilesystemencodeerrors())  # fmt: skip


def socket_path(environ: "Mapping[str, str] | None" = None) -> "str | None":
    """Where this user's daemon listens, or None when the daemon is switched off.

    ``ONSTATION_DAEMON_SOCKET`` names it; otherwise ``$XDG_RUNTIME_DIR/onstation/daemon.sock``
    where that is set, else ``/tmp/onstation-UID/daemon.sock``.
    """
    get = _getenv if environ is None else environ.get
    if (get(SWITCH_ENV) or "").lower() in ("off", "0", "no", "false"):
        return None
    given = get(SOCKET_ENV)
    if given:
        return given
    runtime = get("XDG_RUNTIME_DIR")
    if runtime:
        return f"{runtime}/onstation/daemon.sock"
    return f"/tmp/onstation-{posix.getuid()}/daemon.sock"  # noqa: S108 - checked 0700 and ours


def _int32s(values: tuple[int, ...]) -> bytes:
    return b"".join(v.to_bytes(4, sys.byteorder, signed=True) for v in values)


def request(argv: list[str]) -> bytes:
    """The request frame for ``argv`` run here: length, then NUL-separated fields (the
    working directory and the standard streams go beside it as descriptors)."""
    umask = posix.umask(0o022)
    posix.umask(umask)
    fields = [MAGIC, _fsencode(sys.executable), _fsencode(__file__.rpartition("/")[0]),
              b"%d" % umask, b"%d" % len(argv), *(_fsencode(a) for a in argv)]  # fmt: skip
    fields += [k + b"=" + v for k, v in _environb().items() if b"\0" not in k + v]
    body = b"\0".join(fields)
    return len(body).to_bytes(4, "big") + body


def switch(default: str = "on") -> str:
    """``ONSTATION_DAEMON`` as given (lower case), or ``default`` where it is unset or empty:
    ``off`` never uses a daemon, ``on`` uses one that runs, ``auto`` also starts one."""
    return (_getenv(SWITCH_ENV) or default).lower()


def forward(argv: list[str], *, default_switch: str = "on") -> None:
    """Run ``onstation ARGV...`` in the daemon and end this process with its outcome; return
    (having done nothing) when the command is to run in this process instead.

    ``default_switch`` is what an unset ``ONSTATION_DAEMON`` means: ``on`` for the console
    script, ``auto`` for the installed hook and status-line commands
    (:mod:`onstation.cli.hook_launcher`), which a host runs outside any sandbox of its own,
    so that an install is fast without a step of the user's (docs/daemon.md)."""
    if not served(argv):
        return
    path = socket_path()
    if path is None:
        return
    try:
        import _socket
    except ImportError:
        return
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return
    try:
        pid = _handed_over(sock, path, argv, _socket)
    except (FileNotFoundError, ConnectionRefusedError):
        pid = None  # no daemon listens there
        if switch(default_switch) == "auto":
            start_in_background(path)
    except (OSError, ValueError):
        pid = None  # nothing was handed over: the go-ahead is the last thing sent
    if pid is None:
        sock.close()
        return
    _wait(sock, pid)


def start_lock(path: str) -> str:
    """The file that says a daemon for ``path`` is being started (``ONSTATION_DAEMON=auto``)."""
    import os

    return os.path.join(os.path.dirname(path), "starting")


def start_in_background(path: str) -> None:
    """``ONSTATION_DAEMON=auto``: start this user's daemon, not waiting for it (this call runs
    in its own process meanwhile). One start at a time: a start lock younger than
    :data:`START_LOCK_SECONDS` (the daemon removes it once it listens) means one is under
    way. Any failure is silent: the call goes on without a daemon, as with none."""
    import os

    lock = start_lock(path)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            import time

            if time.time() - os.lstat(lock).st_mtime < START_LOCK_SECONDS:
                return
            os.unlink(lock)  # a start that never finished: try again
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        env = dict(os.environ)
        env[SOCKET_ENV] = path
        devnull = os.devnull
        actions = [(os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0)]  # fmt: skip
        argv = [sys.executable, "-c", _START, "daemon", "start", "--idle-exit", str(AUTO_IDLE_EXIT)]
        os.posix_spawn(sys.executable, argv, env, file_actions=actions, setsid=True)
    except OSError:
        pass


#: Seconds a start lock holds off another automatic start.
START_LOCK_SECONDS = 60
#: Seconds without a call after which a daemon started automatically stops: it does not
#: outlive the sessions whose hooks wanted it (the next hook call starts one again).
AUTO_IDLE_EXIT = 1800
#: The console entry point, run as ``python -c`` (sys.argv[1:] is then "daemon start").
_START = "from onstation.cli.entry import main; main()"


def _handed_over(sock: object, path: str, argv: list[str], _socket: object) -> int | None:
    """The pid of the daemon's child that took the call, or None (run it here)."""
    s = sock  # a _socket.socket; typed loosely so this module imports nothing for typing
    m = _socket
    s.settimeout(CONNECT_TIMEOUT)  # type: ignore[attr-defined]
    s.connect(path)  # type: ignore[attr-defined]
    # The daemon must be this user's: a socket another user put at the path would otherwise
    # receive this process's descriptors and act as this user.
    cred = s.getsockopt(m.SOL_SOCKET, m.SO_PEERCRED, 12)  # type: ignore[attr-defined]
    if int.from_bytes(cred[4:8], sys.byteorder) != posix.getuid():
        return None
    cwd_fd = posix.open(".", posix.O_RDONLY | posix.O_DIRECTORY | posix.O_CLOEXEC)
    try:
        frame = request(argv)
        fds = _int32s((0, 1, 2, cwd_fd))
        rights = [(m.SOL_SOCKET, m.SCM_RIGHTS, fds)]  # type: ignore[attr-defined]
        sent = s.sendmsg([frame], rights)  # type: ignore[attr-defined]
        if sent < len(frame):
            s.sendall(frame[sent:])  # type: ignore[attr-defined]
    finally:
        posix.close(cwd_fd)
    line = _line(s)
    if not line.startswith(b"ok "):
        return None  # "no REASON": the daemon will not run it; run it here
    pid = int(line[3:])
    # The go-ahead: the daemon hands the call to its child only once it has this byte, and
    # this process never runs the command itself after sending it. A client that timed out
    # before it never sent it, so the command cannot run both here and there.
    s.sendall(b"g")  # type: ignore[attr-defined]
    return pid


def _line(sock: object) -> bytes:
    """The first newline-ended line from the daemon, without the newline (b"" at end of
    stream). What follows it is dropped: the only line that can follow one the client acts
    on is the daemon's copy of a status its child already reported."""
    got = b""
    while b"\n" not in got:
        chunk = sock.recv(64)  # type: ignore[attr-defined]
        if not chunk:
            return b""
        got += chunk
    return got.split(b"\n", 1)[0]


def _wait(sock: object, pid: int) -> None:
    """Wait for the child's outcome (passing signals on to it) and end this process so."""
    import _signal  # type: ignore[import-not-found]  # signal.py's C half, no stub

    def pass_on(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 - contextlib costs import time on every hook call
            posix.kill(pid, signum)
        except OSError:
            pass

    for name in FORWARDED_SIGNALS:
        _signal.signal(getattr(_signal, name), pass_on)
    sock.settimeout(None)  # type: ignore[attr-defined]
    try:
        line = _line(sock)
    except OSError:
        line = b""
    kind, _, value = line.partition(b" ")
    if kind == b"exit" and value.isdigit():
        posix._exit(int(value))
    if kind == b"signal" and value.isdigit():
        signum = int(value)
        _signal.signal(signum, _signal.SIG_DFL)
        posix.kill(posix.getpid(), signum)
        posix._exit(128 + signum)
    posix.write(2, b"onstation: the daemon and its child %d ended without a word while running "
             b"this command; the outcome is unknown\n" % pid)  # fmt: skip
    posix._exit(EXIT_LOST)
