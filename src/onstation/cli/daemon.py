"""The per-user daemon: a warm, forking process that runs hook calls and short commands.

``onstation daemon start`` imports the package once (every module and what each imports),
listens on a Unix socket in a directory only its user can enter
(:func:`onstation.cli.daemon_client.socket_path`), and keeps one forked *spare* child
waiting. A client (:mod:`onstation.cli.daemon_client`) sends its argument vector,
environment and umask, with its standard streams and working directory as descriptors; the
daemon checks it (the same user, the same interpreter and install, a command it serves, the
package unchanged on disk since the daemon started), says ``ok PID`` and hands the call to
the spare at once. The spare becomes the client's command: it takes the descriptors as 0, 1,
2 and its working directory, the environment, umask and argument vector, and names the
client as the process it runs for (parent-chain walks start from there,
:func:`onstation.harness.witness.adopt_caller`); then, once the client's go-ahead byte
reaches it on the client's own connection, it runs the console entry point exactly as the
client would have, and exits (without the go-ahead it exits having run nothing). Setting up
while the client answers ``ok`` keeps that round trip off the caller's clock. The child
reports its exit status to the client itself; the daemon reaps it, reports the status (or
the signal that ended it) again for a child that ended without a word, and forks the next
spare.

A client that goes away (its host killed it) takes its command with it: the child is killed.
The daemon holds no SQLite connection and no state between calls: every call's child starts
from the freshly imported package, as a new process would. What it does hold are PostgreSQL
server sessions, each lent to one child at a time for one call and taken back by that
child's report (:mod:`onstation.ledger.pg_lent`): a server session outlives the call, a
process never does. A change to the package on disk
makes the daemon refuse the call (the client runs it itself) and stop, so an upgraded or
edited install is never served by old code.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import stat
import struct
import sys
import time
from pathlib import Path

from onstation.cli import daemon_client as client
from onstation.cli import daemon_pages
from onstation.cli.daemon_child import CLIENT_TIMEOUT, run_call
from onstation.cli.daemon_preload import PACKAGE, load_postgres
from onstation.cli.daemon_watch import PackageWatch
from onstation.core.errors import BadInput, Conflict, OnstationError
from onstation.harness.process_table import parse_stat_parent
from onstation.ledger import fastpath, pg_ahead
from onstation.ledger.pg_lent import LentSessions
from onstation.relief import hotpath_pg

#: The largest request frame accepted (argument vector and environment).
MAX_FRAME = 4 * 1024 * 1024
#: How often (ms) a spare holding a ledger opened ahead looks whether it was deleted or replaced.
AHEAD_CHECK_MS = 1000


def owned_private_dir(directory: Path) -> None:
    """Make ``directory`` (0700, this user's) or check that it is so; BadInput otherwise."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(directory)
    except OSError as exc:
        raise BadInput(f"daemon socket directory {directory}: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise BadInput(f"daemon socket directory {directory}: not a directory")
    if st.st_uid != os.getuid():
        raise BadInput(f"daemon socket directory {directory}: owned by uid {st.st_uid}")
    if st.st_mode & 0o077:
        raise BadInput(
            f"daemon socket directory {directory}: mode {stat.S_IMODE(st.st_mode):o} lets "
            "other users in (want 700)"
        )


def control(path: str, verb: str, timeout: float = CLIENT_TIMEOUT) -> str | None:
    """Ask the daemon at ``path`` (``status`` or ``stop``); its one-line answer, or None when
    no daemon of this user answers there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        uid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
        if uid != os.getuid():
            return None
        body = b"\0".join([client.MAGIC, b"control", verb.encode()])
        sock.sendall(len(body).to_bytes(4, "big") + body)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer.decode("utf-8", "replace").strip() or None
    except OSError:
        return None
    finally:
        sock.close()


def status(path: str, verb: str = "status") -> dict[str, object] | None:
    """The daemon's answer to ``verb`` (``status`` or ``stop``) as a record: its ``state``
    (running, stopping), ``pid``, calls ``served`` and ``in_flight``, ``hot_pages`` (how
    many pages the latest call dirtied, which each spare copies while it waits:
    :mod:`onstation.cli.daemon_pages`), ``ahead_taken`` (calls that took a ledger opened
    ahead), ``lent`` (calls lent a server session the daemon holds: ``ledger.pg_lent``) and
    ``idle_exit`` (the seconds without a call after which it stops, or None); None when no
    daemon of this user answers at ``path``."""
    answer = control(path, verb)
    if answer is None:
        return None
    state, _, rest = answer.partition(" ")
    words = rest.split(" socket ")[0].replace("in flight", "in_flight").split()
    fields = dict(zip(words[0::2], words[1::2], strict=False))
    return {"running": state == "running", "state": state, "pid": int(fields["pid"]),
            "served": int(fields["served"]), "in_flight": int(fields["in_flight"]),
            "hot_pages": int(fields.get("pages", 0)),
            "ahead_taken": int(fields.get("ahead", 0)),
            "lent": int(fields.get("lent", 0)),
            "idle_exit": float(fields["idle-exit"]) if "idle-exit" in fields else None,
            "socket": path}  # fmt: skip


def described(found: dict[str, object]) -> str:
    """A running daemon's :func:`status` record in words, as ``daemon status`` and ``doctor``
    say it."""
    idle = found["idle_exit"]
    stops = "" if idle is None else f"; stops after {idle:g} s without a call"
    return (f"{found['state']} on {found['socket']} (pid {found['pid']}, {found['served']} "
            f"calls served{stops})")  # fmt: skip


class _Call:
    """One client call a child holds: the client's connection, the child's channel (it says
    ``r`` there once it has the go-ahead and runs the command, ``d`` once the client has its
    outcome, then the pages it dirtied), and whether the client is gone."""

    __slots__ = ("channel", "conn", "counted", "done", "environ", "gone", "runs")

    def __init__(
        self, conn: socket.socket, channel: socket.socket, environ: list[bytes] | None = None
    ) -> None:
        self.conn = conn
        self.channel = channel
        #: The caller's environment (``NAME=VALUE`` items): a PostgreSQL ledger its child
        #: reports is connected to ahead under it.
        self.environ = environ or []
        channel.setblocking(False)
        self.gone = False
        self.runs = False
        self.done = False
        self.counted = False

    def _hear(self) -> None:
        while not self.done:
            try:
                said = self.channel.recv(1)
            except OSError:  # nothing more yet (BlockingIOError), or gone
                return
            if said == b"r":
                self.runs = True
            elif said == b"d" and self.runs:
                self.done = True
            else:
                return  # the child ended (or said something else): nothing more to hear

    def started(self) -> bool:
        """Whether the child has said it had the go-ahead (it says so before it runs the
        command, so by the time the client has the command's outcome this is known)."""
        self._hear()
        return self.runs

    def finished(self) -> bool:
        """Whether the child has said the client has the command's outcome (it says so
        before it tells the client, so a client gone after that is known to be done)."""
        self._hear()
        return self.done


class Daemon:
    """The listening daemon: accept, check, hand to the spare, reap and report."""

    def __init__(self, path: str, idle_exit: float | None = None) -> None:
        self.path = path
        #: Seconds without a call after which the daemon stops (None: never). A daemon the
        #: installed hooks started (``ONSTATION_DAEMON=auto``) has one, so that it does not
        #: outlive the sessions that wanted it; one a user started keeps running.
        self.idle_exit = idle_exit
        self.idled = False
        self.listener: socket.socket | None = None
        self._inode = 0
        self.watch = PackageWatch(PACKAGE)
        self.confinement = confinement(os.getpid())
        self.spare: tuple[int, socket.socket] | None = None
        self.calls: dict[int, _Call] = {}
        self.served = 0
        #: The pages the latest call dirtied, for the next spare to copy while it waits.
        self.hot: list[tuple[int, int]] = []
        #: The ledger the latest call had open, for the next spare to open while it waits.
        self.ahead: str | None = None
        #: The PostgreSQL ledger the latest such call used and that call's environment, for
        #: the next spare to connect to while it waits (``ledger.pg_ahead``).
        self.ahead_pg: tuple[str, dict[str, str]] | None = None
        #: Calls that took a ledger opened (or connected to) ahead by their spare.
        self.ahead_taken = 0
        #: The PostgreSQL server sessions held and lent to the children, one call at a time
        #: (``ledger.pg_lent``), and those the waiting spare was forked holding.
        self.lent = LentSessions()
        self.spare_slots: frozenset[int] = frozenset()
        self.spares = 0
        self.started = time.time()
        self._last_call = time.monotonic()
        self.stopping = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        #: Whether the last attempt to fork a spare in the loop failed (said once in the log).
        self._unforked = False

    # -- setting up ------------------------------------------------------------------------

    def bind(self) -> None:
        """Listen at :attr:`path`; Conflict when a daemon of this user already answers there."""
        directory = Path(self.path).parent
        owned_private_dir(directory)
        if control(self.path, "status") is not None:
            raise Conflict(f"a daemon already listens on {self.path}")
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISSOCK(st.st_mode):
                raise BadInput(f"daemon socket {self.path}: exists and is not a socket")
            os.unlink(self.path)  # a dead daemon's socket: nothing answered on it
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(self.path)
        except OSError as exc:
            listener.close()
            raise OnstationError(f"daemon socket {self.path}: {exc.strerror}") from None
        finally:
            os.umask(old)
        self._inode = os.stat(self.path).st_ino  # to unlink only our own socket file
        listener.listen(64)
        listener.setblocking(False)
        self.listener = listener

    def serve(self) -> int:
        """Run until stopped (SIGTERM, SIGINT, ``onstation daemon stop``, the package
        changed on disk, or :attr:`idle_exit` seconds without a call); every call in flight
        is reported before it returns 0."""
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        signal.set_wakeup_fd(self._wake_w)
        self._refill()
        try:
            while not (self.stopping and not self.calls):
                self._turn()
        finally:
            self._close_listener()
            if self.spare is not None:
                self.spare[1].close()  # the spare reads end of stream and exits
                self._reap_spare()
            self.lent.close()
        return 0

    # -- the loop ---------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum != signal.SIGCHLD:
            self.stopping = True

    def _turn(self) -> None:
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        if self.listener is not None and not self.stopping:
            poller.register(self.listener, select.POLLIN)
        for call in self.calls.values():
            if not call.gone:
                # Only the client's hang-up: its go-ahead byte on the same connection is the
                # child's to read.
                poller.register(call.conn, select.POLLRDHUP)
        by_fd = {call.conn.fileno(): pid for pid, call in self.calls.items() if not call.gone}
        for fd, _mask in poller.poll(1000):
            if fd == self._wake_r:
                self._drain_wake()
            elif self.listener is not None and fd == self.listener.fileno():
                self._accept()
            elif fd in by_fd:
                self._client_event(by_fd[fd])
        self._reap()
        if self.lent.wanted() and not self.calls and not self.stopping:
            # A quiet moment: no call waits while the server session is made. The spare
            # forked next holds it.
            self.lent.make_wanted(warm=hotpath_pg.warm)
        if self.spare is None and not self.calls and not self.stopping:
            # The spare that took the last call is replaced once no call runs (its fork
            # would take a core from one), knowing what the ended calls used; when calls
            # overlap, at once (_accept).
            try:
                self._refill()
                self._unforked = False
            except OSError as exc:
                # No process to be had now (a limit, no memory): the daemon goes on, the
                # next turn tries again, and a call meanwhile has one forked for it or runs
                # in its own process. Said once until a fork succeeds again.
                if not self._unforked:
                    print(f"spare not forked: {exc.strerror or exc}", file=sys.stderr,
                          flush=True)  # fmt: skip
                self._unforked = True
        if self._idle_long_enough():
            self.stopping = self.idled = True
        if self.stopping:
            self._close_listener()

    def _idle_long_enough(self) -> bool:
        if self.idle_exit is None or self.stopping:
            return False
        if self.calls:  # a call in flight is activity however long it runs
            self._last_call = time.monotonic()
            return False
        return time.monotonic() - self._last_call >= self.idle_exit

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def _client_event(self, pid: int) -> None:
        call = self.calls[pid]
        call.gone = True
        if call.finished():
            return  # it ended having its outcome; the child is only saying what it learnt
        # The client hung up (its host killed it): its command goes with it.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare[0]:
                self.spare[1].close()
                self.spare = None
                continue
            call = self.calls.pop(pid, None)
            if call is None:
                continue
            self._count(call)
            if call.runs:
                self._learn(pid, call)
            else:
                self.lent.returned(pid, b"")  # none was used; none is trusted either
            call.channel.close()
            if not call.runs and not os.WIFSIGNALED(status):
                call.conn.close()  # no go-ahead came: nothing ran, and the client is gone
                continue
            # Killed before it read a go-ahead (the client forwards a signal to the child
            # the moment it is named): nothing ran, and the client, which may be waiting for
            # the outcome, gets the signal as it would have running the command itself.
            if os.WIFSIGNALED(status):
                line = b"signal %d\n" % os.WTERMSIG(status)
            else:
                line = b"exit %d\n" % os.waitstatus_to_exitcode(status)
            if not call.gone:
                try:
                    call.conn.setblocking(True)
                    call.conn.settimeout(CLIENT_TIMEOUT)
                    call.conn.sendall(line)
                except OSError:
                    pass
            call.conn.close()

    def _learn(self, pid: int, call: _Call) -> None:
        """Keep the set of pages an ended child said it dirtied and the ledger it had open
        (:mod:`daemon_pages`), and take back the server session it was lent."""
        data = b""
        with contextlib.suppress(OSError):  # the end of what it sent, or nothing
            while chunk := call.channel.recv(65536):
                data += chunk
        ledger, runs, took, lent = daemon_pages.read_report(data)
        self.lent.returned(pid, lent)
        self.hot = self.hot if runs is None else runs
        self.ahead_taken += took
        if ledger is not None and daemon_pages.is_postgres(ledger):
            self.ahead_pg = (ledger, daemon_pages.environment(call.environ))
            self.lent.want(*self.ahead_pg)
        elif ledger is not None:
            # The calls moved to an SQLite ledger: a server connection made ahead for every
            # spare would go unused (a local file opened ahead costs nothing elsewhere).
            self.ahead, self.ahead_pg = ledger, None

    def _count(self, call: _Call) -> None:
        """Count a call as served once its child has the go-ahead."""
        if not call.counted and call.started():
            call.counted = True
            self.served += 1

    def _reap_spare(self) -> None:
        if self.spare is None:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.spare[0], 0)
        self.spare = None

    def _close_listener(self) -> None:
        if self.listener is None:
            return
        try:
            # Only our own socket: a daemon started since on the same path keeps its own.
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass
        self.listener.close()
        self.listener = None

    # -- one call ---------------------------------------------------------------------------

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn.setblocking(True)
        conn.settimeout(CLIENT_TIMEOUT)
        handed = False
        fds: list[int] = []
        try:
            caller, uid, _gid = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            )
            frame, fds = _read_frame(conn)
            handed = self._take(conn, caller, uid, frame, fds)
            for fd in fds:  # the child holds its own copies
                os.close(fd)
            fds = []
            if handed and len(self.calls) > 1:
                # Calls overlap: the next may well come before these end, so its spare is
                # made now (after the close: it must not inherit the descriptors). A lone
                # call's next spare is forked once it has ended (_turn), not beside it.
                self._refill()
        except (OSError, ValueError, IndexError):
            pass  # a malformed or vanished client: dropped, it runs its command itself
        except Exception:  # a defect here must not end the daemon: say it in the log
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        finally:
            for fd in fds:  # the child holds its own copies
                os.close(fd)
            if not handed:
                conn.close()

    def _refuse(self, conn: socket.socket, reason: str) -> bool:
        with contextlib.suppress(OSError):
            conn.sendall(b"no " + reason.encode() + b"\n")
        return False

    def _take(
        self, conn: socket.socket, caller: int, uid: int, frame: bytes, fds: list[int]
    ) -> bool:
        """Check one call and hand it to the spare; whether it was handed over."""
        if uid != os.getuid():
            return self._refuse(conn, "another user")
        fields = frame.split(b"\0")
        if fields[0] != client.MAGIC:
            return self._refuse(conn, "another protocol")
        if fields[1:2] == [b"control"]:
            self._control(conn, fields[2:3])
            return False
        if len(fds) != 4:
            return self._refuse(conn, "no descriptors")
        executable, package = os.fsdecode(fields[1]), os.fsdecode(fields[2])
        if executable != sys.executable or not _same_install(package):
            return self._refuse(conn, "another interpreter or install")
        argc = int(fields[4])
        argv = [os.fsdecode(a) for a in fields[5 : 5 + argc]]
        if not client.served(argv):
            return self._refuse(conn, "not served")
        if confinement(caller) != self.confinement:
            # A command run inside a sandbox (Codex's, Claude Code's Bash sandbox: their own
            # namespaces, no_new_privs, a seccomp filter) must stay inside it: served here it
            # would read and write as an unconfined process.
            return self._refuse(conn, "a confined caller")
        if self.stopping:
            return self._refuse(conn, "stopping")
        if self.watch.changed():
            self.stopping = True  # the code on disk changed: stop, and let it run there
            return self._refuse(conn, "the package changed on disk")
        if self.spare is None:
            self._refill()
        assert self.spare is not None
        child, channel = self.spare
        conn.sendall(b"ok %d\n" % child)
        environ = fields[5 + argc :]
        # The PostgreSQL ledger this call's environment names, else the one the calls last
        # used: the server session to lend (the child takes it only for its very ledger),
        # and the next spare's guess. Worked out while the client answers ``ok``.
        guess = daemon_pages.named_postgres(environ) or self.ahead_pg
        slot = None if guess is None else self.lent.lend(*guess, child, self.spare_slots)
        # The child gets the connection too: it waits there for the client's go-ahead (a
        # client that gave up before sending it never has its command run) and reports its
        # own exit status the moment it has one (its process teardown, several milliseconds,
        # is then off the caller's clock); the daemon reports only for a child that died
        # without saying.
        payload = (
            caller.to_bytes(4, "big")
            + (-1 if slot is None else slot).to_bytes(4, "big", signed=True)
            + frame
        )
        rights = struct.pack("5i", *fds, conn.fileno())
        # The spare may have died after the client was told its pid (a signal the client
        # forwarded at once, on a loaded machine before this hand-over): nothing ran. The
        # call is kept all the same, so that the client is told how the child ended when it
        # is reaped, as for a child killed before its go-ahead, not left with a closed
        # connection (an unknown outcome).
        with contextlib.suppress(OSError):
            channel.sendmsg([len(payload).to_bytes(4, "big") + payload],
                            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])  # fmt: skip
        self.spare = None
        self.calls[child] = _Call(conn, channel, environ)
        self._last_call = time.monotonic()
        # Guesses for the next spare (one forked before this call ends, when calls overlap,
        # has no report of what it used yet): the ledger this call's environment names.
        # Made after the hand-over, off the caller's clock.
        self.ahead = daemon_pages.named_ledger(environ) or self.ahead
        self.ahead_pg = guess
        return True

    def _control(self, conn: socket.socket, verb: list[bytes]) -> None:
        for call in self.calls.values():
            self._count(call)
        if verb == [b"stop"]:
            self.stopping = True
        state = "stopping" if self.stopping else "running"
        idle = "" if self.idle_exit is None else f"idle-exit {self.idle_exit:g} "
        answer = (f"{state} pid {os.getpid()} served {self.served} in flight {len(self.calls)} "
                  f"pages {sum(count for _first, count in self.hot)} since {int(self.started)} "
                  f"ahead {self.ahead_taken} lent {self.lent.lent} {idle}"
                  f"socket {self.path}\n")  # fmt: skip
        with contextlib.suppress(OSError):
            conn.sendall(answer.encode())

    def _refill(self) -> None:
        """Fork the next spare child: it waits, warm, for the call it will run."""
        if self.ahead_pg is not None:
            load_postgres()  # once: every later spare and call then has psycopg loaded
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # One spare in LEARN_EVERY copies nothing and its call reports the pages it dirtied:
        # a call after a copying spare would report the copies too, whether it wrote them
        # or not, and the set would only grow.
        learn = not self.hot or self.spares % daemon_pages.LEARN_EVERY == 0
        self.spares += 1
        self.spare_slots = self.lent.slots()
        try:
            pid = os.fork()
        except OSError:
            parent_end.close()
            child_end.close()
            raise
        if pid == 0:  # pragma: no cover - runs in the forked child (tested end to end)
            parent_end.close()
            self._become_spare(child_end, learn)
        child_end.close()
        self.spare = (pid, parent_end)

    def _become_spare(
        self, channel: socket.socket, learn: bool
    ) -> None:  # pragma: no cover - child
        try:
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            # Nothing of the daemon's stays open here but the channel: not the listener,
            # not another call's connection, not a descriptor a client sent (a copy held
            # here would keep that client's pipes open after it ended).
            # The daemon's socket objects let go of their descriptors first (detach), so
            # that none closes a reused descriptor number when it is collected.
            held = [call.conn for call in self.calls.values()]
            held += [] if self.listener is None else [self.listener]
            held += [] if self.spare is None else [self.spare[1]]
            for sock in held:
                sock.detach()
            # ... but the server sessions the daemon holds: one of them may be lent to this
            # spare's call (never used here otherwise, and never closed: a copy).
            keep = channel.fileno()
            low = 3
            for fd in sorted({keep, *self.lent.fds()}):
                os.closerange(low, fd)
                low = fd + 1
            os.closerange(low, os.sysconf("SC_OPEN_MAX"))
            # Once the calls running when it was forked have ended (until then the warm-up
            # would take a core from them) and while no call has come: open the last call's
            # ledger (docs/daemon.md), compile the statements a session runs on it, then
            # copy the pages it dirtied (a chunk at a time: a call that arrives stops
            # either).
            poller = select.poll()
            poller.register(keep, select.POLLIN)
            _await_calls_done(list(self.calls), keep)
            ahead = self.ahead is not None and fastpath.open_ahead(self.ahead)
            if self.ahead_pg is not None and not self.lent.has(*self.ahead_pg):
                pg_ahead.connect_ahead(*self.ahead_pg, warm=hotpath_pg.warm)
            called = bool(poller.poll(0))
            prefault = daemon_pages.Prefault([] if learn or called else self.hot)
            if ahead and self.ahead is not None:  # the warm-up's statements (ledger.fastpath)
                fastpath.compile_ahead(self.ahead, lambda: bool(poller.poll(0)))
            while not prefault.done and not poller.poll(0):
                prefault.step()
            while not poller.poll(AHEAD_CHECK_MS if ahead else -1):
                if fastpath.ahead_stale():
                    os._exit(0)  # its ledger was deleted or replaced: not kept alive here
            got, fds = _read_frame(channel)
        except BaseException:
            os._exit(0)
        if not got:
            os._exit(0)  # the daemon stopped: no call will come
        slot = int.from_bytes(got[4:8], "big", signed=True)
        if slot >= 0:
            self.lent.adopt(slot)
        run_call(int.from_bytes(got[:4], "big"), got[8:], fds, channel, learn=learn)


def _await_calls_done(pids: list[int], channel: int) -> None:  # pragma: no cover - spare
    """Return once every call in flight when this spare was forked (``pids``, the daemon's
    children) has ended, or at once when a call comes on ``channel``: the spare's warm-up
    then never takes a core from a call still running (docs/daemon.md)."""
    daemon = os.getppid()
    waiting = select.poll()
    waiting.register(channel, select.POLLIN)
    opened: list[int] = []
    watched: set[int] = set()
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except (OSError, AttributeError):
                continue  # ended and reaped already (or no pidfds here: not waited on)
            opened.append(fd)
            # Opened after the number was reaped and reused, it names another process.
            if _parent_of(pid) == daemon:
                waiting.register(fd, select.POLLIN)
                watched.add(fd)
        while watched:
            for fd, _mask in waiting.poll():
                if fd == channel:
                    return
                watched.discard(fd)
                waiting.unregister(fd)
    finally:
        for fd in opened:
            os.close(fd)


def _parent_of(pid: int) -> int | None:
    """The parent process id of ``pid`` (``/proc/PID/stat``), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return parse_stat_parent(fh.read())[0]
    except (OSError, ValueError):
        return None


_NAMESPACES = ("mnt", "pid", "user", "net", "ipc", "uts", "cgroup")


def confinement(pid: int) -> tuple[str, ...]:
    """What confines process ``pid``: its namespaces, ``no_new_privs`` and seccomp mode
    (``/proc``). A caller confined otherwise than the daemon is not served."""
    found: list[str] = []
    for name in _NAMESPACES:
        try:
            found.append(os.readlink(f"/proc/{pid}/ns/{name}"))
        except OSError:
            found.append("?")
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            status = fh.read().decode("ascii", "replace")
    except OSError:
        status = ""
    for line in status.splitlines():
        if line.startswith(("NoNewPrivs:", "Seccomp:")):
            found.append(line.replace("\t", " "))
    return tuple(found)


def _same_install(cli_dir: str) -> bool:
    """Whether the client's ``onstation/cli`` directory is this daemon's."""
    return cli_dir == _CLI_DIR or Path(cli_dir).resolve() == PACKAGE / "cli"


_CLI_DIR = os.path.dirname(os.path.abspath(__file__))


def _read_frame(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One length-prefixed frame and the descriptors sent with it (b"" at end of stream)."""
    data, fds, _flags, _addr = socket.recv_fds(sock, 65536, 8)
    if not data:
        return b"", list(fds)
    if len(data) < 4:
        raise ValueError("short frame")
    want = int.from_bytes(data[:4], "big")
    if want > MAX_FRAME:
        raise ValueError("frame too large")
    body = bytearray(data[4:])
    while len(body) < want:
        chunk = sock.recv(min(1 << 20, want - len(body)))
        if not chunk:
            raise ValueError("frame cut short")
        body += chunk
    return bytes(body), list(fds)


def daemonize(log: Path) -> int | None:
    """Fork into the background (a new session, stdin from /dev/null, output to ``log``).
    In the parent: the pipe to read the daemon's readiness from; in the daemon: None."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid > 0:
        os.close(ready_w)
        return ready_r
    os.close(ready_r)
    os.setsid()
    os.chdir("/")  # holds no directory of the user's busy; each call brings its own
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.environ["_ONSTATION_DAEMON_READY_FD"] = str(ready_w)
    return None
