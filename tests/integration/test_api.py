"""The console's HTTP API (issue 15) against a live server on a real socket, on both backends:
every endpoint's happy path, authentication (no token, tampered, revoked, the page's cookie
and its CSRF header), an agent token's scope and its fence, and bad bodies."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from api_server import Console, live_console

from onstation.ledger import Ledger

NODE = "exec-1"


@pytest.fixture
def console(ledger_url: str) -> Iterator[Console]:
    with live_console(ledger_url) as running:
        yield running


def _body(ledger: Ledger, node: str = NODE) -> int:
    """Register ``node`` and admit a body; its generation."""
    ledger.register_node(node, role="executor")
    return ledger.acquire_lease(node, holder=f"body of {node}").generation


def _agent(ledger: Ledger, node: str = NODE) -> str:
    return ledger.create_agent_token(node, generation=ledger.get_node(node).generation,
                                     by="root").token  # fmt: skip


def _ambiguous(ledger: Ledger) -> str:
    """An effect dispatched by generation 1 and never observed, then fenced: AMBIGUOUS."""
    effect, _ = ledger.intend_effect(NODE, generation=1, operation="git.push",
                                     destination="origin", arguments={"ref": "main"})  # fmt: skip
    ledger.dispatch_effect(effect.effect_id, generation=1)
    ledger.fence(NODE, expect_generation=1)
    ledger.reconcile(NODE)
    assert ledger.get_effect(effect.effect_id).state.value == "AMBIGUOUS"
    return effect.effect_id


def _error(response: httpx.Response, status: int, kind: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == kind, body
    assert isinstance(body["message"], str) and "\n" not in body["message"]
    assert isinstance(body["exit_code"], int)
    return body  # type: ignore[no-any-return]


# -- reading ----------------------------------------------------------------------------------


def test_every_read_endpoint_answers_with_the_clis_keys(console: Console) -> None:
    ledger = console.ledger
    _body(ledger)
    effect_id = _ambiguous(ledger)
    ledger.acquire_lease(NODE, holder="successor")
    api = console.as_operator()

    nodes = api.get("/api/v1/nodes").json()["nodes"]
    assert [n["node"] for n in nodes] == [NODE]
    assert nodes[0] == ledger.get_node(NODE).to_json()
    shown = api.get(f"/api/v1/nodes/{NODE}").json()
    assert shown["generation"] == 2 and shown["live_lease"]["generation"] == 2
    assert "respawn" in shown and [e["effect_id"] for e in shown["open_effects"]] == [effect_id]

    team = api.get("/api/v1/team").json()
    row = team["team"][0]
    for key in ("node", "role", "generation", "tier", "body", "witness", "heartbeat",
                "heartbeat_at", "open_effects", "ambiguous"):  # fmt: skip
        assert key in row  # the keys of `onstation team status --json`
    assert row["ambiguous"] == 1 and row["lease"]["generation"] == 2
    assert row["heartbeat_age_s"] >= 0 and row["halted"] is False
    assert [e["state"] for e in row["effects"]] == ["AMBIGUOUS"]

    leases = api.get(f"/api/v1/nodes/{NODE}/leases").json()["leases"]
    assert [(ls["generation"], ls["state"]) for ls in leases] == [(1, "FENCED"), (2, "LIVE")]
    assert api.get(f"/api/v1/nodes/{NODE}/bodies").json() == {"bodies": []}
    assert api.get(f"/api/v1/nodes/{NODE}/denials").json() == {"denials": []}
    assert api.get(f"/api/v1/nodes/{NODE}/notes").json() == {"notes": []}
    hull = api.get(f"/api/v1/nodes/{NODE}/hull").json()
    assert hull["series"] == [] and [g["generation"] for g in hull["generations"]] == [1, 2]
    assert set(hull["presets"]) == {"relief", "coordinator"}

    ambiguous = api.get("/api/v1/effects", params={"state": "AMBIGUOUS"}).json()["effects"]
    assert [e["effect_id"] for e in ambiguous] == [effect_id]
    assert api.get(f"/api/v1/effects/{effect_id}").json() == ledger.get_effect(effect_id).to_json()
    assert api.get("/api/v1/reliefs").json() == {"reliefs": []}
    assert api.get("/api/v1/messages", params={"recipient": NODE}).json() == {"messages": []}
    assert api.get("/api/v1/halts").json() == {"halts": []}
    queue = api.get("/api/v1/queue").json()
    assert [e["effect_id"] for e in queue["ambiguous_effects"]] == [effect_id]
    assert queue["reliefs"] == [] and queue["breakers"] == [] and queue["halts"] == []
    history = api.get("/api/v1/history", params={"after": 0, "limit": 3}).json()
    assert [e["seq"] for e in history["events"]] == [1, 2, 3] and history["last_seq"] == 3
    tokens = api.get("/api/v1/tokens").json()["tokens"]
    assert [t["name"] for t in tokens] == ["alice"] and "token" not in tokens[0]
    assert api.get("/api/v1/session").json()["token"]["name"] == "alice"


def test_unknown_things_are_not_found_in_the_one_error_shape(console: Console) -> None:
    api = console.as_operator()
    _error(api.get("/api/v1/nodes/ghost"), 404, "not_found")
    _error(api.get("/api/v1/effects/eff-nothing"), 404, "not_found")
    _error(api.get("/api/v1/reliefs/99"), 404, "not_found")
    _error(api.get("/api/v1/no/such/path"), 404, "not_found")
    _error(api.delete("/api/v1/nodes"), 405, "method_not_allowed")
    _error(api.get("/api/v1/nodes/-rf"), 400, "bad_input")
    _error(api.get("/api/v1/effects", params={"state": "LOST"}), 400, "bad_input")


def test_the_openapi_description_needs_no_token(console: Console) -> None:
    got = console.client().get("/api/v1/openapi.json")
    assert got.status_code == 200
    paths = got.json()["paths"]
    assert "/api/v1/team" in paths and "/api/v1/effects/{effect_id}/resolve" in paths


# -- writing as the operator ------------------------------------------------------------------


def test_the_operator_resolves_halts_lifts_and_is_named_in_the_ledger(console: Console) -> None:
    ledger = console.ledger
    _body(ledger)
    effect_id = _ambiguous(ledger)
    api = console.as_operator()

    got = api.post(f"/api/v1/effects/{effect_id}/resolve",
                   json={"outcome": "observed", "why": "the push is on origin"})  # fmt: skip
    assert got.status_code == 200, got.text
    assert got.json()["state"] == "COMMITTED" and got.json()["resolved_by"] == "alice"
    _error(api.post(f"/api/v1/effects/{effect_id}/resolve",
                    json={"outcome": "observed", "why": "again"}), 409, "conflict")  # fmt: skip

    halted = api.post("/api/v1/halts", json={"node": None, "why": "maintenance"})
    assert halted.status_code == 201 and halted.json()["by"] == "alice"
    one = api.post("/api/v1/halts", json={"node": NODE, "why": "look at it"})
    assert one.status_code == 201 and one.json()["node"] == NODE
    assert len(api.get("/api/v1/queue").json()["halts"]) == 2
    assert api.get("/api/v1/team").json()["team"][0]["halted"] is True
    lifted = api.post("/api/v1/halts/lift", json={"node": None}).json()["lifted"]
    assert [h["lifted_by"] for h in lifted] == ["alice"]
    assert [h.node for h in ledger.halts()] == [NODE]
    api.post("/api/v1/halts/lift", json={"node": NODE})
    assert ledger.halts() == []


def test_the_operator_opens_and_closes_a_breaker_and_an_agent_cannot(console: Console) -> None:
    ledger = console.ledger
    _body(ledger)
    api = console.as_operator()
    opened = api.post(f"/api/v1/nodes/{NODE}/breaker/open", json={"why": "crash loop"})
    assert opened.status_code == 200 and opened.json()["breaker_open"] is True
    assert [n["node"] for n in api.get("/api/v1/queue").json()["breakers"]] == [NODE]
    agent = console.client(_agent(ledger))
    _error(agent.post(f"/api/v1/nodes/{NODE}/breaker/close", json={"why": "me"}), 403,
           "forbidden")  # fmt: skip
    closed = api.post(f"/api/v1/nodes/{NODE}/breaker/close", json={"why": "fixed"})
    assert closed.status_code == 200 and closed.json()["breaker_open"] is False
    assert api.get("/api/v1/queue").json()["breakers"] == []


def test_the_operator_writes_notes_messages_heartbeats_and_tokens(console: Console) -> None:
    ledger = console.ledger
    generation = _body(ledger)
    api = console.as_operator()

    note = api.post(f"/api/v1/nodes/{NODE}/notes", json={"kind": "note", "text": "see PR 7"})
    assert note.status_code == 201 and note.json()["text"] == "see PR 7"
    _error(api.post(f"/api/v1/nodes/{NODE}/notes", json={"kind": "decision", "text": "x"}),
           400, "bad_input")  # fmt: skip
    sent = api.post("/api/v1/messages", json={"sender": "team-lead", "recipient": NODE,
                                              "kind": "ACK", "body": "go on"})  # fmt: skip
    assert sent.status_code == 201 and sent.json()["sender"] == "team-lead"
    listed = api.get("/api/v1/messages", params={"recipient": NODE}).json()["messages"]
    assert [m["body"] for m in listed] == ["go on"]
    _error(api.post("/api/v1/messages", json={"sender": NODE, "recipient": "team-lead",
                                              "kind": "ACK"}), 400, "bad_input")  # fmt: skip
    renewed = api.post(f"/api/v1/nodes/{NODE}/lease/renew",
                       json={"generation": generation, "ttl_seconds": 600})  # fmt: skip
    assert renewed.status_code == 200 and renewed.json()["state"] == "LIVE"

    made = api.post("/api/v1/tokens", json={"kind": "agent", "node": NODE})
    assert made.status_code == 201
    assert made.json()["generation"] == generation and made.json()["token"].startswith("onst_")
    assert ledger.authenticate(made.json()["token"]) is not None
    revoked = api.post(f"/api/v1/tokens/{made.json()['token_id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked_by"] == "alice"
    _error(api.post(f"/api/v1/tokens/{made.json()['token_id']}/revoke"), 409, "conflict")
    assert ledger.authenticate(made.json()["token"]) is None


# -- authentication -----------------------------------------------------------------------------


def test_no_token_malformed_unknown_tampered_and_revoked_get_one_answer(console: Console) -> None:
    ledger = console.ledger
    revoked = ledger.create_operator_token("bob", by="root")
    ledger.revoke_token(revoked.record.token_id, by="root")
    good = console.operator
    tampered = good[:-1] + ("A" if good[-1] != "A" else "B")
    unknown = "onst_0123456789abcdef_" + good.rsplit("_", 1)[1]
    before = len(ledger.events_after(0))
    answers = []
    clients = [console.client(), console.client("not-a-token"), console.client(unknown),
               console.client(tampered), console.client(revoked.token),
               console.client(None, Authorization="Basic " + good),
               console.client("x" * 5000)]  # fmt: skip
    for client in clients:
        got = client.get("/api/v1/nodes")
        assert got.status_code == 401 and got.headers["www-authenticate"] == "Bearer"
        answers.append(got.json())
        assert client.post("/api/v1/halts", json={"why": "x"}).status_code == 401
    assert all(a == answers[0] for a in answers)
    assert answers[0] == {"error": "unauthenticated", "exit_code": 2,
                          "message": "a valid access token is required"}  # fmt: skip
    assert len(ledger.events_after(0)) == before and ledger.halts() == []


def test_the_page_logs_in_with_a_cookie_that_needs_the_csrf_header(console: Console) -> None:
    page = console.client()
    _error(page.post("/api/v1/session", json={"token": console.operator}), 403, "forbidden")
    _error(page.post("/api/v1/session", json={"token": "onst_nothing"},
                     headers={"X-Onstation-Csrf": "1"}), 401, "unauthenticated")  # fmt: skip
    login = page.post("/api/v1/session", json={"token": console.operator},
                      headers={"X-Onstation-Csrf": "1"})  # fmt: skip
    assert login.status_code == 200 and login.json()["token"]["name"] == "alice"
    cookie = login.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert page.get("/api/v1/session").json()["via"] == "cookie"
    refused = _error(page.post("/api/v1/halts", json={"why": "no header"}), 403, "forbidden")
    assert refused["reason"] == "csrf" and console.ledger.halts() == []
    done = page.post("/api/v1/halts", json={"why": "with header"},
                     headers={"X-Onstation-Csrf": "1"})  # fmt: skip
    assert done.status_code == 201 and done.json()["by"] == "alice"
    out = page.delete("/api/v1/session", headers={"X-Onstation-Csrf": "1"})
    assert out.status_code == 200 and 'onstation_session=""' in out.headers["set-cookie"]
    page.cookies.clear()
    _error(page.get("/api/v1/nodes"), 401, "unauthenticated")


# -- agent tokens -------------------------------------------------------------------------------


def test_an_agent_token_used_after_its_fence_is_denied_and_the_denial_recorded(
    console: Console,
) -> None:
    ledger = console.ledger
    _body(ledger)
    agent = console.client(_agent(ledger))
    assert agent.get("/api/v1/nodes").status_code == 200
    ledger.fence(NODE, expect_generation=1, reason="relief 1")

    for attempt in (lambda: agent.get("/api/v1/team"),
                    lambda: agent.post(f"/api/v1/nodes/{NODE}/notes",
                                       json={"kind": "note", "text": "still here"})):  # fmt: skip
        body = _error(attempt(), 403, "stale_generation")
        assert body["exit_code"] == 3 and body["presented_generation"] == 1
        assert body["current_generation"] == 2
    denials = ledger.denials(NODE)
    assert [d.action for d in denials] == [
        "api GET /api/v1/team",
        f"api POST /api/v1/nodes/{NODE}/notes",
    ]
    assert HarnessNotes.count(ledger) == 0
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("onstation")), "denials", NODE, "--json", "--db",
         console.db],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert [d["action"] for d in json.loads(shown.stdout)["denials"]][-1].startswith("api POST")


class HarnessNotes:
    @staticmethod
    def count(ledger: Ledger) -> int:
        from onstation.ledger.bodies import HarnessLedger

        return len(HarnessLedger(ledger).notes(NODE))


def test_an_agent_token_writes_only_as_itself(console: Console) -> None:
    ledger = console.ledger
    _body(ledger)
    _body(ledger, "exec-2")
    ledger.add_actor("exec-1-mailbox", node=NODE)
    agent = console.client(_agent(ledger))

    note = agent.post(f"/api/v1/nodes/{NODE}/notes", json={"kind": "decision", "text": "ship",
                                                          "why": "tests pass"})  # fmt: skip
    assert note.status_code == 201 and note.json()["generation"] == 1
    assert agent.post(f"/api/v1/nodes/{NODE}/lease/renew", json={}).status_code == 200
    intended = agent.post(f"/api/v1/nodes/{NODE}/effects",
                          json={"operation": "http.post", "destination": "https://x.test/a",
                                "arguments": {"n": 1}})  # fmt: skip
    assert intended.status_code == 201 and intended.json()["created"] is True
    effect_id = intended.json()["effect_id"]
    again = agent.post(f"/api/v1/nodes/{NODE}/effects",
                       json={"operation": "http.post", "destination": "https://x.test/a",
                             "arguments": {"n": 1}})  # fmt: skip
    assert again.status_code == 200 and again.json()["created"] is False
    assert (
        agent.post(f"/api/v1/effects/{effect_id}/dispatch", json={}).json()["state"] == "DISPATCHED"
    )
    observed = agent.post(f"/api/v1/effects/{effect_id}/observe", json={"result": {"ok": True}})
    assert observed.json()["state"] == "OBSERVED" and observed.json()["result"] == {"ok": True}
    assert agent.post(f"/api/v1/effects/{effect_id}/commit", json={}).json()["state"] == "COMMITTED"
    for sender in (NODE, "exec-1-mailbox"):
        sent = agent.post("/api/v1/messages", json={"sender": sender, "recipient": "team-lead",
                                                    "kind": "ACK"})  # fmt: skip
        assert sent.status_code == 201, sent.text


def test_an_agent_token_for_another_identity_or_generation_is_forbidden(console: Console) -> None:
    ledger = console.ledger
    _body(ledger)
    _body(ledger, "exec-2")
    agent = console.client(_agent(ledger))
    other, _ = ledger.intend_effect("exec-2", generation=1, operation="x", destination="y",
                                    arguments={})  # fmt: skip
    before = len(ledger.events_after(0))
    for response in (
        agent.post("/api/v1/nodes/exec-2/notes", json={"kind": "note", "text": "hi"}),
        agent.post(f"/api/v1/nodes/{NODE}/notes",
                   json={"kind": "note", "text": "hi", "generation": 2}),
        agent.post("/api/v1/nodes/exec-2/lease/renew", json={"generation": 1}),
        agent.post("/api/v1/nodes/exec-2/effects", json={"operation": "x", "destination": "y"}),
        agent.post(f"/api/v1/effects/{other.effect_id}/dispatch", json={}),
        agent.post("/api/v1/messages", json={"sender": "exec-2", "recipient": "team-lead",
                                             "kind": "ACK"}),
        agent.post("/api/v1/messages", json={"sender": "team-lead", "recipient": "exec-2",
                                             "kind": "ACK"}),
    ):  # fmt: skip
        body = _error(response, 403, "forbidden")
        assert body["reason"] == "scope" and body["exit_code"] == 2
    assert len(ledger.events_after(0)) == before  # nothing written, not even a denial


def test_an_agent_token_cannot_resolve_halt_lift_or_manage_tokens(console: Console) -> None:
    ledger = console.ledger
    _body(ledger)
    effect_id = _ambiguous(ledger)
    ledger.acquire_lease(NODE, holder="successor")
    agent = console.client(_agent(ledger))
    before = len(ledger.events_after(0))
    for response in (
        agent.post(f"/api/v1/effects/{effect_id}/resolve",
                   json={"outcome": "observed", "why": "I say so"}),
        agent.post("/api/v1/halts", json={"node": None, "why": "x"}),
        agent.post("/api/v1/halts/lift", json={"node": None}),
        agent.post("/api/v1/tokens", json={"kind": "operator", "name": "mallory"}),
        agent.post("/api/v1/tokens/0123456789abcdef/revoke"),
        agent.get("/api/v1/tokens"),
    ):  # fmt: skip
        _error(response, 403, "forbidden")
    assert len(ledger.events_after(0)) == before
    assert ledger.get_effect(effect_id).state.value == "AMBIGUOUS"


# -- bad bodies ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"{", b"[]", b"null", b'"text"', b'{"why": 5}', b'{"why": "x", "extra": 1}', b"",
     b'{"node": "../etc", "why": "x"}', b'{"why": "\\ud800"}', b"\xff\xfe"],
)  # fmt: skip
def test_bad_json_bodies_are_bad_input_and_change_nothing(console: Console, content: bytes) -> None:
    api = console.as_operator()
    got = api.post("/api/v1/halts", content=content, headers={"Content-Type": "application/json"})
    body = _error(got, 400, "bad_input")
    assert body["exit_code"] == 2
    assert console.ledger.halts() == []


def test_a_body_sent_as_a_form_is_refused_naming_the_content_type(console: Console) -> None:
    got = console.as_operator().post("/api/v1/halts", data={"why": "x"})
    assert "Content-Type" in _error(got, 400, "bad_input")["message"]
