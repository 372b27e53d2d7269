"""Idempotency keys on the console's POSTs (issue 15), on both backends: a replay answers the
same without writing, a reused key with another request is refused, a refusal is kept too, a
token's text is never kept; and the ledger's store beneath (one answer per token and key,
racing writers cannot both commit)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_server import Console, live_console

from onstation.core.errors import BadInput, Conflict
from onstation.ledger import Ledger


@pytest.fixture
def console(ledger_url: str) -> Iterator[Console]:
    with live_console(ledger_url) as running:
        yield running


def test_a_replay_gets_the_same_answer_and_writes_nothing(console: Console) -> None:
    api = console.as_operator()
    key = {"Idempotency-Key": "halt-2026-12-01-a"}
    first = api.post("/api/v1/halts", json={"why": "maintenance"}, headers=key)
    assert first.status_code == 201 and "idempotency-replayed" not in first.headers
    history = len(console.ledger.events_after(0))
    again = api.post("/api/v1/halts", json={"why": "maintenance"}, headers=key)
    assert again.status_code == 201 and again.headers["idempotency-replayed"] == "true"
    assert again.json() == first.json()
    assert len(console.ledger.halts(active_only=False)) == 1
    assert len(console.ledger.events_after(0)) == history


def test_the_same_key_with_another_request_is_refused(console: Console) -> None:
    api = console.as_operator()
    key = {"Idempotency-Key": "k-1"}
    assert api.post("/api/v1/halts", json={"why": "one"}, headers=key).status_code == 201
    for got in (api.post("/api/v1/halts", json={"why": "two"}, headers=key),
                api.post("/api/v1/halts/lift", json={"node": None}, headers=key)):  # fmt: skip
        assert got.status_code == 409
        assert got.json()["error"] == "idempotency_key_reused" and got.json()["exit_code"] == 5
    assert [h.why for h in console.ledger.halts()] == ["one"]


def test_keys_are_per_token(console: Console) -> None:
    other = console.ledger.create_operator_token("bob", by="root").token
    key = {"Idempotency-Key": "same"}
    first = console.as_operator().post("/api/v1/tokens", json={"kind": "operator", "name": "carol"},
                                       headers=key)  # fmt: skip
    assert first.status_code == 201 and first.json()["created_by"] == "alice"
    got = console.client(other).post("/api/v1/tokens", json={"kind": "operator", "name": "dave"},
                                     headers=key)  # fmt: skip
    assert got.status_code == 201 and got.json()["created_by"] == "bob"
    assert "idempotency-replayed" not in got.headers


def test_a_fenced_agent_retrying_with_a_key_is_denied_each_time(console: Console) -> None:
    ledger = console.ledger
    ledger.register_node("exec-1")
    ledger.acquire_lease("exec-1", holder="b1")
    agent = console.client(ledger.create_agent_token("exec-1", generation=1, by="root").token)
    key = {"Idempotency-Key": "note-1"}
    assert agent.post("/api/v1/nodes/exec-1/notes", json={"kind": "note", "text": "a"},
                      headers=key).status_code == 201  # fmt: skip
    ledger.fence("exec-1", expect_generation=1)
    for _ in range(2):
        # The guard runs before the kept answer is looked at: a fenced token gets nothing,
        # not even the answer it was given while it was live.
        refused = agent.post("/api/v1/nodes/exec-1/notes", json={"kind": "note", "text": "a"},
                             headers=key)  # fmt: skip
        assert refused.status_code == 403 and refused.json()["error"] == "stale_generation"
    assert len(ledger.denials("exec-1")) == 2


def test_an_operator_conflict_is_kept_and_replayed(console: Console) -> None:
    api = console.as_operator()
    made = api.post("/api/v1/tokens", json={"kind": "operator", "name": "bob"}).json()
    console.ledger.revoke_token(made["token_id"], by="root")
    key = {"Idempotency-Key": "revoke-bob"}
    first = api.post(f"/api/v1/tokens/{made['token_id']}/revoke", headers=key)
    assert first.status_code == 409 and first.json()["error"] == "conflict"
    again = api.post(f"/api/v1/tokens/{made['token_id']}/revoke", headers=key)
    assert again.status_code == 409 and again.json() == first.json()
    assert again.headers["idempotency-replayed"] == "true"


def test_a_new_tokens_text_is_never_kept_for_a_replay(console: Console) -> None:
    api = console.as_operator()
    key = {"Idempotency-Key": "new-bob"}
    first = api.post("/api/v1/tokens", json={"kind": "operator", "name": "bob"}, headers=key)
    assert first.status_code == 201 and first.json()["token"].startswith("onst_")
    again = api.post("/api/v1/tokens", json={"kind": "operator", "name": "bob"}, headers=key)
    assert again.status_code == 201 and again.json()["token"] is None
    assert again.json()["token_id"] == first.json()["token_id"]
    assert [t.name for t in console.ledger.tokens()].count("bob") == 1
    # The secret is all after onst_<token_id>_: it may hold "_" itself (URL-safe base64), so
    # the last "_"-part alone can be a short fragment found anywhere in the kept answer.
    secret = first.json()["token"].split("_", 2)[2]
    with console.ledger.backend.read() as tx:
        rows = tx.all("SELECT response FROM api_idempotency")
    assert rows and not any(secret in str(r[0]) for r in rows)


@pytest.mark.parametrize("bad", ["", "a b", "x" * 201, "é"])
def test_a_malformed_key_is_bad_input(console: Console, bad: str) -> None:
    got = console.as_operator().post("/api/v1/halts", json={"why": "x"},
                                     headers={"Idempotency-Key": bad.encode("utf-8")})  # type: ignore[dict-item]  # fmt: skip
    assert got.status_code == 400 and got.json()["error"] == "bad_input"
    assert console.ledger.halts() == []


# -- the store in the ledger ------------------------------------------------------------------


def test_the_ledger_keeps_one_answer_per_token_and_key(ledger: Ledger) -> None:
    token = ledger.create_operator_token("alice", by="root").record.token_id
    digest = "a" * 64
    assert ledger.idempotent_answer(token, "k") is None
    kept = ledger.keep_idempotent_answer(token, "k", request_digest=digest, status=201,
                                         body={"halt_id": 1})  # fmt: skip
    assert (kept.status, kept.body, kept.request_digest) == (201, {"halt_id": 1}, digest)
    assert ledger.idempotent_answer(token, "k") == kept
    with pytest.raises(Conflict):
        ledger.keep_idempotent_answer(token, "k", request_digest="b" * 64, status=200, body={})
    first = ledger.keep_idempotent_answer(token, "k", request_digest="b" * 64, status=409,
                                          body={}, first_wins=True)  # fmt: skip
    assert first == kept


def test_a_write_and_its_kept_answer_commit_together_or_not_at_all(ledger: Ledger) -> None:
    token = ledger.create_operator_token("alice", by="root").record.token_id
    ledger.keep_idempotent_answer(token, "k", request_digest="a" * 64, status=201, body={})

    def racer() -> None:
        with ledger.transaction():
            ledger.halt(by="alice", why="racing")
            ledger.keep_idempotent_answer(token, "k", request_digest="a" * 64, status=201,
                                          body={})  # fmt: skip

    with pytest.raises(Conflict):
        racer()
    assert ledger.halts(active_only=False) == []  # the racer's write was rolled back


@pytest.mark.parametrize("bad", ["", " ", "x" * 201, "tab\there"])
def test_the_ledger_refuses_a_malformed_key(ledger: Ledger, bad: str) -> None:
    with pytest.raises(BadInput):
        ledger.idempotent_answer("0123456789abcdef", bad)
