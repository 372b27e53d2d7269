"""``onstation serve``: the operator's console, an HTTP API and its web page, over the ledger.

It binds 127.0.0.1 unless told otherwise (``--host``), and says so in its first line, the
URL to open. ``--port 0`` lets the system choose a free port; the line names the one chosen.
FastAPI and uvicorn come with the ``service`` extra; without them the command says how to
install them and exits 1.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from onstation.cli.common import Options, command_options
from onstation.core.errors import OnstationError

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8750


def _service_missing() -> str | None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"{exc.name or 'fastapi'} is not installed"
    return None


def _first_line(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    where = (
        "listening on loopback only (use --host to listen elsewhere)"
        if host in (LOOPBACK, "localhost", "::1")
        else f"listening on {host}: reachable from other machines; every request needs a token"
    )
    return f"onstation console at http://{shown}:{port}/ — {where}"


@click.command("serve")
@click.option("--host", default=LOOPBACK, show_default=True,
              help="Address to listen on (127.0.0.1: this machine only).")  # fmt: skip
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port (0: pick a free one and print it).")  # fmt: skip
@click.option("--alerts/--no-alerts", "alerts", default=True, show_default=True,
              help="Run the alerts loop (webhooks: onstation webhook) in it.")  # fmt: skip
@click.option("--alert-interval", type=click.FloatRange(0.1, 3600), default=10.0,
              show_default=True, help="Seconds between two alert detections.")  # fmt: skip
@command_options
def serve_cmd(host: str, port: int, alerts: bool, alert_interval: float, opts: Options) -> None:
    """The operator's console: HTTP API under /api/v1 and the web page, over the ledger."""
    missing = _service_missing()
    if missing is not None:
        click.echo(
            f"onstation: error: {missing}; install the service with "
            "pip install 'onstation[service]'",
            err=True,
        )
        sys.exit(1)
    import threading

    import uvicorn

    from onstation.api.app import create_app
    from onstation.ledger import Ledger

    # Refuse a missing or unusable ledger now, in one line, not on the first request.
    Ledger.open(opts.db, create=False).close()
    sock = listening_socket(host, port)
    chosen = int(sock.getsockname()[1])
    stopping = threading.Event()
    app = create_app(opts.db, stopping=stopping, background=_background(alerts, alert_interval))
    config = uvicorn.Config(app, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5, lifespan="on")  # fmt: skip
    server = _Server(config, stopping)
    click.echo(_first_line(host, chosen))
    sys.stdout.flush()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


#: Connections the system queues before the service accepts them (uvicorn's default).
LISTEN_BACKLOG = 2048


def listening_socket(host: str, port: int) -> Any:
    """The bound socket the service listens on (``port`` 0: the system picks one)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it a keep-alive client waits out a delayed ACK
    # (about 40 ms) on every request, as uvicorn writes a response's head and body apart.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
        # Listening before the address is printed: a client that connects as soon as it reads
        # it waits in the backlog while the service starts, instead of being refused (uvicorn
        # only listens once its start-up is done; it listens again with the same backlog).
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise OnstationError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def _background(alerts: bool, interval: float) -> list[Any]:
    """The background tasks ``serve`` starts with the app: the alerts loop (detect, deliver
    webhooks), on its own thread and ledger connection, never in a request or a relief."""
    if not alerts:
        return []
    from onstation.api.alerts import start_background

    return [lambda open_ledger: start_background(open_ledger, interval=interval)]


def _server_class() -> Any:
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, which also tells the app's event streams to end at shutdown."""

        def __init__(self, config: Any, stopping: Any) -> None:
            super().__init__(config)
            self._stopping = stopping

        def handle_exit(self, sig: int, frame: Any) -> None:
            # uvicorn's own handler also re-raises the signal after the shutdown (a Ctrl-C
            # would then end in a KeyboardInterrupt traceback); a stop asked for is a clean
            # exit (0), and a second Ctrl-C forces it as uvicorn's does.
            self._stopping.set()
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True

    return Server


def _Server(config: Any, stopping: Any) -> Any:
    return _server_class()(config, stopping)
