"""The console's ASGI application: ``create_app(db_url)`` builds it (``onstation serve`` runs it).

FastAPI over Starlette, served by uvicorn. The API lives under ``/api/v1`` (its OpenAPI
description at ``/api/v1/openapi.json``), the page's static files at ``/``. Every answer that
is not a success has one shape, ``{"error", "message", "exit_code", ...details}``, with the
CLI's error kinds and exit codes (:mod:`onstation.core.errors`); FastAPI's own 422 is
replaced by 400 ``bad_input``.

The service reads and writes through the ledger's public methods only. A ledger connection
is not shared between threads (SQLite's is bound to its thread; a PostgreSQL connection runs
one transaction at a time), so each worker thread opens its own, lazily
(:class:`LedgerPool`).

Background work (the alerts loop) is started by the app's lifespan: pass
``create_app(..., background=[starter, ...])``, each starter called with a function that opens
a ledger for its own thread and returning something with ``stop(timeout)``, called at
shutdown (:func:`onstation.api.alerts.start_background` is such a starter).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from onstation import __version__
from onstation.core.errors import (
    BadInput,
    BlockedByPolicy,
    Conflict,
    OnstationError,
    StaleGeneration,
)
from onstation.ledger import Ledger

API_PREFIX = "/api/v1"
STATIC_DIR = Path(__file__).parent / "static"
#: How often an event stream asks the ledger for new events (the ledger is the bus).
DEFAULT_POLL_SECONDS = 0.3
#: How long an idle event stream waits before it sends a comment, so proxies keep it open.
DEFAULT_HEARTBEAT_SECONDS = 15.0


class Background(Protocol):
    """A background task the service started (e.g. the alerts loop)."""

    def stop(self, timeout: float | None = None) -> None:
        """Ask it to stop and wait at most ``timeout`` seconds."""


BackgroundStarter = Callable[[Callable[[], Ledger]], Background]


class ApiError(Exception):
    """An answer that is not a success: an HTTP status and the one error shape."""

    def __init__(
        self, status: int, kind: str, message: str, exit_code: int, **details: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.exit_code = exit_code
        self.details = details

    def body(self) -> dict[str, Any]:
        """``{"error", "message", "exit_code", ...details}``."""
        return {**self.details, "error": self.kind, "message": self.message,
                "exit_code": self.exit_code}  # fmt: skip


def unauthenticated() -> ApiError:
    """The one answer for every missing, malformed, unknown, tampered or revoked token."""
    return ApiError(401, "unauthenticated", "a valid access token is required", 2)


def forbidden(message: str, *, reason: str = "scope") -> ApiError:
    """A token that may not do this (an agent out of its scope, a missing CSRF header)."""
    return ApiError(403, "forbidden", message, 2, reason=reason)


def _not_found(message: str) -> bool:
    return message.startswith("no such ") or (
        message.startswith("no ") and " with digest " in message
    )


def api_error(exc: OnstationError) -> ApiError:
    """The HTTP answer of an onstation error: its kind, its exit code, a status to match."""
    message = exc.message.replace("\n", " ")
    details = dict(exc.details)
    code = int(exc.exit_code)
    if isinstance(exc, BadInput):
        if _not_found(message):
            return ApiError(404, "not_found", message, code, **details)
        return ApiError(400, "bad_input", message, code, **details)
    if isinstance(exc, StaleGeneration):
        return ApiError(403, "stale_generation", message, code, **details)
    if isinstance(exc, BlockedByPolicy):
        return ApiError(423, "blocked", message, code, **details)
    if isinstance(exc, Conflict):
        return ApiError(409, "conflict", message, code, **details)
    return ApiError(500, exc.kind if exc.kind != "error" else "error", message, code, **details)


def iso(moment: datetime | None) -> str | None:
    """An instant as the records render it: ISO-8601 UTC ending in ``Z`` (None stays None)."""
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    """A JSON answer (times and other records rendered as strings)."""
    text = json.dumps(body, sort_keys=True, default=str, ensure_ascii=False)
    return Response(text, status_code=status, media_type="application/json", headers=headers)


def error_response(error: ApiError) -> Response:
    """The JSON answer of ``error`` (a 401 also names the scheme it wants)."""
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return json_response(error.status, error.body(), headers)


class LedgerPool:
    """One ledger per worker thread, opened on the thread's first request.

    Connections are per thread; every one opened is remembered so shutdown can close it."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[Ledger] = []

    def open(self) -> Ledger:
        """A new ledger on the pool's database, owned by the caller (it closes it)."""
        return Ledger.open(self.url, create=False)

    def get(self) -> Ledger:
        """This thread's ledger."""
        ledger: Ledger | None = getattr(self._local, "ledger", None)
        if ledger is None:
            ledger = self.open()
            self._local.ledger = ledger
            with self._lock:
                self._opened.append(ledger)
        return ledger

    def close_all(self) -> None:
        """Close every ledger the pool opened (at shutdown; the threads are idle by then)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for ledger in opened:
            # A SQLite connection may only be closed by its own thread; the process ends anyway.
            with contextlib.suppress(Exception):
                ledger.close()


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    errors = exc.errors()
    if not errors:
        return "the request is not valid", None
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    field = ".".join(loc) or None
    kind = first.get("type", "")
    if kind == "json_invalid":
        return "body: not valid JSON", "body"
    where = field or str((first.get("loc") or ["body"])[0])
    return f"{where}: {first.get('msg', 'is not valid')}", field


def _install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def on_onstation_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, OnstationError)
        return error_response(api_error(exc))

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        message, field = _validation_message(exc)
        kind = request.headers.get("content-type", "")
        if request.method not in ("GET", "HEAD") and "json" not in kind and field is None:
            message, field = "Content-Type: the body must be JSON (application/json)", "body"
        details = {} if field is None else {"field": field}
        return error_response(ApiError(400, "bad_input", message, 2, **details))

    async def on_http(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            error = ApiError(404, "not_found", "no such path", 2)
        elif exc.status_code == 405:
            error = ApiError(405, "method_not_allowed", "method not allowed on this path", 2)
        elif exc.status_code < 500:
            error = ApiError(exc.status_code, "bad_input", str(exc.detail), 2)
        else:
            error = ApiError(exc.status_code, "error", str(exc.detail), 1)
        return error_response(error)

    async def on_anything(_request: Request, exc: Exception) -> Response:
        message = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        return error_response(ApiError(500, "error", message, 1))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(OnstationError, on_onstation_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_anything)


def create_app(
    db_url: str | None,
    *,
    background: Sequence[BackgroundStarter] = (),
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS,
    static_dir: Path | None = None,
    stopping: threading.Event | None = None,
) -> FastAPI:
    """The console's application over the ledger at ``db_url`` (None: the default file).

    ``background`` starters run at start-up and are stopped at shutdown (the hook point for
    the alerts loop). ``stopping`` is set by the server when it begins to shut down, so
    open event streams end instead of holding the shutdown up.
    """
    from onstation.api import auth, events, routes_read, routes_reliefs, routes_write

    pool = LedgerPool(db_url)
    stop_event = stopping or threading.Event()
    started: list[Background] = []

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        for starter in background:
            started.append(starter(pool.open))
        try:
            yield
        finally:
            stop_event.set()
            for task in started:
                task.stop(5.0)
            pool.close_all()

    app = FastAPI(
        title="onstation console",
        version=__version__,
        description="The operator's console of onstation: the ledger's nodes, bodies, effects, "
        "reliefs, reports, messages and halts, and its history as server-sent events.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.ledgers = pool
    app.state.stopping = stop_event
    app.state.poll_seconds = poll_seconds
    app.state.heartbeat_seconds = heartbeat_seconds
    _install_error_handlers(app)
    for module in (auth, routes_read, routes_reliefs, routes_write, events):
        app.include_router(module.router, prefix=API_PREFIX)

    @app.api_route(API_PREFIX + "/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                   include_in_schema=False)  # fmt: skip
    async def unknown_api_path(request: Request, rest: str) -> Response:
        for route in app.router.routes:
            if route.matches(request.scope)[0] is Match.PARTIAL:  # the path, another method
                raise ApiError(405, "method_not_allowed", "method not allowed on this path", 2)
        raise ApiError(404, "not_found", f"no such path /api/v1/{rest}", 2)

    directory = static_dir or STATIC_DIR
    app.mount("/static", StaticFiles(directory=directory, check_dir=False), name="static")
    app.mount("/", StaticFiles(directory=directory, html=True, check_dir=False), name="page")
    return app


def ledger_of(request: Request) -> Ledger:
    """The ledger of the thread serving ``request`` (call it from a worker thread)."""
    pool: LedgerPool = request.app.state.ledgers
    return pool.get()


__all__ = [
    "API_PREFIX",
    "ApiError",
    "Background",
    "BackgroundStarter",
    "LedgerPool",
    "api_error",
    "create_app",
    "error_response",
    "forbidden",
    "iso",
    "json_response",
    "ledger_of",
    "unauthenticated",
]
