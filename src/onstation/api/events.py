"""Live updates: the ledger's history as server-sent events (``GET /api/v1/events``).

The ledger is the bus: the stream polls :meth:`Ledger.events_after` every few tenths of a
second and sends each new event as ``id: <seq>``, ``event: <kind>``, ``data: <the event's
JSON>``. A client resumes where it left off with the ``Last-Event-ID`` header (which
``EventSource`` sends by itself when it reconnects) or ``?after=SEQ``; without either, the
stream starts at the history's current end. Sequence numbers only grow, so a resumed stream
neither loses nor repeats an event. An idle stream sends a comment every ~15 s so proxies
keep it open; it ends when the client goes away or the server stops.

An agent token's stream is guarded like each of its requests, on every poll: once its
generation is fenced, the stream sends a last ``event: denied`` (the denial is recorded) and
ends.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from onstation.api.app import ApiError, api_error, ledger_of
from onstation.api.auth import Caller, Principal, guard_agent
from onstation.core.errors import BadInput, OnstationError, StaleGeneration
from onstation.core.names import validate_name
from onstation.core.types import Event

router = APIRouter(tags=["events"])

#: Most events read from the ledger per poll (a client far behind catches up page by page).
PAGE = 500
#: How long a browser waits before it reconnects (the ``retry:`` field), in milliseconds.
RETRY_MS = 2000


def frame(event: Event, *, named: bool = True) -> str:
    """One event as a server-sent event (``named``: with its kind as the ``event:`` field;
    without, a browser's ``EventSource`` delivers it as a plain ``message``)."""
    data = json.dumps(event.to_json(), sort_keys=True, separators=(",", ":"), default=str)
    name = f"event: {event.kind}\n" if named else ""
    return f"id: {event.seq}\n{name}data: {data}\n\n"


def _start(request: Request, after: int | None, last_event_id: str | None) -> int:
    if last_event_id is not None and last_event_id.strip():
        try:
            seq = int(last_event_id.strip())
        except ValueError:
            raise BadInput("Last-Event-ID: must be an event's sequence number",
                           field="Last-Event-ID") from None  # fmt: skip
        if seq < 0:
            raise BadInput("Last-Event-ID: must be at least 0", field="Last-Event-ID")
        return seq
    if after is not None:
        return after
    newest = ledger_of(request).history(limit=1)
    return newest[-1].seq if newest else 0


async def _stream(
    request: Request, caller: Principal, cursor: int, node: str | None, named: bool
) -> AsyncIterator[str]:
    state = request.app.state
    poll: float = state.poll_seconds
    beat: float = state.heartbeat_seconds
    stopping = state.stopping
    yield f"retry: {RETRY_MS}\n\n"
    quiet_since = time.monotonic()
    while not stopping.is_set():
        if caller.is_agent:
            try:
                await run_in_threadpool(guard_agent, request, caller.token)
            except StaleGeneration as exc:
                data = json.dumps(api_error(exc).body(), sort_keys=True, default=str)
                yield f"event: denied\ndata: {data}\n\n"
                return
        try:
            events = await run_in_threadpool(_read_after, request, cursor)
        except OnstationError as exc:
            data = json.dumps(api_error(exc).body(), sort_keys=True, default=str)
            yield f"event: error\ndata: {data}\n\n"
            return
        sent = False
        for event in events:
            cursor = event.seq
            if node is None or event.node == node:
                sent = True
                yield frame(event, named=named)
        now = time.monotonic()
        if sent:
            quiet_since = now
        elif now - quiet_since >= beat:
            quiet_since = now
            yield ": keep-alive\n\n"
        if len(events) < PAGE:
            await _sleep(poll, stopping)


def _read_after(request: Request, cursor: int) -> list[Event]:
    return ledger_of(request).events_after(cursor, limit=PAGE)


async def _sleep(seconds: float, stopping: Any) -> None:
    # Short naps so a shutting-down server is not held up by a stream waiting to poll.
    deadline = time.monotonic() + seconds
    while not stopping.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        await anyio.sleep(min(left, 0.1))


@router.get(
    "/events",
    summary="The ledger's history as server-sent events (text/event-stream)",
    response_class=StreamingResponse,
)
async def events(
    request: Request, caller: Caller,
    after: Annotated[int | None, Query(ge=0)] = None,
    node: str | None = None,
    unnamed: bool = False,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:  # fmt: skip
    """Each event: ``id: <seq>``, ``event: <kind>``, ``data: <Event JSON>``. Resume with the
    ``Last-Event-ID`` header (wins) or ``?after=SEQ``; ``?node=N`` keeps one identity's;
    ``?unnamed=true`` leaves the ``event:`` line out (the kind is in ``data``), so that an
    ``EventSource`` gets every kind as ``message`` (``denied`` stays named)."""
    if node is not None:
        validate_name(node, "node")
    try:
        cursor = await run_in_threadpool(_start, request, after, last_event_id)
    except OnstationError as exc:
        raise api_error(exc) from exc
    except ApiError:
        raise
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(_stream(request, caller, cursor, node, not unnamed),
                             media_type="text/event-stream", headers=headers)  # fmt: skip


__all__ = ["PAGE", "frame", "router"]
