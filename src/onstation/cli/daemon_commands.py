"""``onstation daemon start|stop|status``: the per-user daemon (see :mod:`onstation.cli.daemon`).

The daemon is optional: without it every command runs in its own process, as it always did.
With it, hook calls, the status line, the heartbeat and the short ledger commands are run by
a warm, forked child instead of a fresh interpreter that imports the package each time.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import NoReturn

import click

from onstation.cli.common import Options, handle_errors
from onstation.cli.daemon_client import AUTO_IDLE_EXIT
from onstation.core.errors import BadInput, OnstationError

#: Seconds ``start`` waits for the daemon to be ready, ``stop`` for it to be gone.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
#: The longest Unix socket path the kernel accepts (``sun_path`` less its terminator).
MAX_SOCKET_PATH = 107


def _path(given: str | None) -> str:
    from onstation.cli import daemon_client

    path = given or daemon_client.socket_path()
    if path is None:
        raise BadInput(f"the daemon is switched off ({daemon_client.SWITCH_ENV}=off)",
                       field=daemon_client.SWITCH_ENV)  # fmt: skip
    if not os.path.isabs(path):
        raise BadInput(f"--socket: must be an absolute path (got {path!r})", field="socket")
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise BadInput(f"--socket: longer than {MAX_SOCKET_PATH} bytes", field="socket")
    return path


def _status(path: str, verb: str = "status") -> dict[str, object] | None:
    from onstation.cli.daemon import status

    return status(path, verb)


_SOCKET_OPTION = click.option(
    "--socket", "socket_path", default=None, metavar="PATH",
    help="The daemon's socket (env ONSTATION_DAEMON_SOCKET; default "
         "$XDG_RUNTIME_DIR/onstation/daemon.sock or /tmp/onstation-UID/daemon.sock).",
)  # fmt: skip
_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


@click.group("daemon")
def daemon_group() -> None:
    """The per-user daemon that runs hooks and short commands warm (optional)."""


@daemon_group.command("start")
@_SOCKET_OPTION
@click.option("--foreground", is_flag=True, help="Stay in the foreground (no log file).")
@click.option(
    "--postgres", is_flag=True,
    help="Load psycopg ahead (default: when ONSTATION_DB is a postgresql:// URL).",
)  # fmt: skip
@click.option(
    "--idle-exit", "idle_exit", type=click.IntRange(min=1), default=None, metavar="SECONDS",
    help="Stop after SECONDS without a call (default: keep running; a daemon the installed "
         f"hooks start stops after {AUTO_IDLE_EXIT}).",
)  # fmt: skip
@_JSON_OPTION
def daemon_start(socket_path: str | None, foreground: bool, postgres: bool,
                 idle_exit: int | None, as_json: bool) -> None:  # fmt: skip
    """Start this user's daemon (exit 5 when one already runs on the socket)."""
    postgres = postgres or os.environ.get("ONSTATION_DB", "").startswith(
        ("postgresql://", "postgres://"))  # fmt: skip
    opts = Options(json=as_json)
    with handle_errors(opts):
        from onstation.cli import daemon as server
        from onstation.cli.daemon_preload import preload
        from onstation.core.errors import Conflict

        path = _path(socket_path)
        if _status(path) is not None:
            raise Conflict(f"a daemon already listens on {path}")
        if foreground:
            modules = preload(postgres=postgres)
            daemon = server.Daemon(path, idle_exit)
            daemon.bind()
            _say(opts, {"socket": path, "pid": os.getpid(), "modules": modules},
                 f"onstation daemon: listening on {path} (pid {os.getpid()}, {modules} "
                 "modules loaded)")  # fmt: skip
            raise SystemExit(daemon.serve())
        directory = os.path.dirname(path)
        server.owned_private_dir(Path(directory))
        log = Path(directory) / "daemon.log"
        ready = server.daemonize(log)
        if ready is None:  # the daemon itself
            _run_background(path, postgres, idle_exit)
        _wait_ready(opts, ready, path, log)


def _run_background(path: str, postgres: bool, idle_exit: int | None) -> NoReturn:
    from onstation.cli import daemon as server
    from onstation.cli.daemon_preload import preload

    try:
        modules = preload(postgres=postgres)
        daemon = server.Daemon(path, idle_exit)
        daemon.bind()
    except OnstationError as exc:
        _clear_start_lock(path)
        _tell_parent(f"error {int(exc.exit_code)} {exc.message}")
        os._exit(int(exc.exit_code))
    except BaseException as exc:
        _tell_parent(f"error 1 {type(exc).__name__}: {exc}")
        os._exit(1)
    _clear_start_lock(path)
    _tell_parent(f"ready {os.getpid()} {modules}")
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} listening on {path} "
          f"(pid {os.getpid()}, {modules} modules)", flush=True)  # fmt: skip
    try:
        code = daemon.serve()
    except BaseException:  # the log says why; the process still ends here, not in click
        import traceback

        traceback.print_exc()
        os._exit(1)
    why = f" (none for {daemon.idle_exit:g} s)" if daemon.idled else ""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} stopped after "
          f"{daemon.served} calls{why}", flush=True)  # fmt: skip
    os._exit(code)


def _clear_start_lock(path: str) -> None:
    """The start is over (ONSTATION_DAEMON=auto): a later call may start one again."""
    from onstation.cli.daemon_client import start_lock

    with contextlib.suppress(OSError):
        os.unlink(start_lock(path))


def _tell_parent(line: str) -> None:
    fd = os.environ.pop("_ONSTATION_DAEMON_READY_FD", None)
    if fd is not None:
        os.write(int(fd), line.encode() + b"\n")
        os.close(int(fd))


def _wait_ready(opts: Options, ready: int, path: str, log: object) -> None:
    import select

    got = b""
    deadline = time.monotonic() + START_TIMEOUT
    while not got.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([ready], [], [], left)[0]:
            break
        chunk = os.read(ready, 4096)
        if not chunk:
            break
        got += chunk
    os.close(ready)
    words = got.decode("utf-8", "replace").split(" ", 2)
    if words[0] == "ready" and len(words) == 3:
        pid, modules = int(words[1]), int(words[2])
        _say(opts, {"socket": path, "pid": pid, "modules": modules, "log": str(log)},
             f"onstation daemon: listening on {path} (pid {pid}, {modules} modules loaded; "
             f"log {log})")  # fmt: skip
        return
    if words[0] == "error" and len(words) == 3:
        error = OnstationError(words[2].strip())
        error.exit_code = type(error.exit_code)(int(words[1]))
        raise error
    raise OnstationError(f"the daemon did not start within {START_TIMEOUT:g} s; see {log}")


def _say(opts: Options, data: dict[str, object], human: str) -> None:
    click.echo(json.dumps(data, sort_keys=True) if opts.json else human)


@daemon_group.command("stop")
@_SOCKET_OPTION
@_JSON_OPTION
def daemon_stop(socket_path: str | None, as_json: bool) -> None:
    """Stop this user's daemon once its calls in flight are done (none running: exit 0)."""
    opts = Options(json=as_json)
    with handle_errors(opts):
        path = _path(socket_path)
        answer = _status(path, "stop")
        if answer is None:
            _say(opts, {"socket": path, "stopped": False, "running": False},
                 f"onstation daemon: none was running on {path}")  # fmt: skip
            return
        pid, served = int(str(answer["pid"])), answer["served"]
        deadline = time.monotonic() + STOP_TIMEOUT
        while _alive(pid):
            if time.monotonic() > deadline:
                raise OnstationError(f"the daemon on {path} did not stop within "
                                     f"{STOP_TIMEOUT:g} s")  # fmt: skip
            time.sleep(0.05)
        _say(opts, {"socket": path, "stopped": True, "running": False, "pid": pid,
                    "served": served},
             f"onstation daemon: stopped (pid {pid}, {served} calls served)")  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (the daemon ran in the foreground under this very shell) is gone
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


@daemon_group.command("status")
@_SOCKET_OPTION
@_JSON_OPTION
def daemon_status(socket_path: str | None, as_json: bool) -> None:
    """Whether this user's daemon runs (exit 0) or not (exit 1), and how many calls it ran."""
    opts = Options(json=as_json)
    with handle_errors(opts):
        path = _path(socket_path)
        status = _status(path)
        if status is None:
            _say(opts, {"socket": path, "running": False},
                 f"onstation daemon: not running on {path}")  # fmt: skip
            raise SystemExit(1)
        from onstation.cli.daemon import described

        _say(opts, status, f"onstation daemon: {described(status)}")
