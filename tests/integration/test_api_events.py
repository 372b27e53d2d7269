"""The console's live updates (issue 15): the ledger's history as server-sent events, on both
backends, resumed with Last-Event-ID without losing or repeating an event, and an agent
token's stream ending with ``event: denied`` once its generation is fenced."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from api_server import Console, live_console, sse_events


@pytest.fixture
def console(ledger_url: str) -> Iterator[Console]:
    with live_console(ledger_url, heartbeat_seconds=0.2) as running:
        yield running


def _stream(client: httpx.Client, **kwargs: object) -> httpx.Response:
    return client.stream("GET", "/api/v1/events", **kwargs)  # type: ignore[arg-type, return-value]


def test_a_resumed_stream_neither_loses_nor_repeats_an_event(console: Console) -> None:
    ledger = console.ledger
    for n in range(3):
        ledger.register_node(f"exec-{n}")
    api = console.as_operator()
    with _stream(api, params={"after": 0}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        first = sse_events(response.iter_lines(), 2)
    # Written while no one listens: the resumed stream must bring them.
    for n in range(3, 6):
        ledger.register_node(f"exec-{n}")
    total = [e.seq for e in ledger.events_after(0)]
    with _stream(
        api, headers={"Last-Event-ID": first[-1]["id"]}, params={"after": 0}
    ) as response:  # the header wins over ?after
        rest = sse_events(response.iter_lines(), len(total) - 2)
    seen = [int(e["id"]) for e in first + rest]
    assert seen == total
    for event in first + rest:
        data = json.loads(event["data"])
        assert data["seq"] == int(event["id"]) and data["kind"] == event["event"]
    assert rest[-1]["event"] == "node.registered"


def test_a_new_stream_starts_at_the_end_and_sends_what_happens_next(console: Console) -> None:
    console.ledger.register_node("exec-0")
    with _stream(console.as_operator(), params={"node": "exec-9"}) as response:
        lines = response.iter_lines()
        assert next(lines) == "retry: 2000"
        console.ledger.register_node("exec-8")  # filtered out
        console.ledger.register_node("exec-9")
        got = sse_events(lines, 1)
    assert [(e["event"], json.loads(e["data"])["node"]) for e in got] == [
        ("node.registered", "exec-9")
    ]


def test_an_idle_stream_sends_a_comment_to_keep_the_connection(console: Console) -> None:
    with _stream(console.as_operator()) as response:
        lines = response.iter_lines()
        for line in lines:
            if line.startswith(":"):
                assert line == ": keep-alive"
                break


def test_an_agent_tokens_stream_ends_with_denied_once_fenced(console: Console) -> None:
    ledger = console.ledger
    ledger.register_node("exec-1")
    ledger.acquire_lease("exec-1", holder="b1")
    agent = console.client(ledger.create_agent_token("exec-1", generation=1, by="root").token)
    with _stream(agent) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines) == "retry: 2000"
        ledger.fence("exec-1", expect_generation=1, reason="relief")
        events = sse_events(lines, 10)  # the fence's events, then the denial, then the end
    assert events[-1]["event"] == "denied"
    denial = json.loads(events[-1]["data"])
    assert denial["error"] == "stale_generation" and denial["exit_code"] == 3
    assert any(d.action == "api GET /api/v1/events" for d in ledger.denials("exec-1"))
    after = _stream(agent)
    with after as response:
        assert response.status_code == 403


@pytest.mark.parametrize("header", ["abc", "-1", "1.5"])
def test_a_malformed_last_event_id_is_bad_input(console: Console, header: str) -> None:
    got = console.as_operator().get("/api/v1/events", headers={"Last-Event-ID": header})
    assert got.status_code == 400 and got.json()["error"] == "bad_input"


def test_a_stream_needs_a_token(console: Console) -> None:
    got = console.client().get("/api/v1/events")
    assert got.status_code == 401 and got.json()["error"] == "unauthenticated"


def test_an_unnamed_stream_sends_every_kind_as_a_plain_message(console: Console) -> None:
    with _stream(console.as_operator(), params={"after": 0, "unnamed": "true"}) as response:
        lines = response.iter_lines()
        console.ledger.register_node("exec-1")
        got = sse_events(lines, 1)
    assert "event" not in got[0]
    assert json.loads(got[0]["data"])["kind"] == "token.created"  # the console's operator
