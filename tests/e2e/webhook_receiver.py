"""A webhook receiver on 127.0.0.1 for the e2e tests of alerts: it checks each request's
signature with the subscriber's secret and the real clock, answers the statuses it is told
to (then 200), and keeps what it got."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from onstation.api.webhooks import (
    ALERT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify_signature,
)


class Receiver:
    """What the receiver was told (secret, answers to come) and what it got."""

    def __init__(self) -> None:
        self.secret = ""
        self.got: list[dict[str, Any]] = []
        self.answers: list[int] = []
        self.url = ""


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver serving at ``Receiver.url`` until the block ends."""
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ok = verify_signature(state.secret, timestamp=self.headers.get(TIMESTAMP_HEADER),
                                  signature=self.headers.get(SIGNATURE_HEADER), body=body,
                                  now=datetime.now(UTC))  # fmt: skip
            status = (state.answers.pop(0) if state.answers else 200) if ok else 401
            state.got.append({"verified": ok, "status": status, "body": json.loads(body),
                              "alert": self.headers.get(ALERT_HEADER)})  # fmt: skip
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
