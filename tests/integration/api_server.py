"""A live console for the API tests: uvicorn serving ``create_app`` on a real socket of
127.0.0.1, in a thread of the test process, over a ledger URL of either backend.

Requests go over TCP with httpx exactly as any client's would; only the process is shared,
so a test can also look at the ledger directly (``Console.ledger``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn

from onstation.api.app import create_app
from onstation.cli.serve_command import listening_socket
from onstation.ledger import Ledger


@dataclass
class Console:
    """A running console: its base URL, an operator token, a ledger on the same database."""

    url: str
    ledger: Ledger
    db: str
    operator: str
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, token: str | None = None, **headers: str) -> httpx.Client:
        """An HTTP client on the console, with ``token`` as its bearer (None: no token)."""
        sent = dict(headers)
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        got = httpx.Client(base_url=self.url, headers=sent, timeout=30.0)
        self.clients.append(got)
        return got

    def as_operator(self) -> httpx.Client:
        """A client with the operator's token."""
        return self.client(self.operator)


@contextmanager
def live_console(db: str, **options: Any) -> Iterator[Console]:
    """Serve the console over ``db`` until the block ends; then stop it and wait."""
    stopping = threading.Event()
    app = create_app(db, stopping=stopping, poll_seconds=0.05, **options)
    sock = listening_socket("127.0.0.1", 0)  # as `onstation serve` listens
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=2)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    ready = threading.Event()
    while not server.started and thread.is_alive():
        ready.wait(0.02)
    assert server.started, "the console did not start"
    ledger = Ledger.open(db)
    operator = ledger.create_operator_token("alice", by="root").token
    console = Console(f"http://127.0.0.1:{port}", ledger, db, operator)
    try:
        yield console
    finally:
        for client in console.clients:
            client.close()
        stopping.set()
        server.should_exit = True
        thread.join(30)
        sock.close()
        ledger.close()


def sse_events(lines: Iterator[str], count: int) -> list[dict[str, str]]:
    """The next ``count`` events (``id``, ``event``, ``data``) of a stream's lines; comments
    and the ``retry`` field are passed over."""
    found: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in lines:
        if line == "":
            if current:
                found.append(current)
                current = {}
                if len(found) == count:
                    return found
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "retry":
            continue
        current[name] = value.removeprefix(" ")
    return found
