"""Writing routes: resolve effects, the effect journal of a body, heartbeats, notes, messages,
halts, tokens. Each is one ledger call (or one unit of work), recorded with the token's name.

Every POST accepts ``Idempotency-Key``. With one, the write and its answer are kept in one
unit of work (:meth:`Ledger.transaction`): the same request again gets the kept answer and
writes nothing; the same key with another request (method, path or body differs) is refused
with 409 ``idempotency_key_reused``. A refused request's answer is kept too (the first answer
wins), so a retry cannot turn a refusal into a write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.concurrency import run_in_threadpool

from onstation.api.app import ApiError, api_error, forbidden, json_response, ledger_of
from onstation.api.auth import Caller, Principal, operator_name, own_generation
from onstation.core.errors import BadInput, Conflict, OnstationError
from onstation.core.names import validate_name
from onstation.ledger import Ledger
from onstation.ledger.base import MAX_GENERATION, MAX_LEASE_TTL
from onstation.ledger.bodies import HarnessLedger
from onstation.ledger.idempotency import StoredAnswer, check_idempotency_key

router = APIRouter(tags=["write"])

#: What a write returns: its HTTP status and its JSON body.
Answer = tuple[int, dict[str, Any]]
Work = Callable[[Ledger], Answer]
Generation = Annotated[int, Field(ge=1, le=MAX_GENERATION)]
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotency-Replayed"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def request_digest(method: str, path: str, query: str, body: bytes) -> str:
    """SHA-256 over the method, the path with its query, and the body's bytes."""
    target = path + ("?" + query if query else "")
    return hashlib.sha256(f"{method}\n{target}\n".encode() + body).hexdigest()


def _replay(kept: StoredAnswer, digest: str) -> Response:
    if kept.request_digest != digest:
        raise ApiError(409, "idempotency_key_reused",
                       "Idempotency-Key: this key was used for another request", 5,
                       field=IDEMPOTENCY_HEADER)  # fmt: skip
    return json_response(kept.status, kept.body, {REPLAYED_HEADER: "true"})


def _kept_form(body: dict[str, Any]) -> dict[str, Any]:
    # A new token's text is shown once and never stored, not even in a kept answer.
    return {**body, "token": None} if "token" in body and "token_id" in body else body


def _write_once(request: Request, caller: Principal, raw: bytes, work: Work) -> Response:
    ledger = ledger_of(request)
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None:
        status, body = work(ledger)
        return json_response(status, body)
    check_idempotency_key(key)
    digest = request_digest(request.method, request.url.path, request.url.query, raw)
    token_id = caller.token.token_id
    for _attempt in range(3):
        kept = ledger.idempotent_answer(token_id, key)
        if kept is not None:
            return _replay(kept, digest)
        error: ApiError
        try:
            with ledger.transaction():
                status, body = work(ledger)
                ledger.keep_idempotent_answer(token_id, key, request_digest=digest,
                                              status=status, body=_kept_form(body))  # fmt: skip
            return json_response(status, body)
        except Conflict as exc:
            if ledger.idempotent_answer(token_id, key) is not None:
                continue  # a racing request with this key won: answer as it was answered
            error = api_error(exc)
        except OnstationError as exc:
            error = api_error(exc)
        except ApiError as exc:
            error = exc
        if error.status >= 500:
            raise error
        kept = ledger.keep_idempotent_answer(token_id, key, request_digest=digest,
                                             status=error.status, body=error.body(),
                                             first_wins=True)  # fmt: skip
        if kept.request_digest == digest and kept.status == error.status:
            return json_response(error.status, error.body())
        return _replay(kept, digest)
    raise ApiError(409, "conflict", "the request lost repeated races; send it again", 5)


async def _answer(request: Request, caller: Principal, work: Work) -> Response:
    raw = await request.body()
    return await run_in_threadpool(_write_once, request, caller, raw, work)


def _generation(value: int | None, what: str) -> int:
    if value is None:
        raise BadInput(f"generation: {what} needs the body's generation", field="generation")
    return value


# --------------------------------------------------------------------------------------------
# effects


class Resolve(_Body):
    """An operator settles an AMBIGUOUS effect."""

    outcome: Literal["observed", "compensated"]
    why: str = Field(min_length=1, max_length=4000)


@router.post("/effects/{effect_id}/resolve", summary="Resolve an AMBIGUOUS effect (operators)")
async def resolve(request: Request, effect_id: str, body: Resolve, caller: Caller) -> Response:
    """``observed``: it happened; ``compensated``: a compensating action undid it."""
    by = operator_name(caller, "resolve effects")
    validate_name(effect_id, "effect id")

    def work(ledger: Ledger) -> Answer:
        got = ledger.resolve_effect(effect_id, outcome=body.outcome, by=by, why=body.why)
        return 200, got.to_json()

    return await _answer(request, caller, work)


class Intend(_Body):
    """A body's intent to perform one logical effect."""

    generation: Generation | None = None
    operation: str = Field(min_length=1, max_length=256)
    destination: str = Field(min_length=1, max_length=4000)
    arguments: JsonValue = None
    approval_slot: str | None = None
    caller_ref: str | None = None
    repeat_reason: str | None = None


@router.post("/nodes/{node}/effects", summary="Intend an effect (INTENDED)")
async def intend(request: Request, node: str, body: Intend, caller: Caller) -> Response:
    """201 with the new effect; 200 with the existing one when the same logical effect was
    already intended (``created`` says which)."""
    validate_name(node, "node")
    generation = _generation(own_generation(caller, node, body.generation), "an effect")

    def work(ledger: Ledger) -> Answer:
        effect, created = ledger.intend_effect(
            node, generation=generation, operation=body.operation,
            destination=body.destination, arguments=body.arguments,
            approval_slot=body.approval_slot, caller_ref=body.caller_ref,
            repeat_reason=body.repeat_reason,
        )  # fmt: skip
        return (201 if created else 200), {**effect.to_json(), "created": created}

    return await _answer(request, caller, work)


class Advance(_Body):
    """A body moves its effect on: dispatch, observe (with the result), commit or fail."""

    generation: Generation | None = None
    result: JsonValue = None
    reason: str | None = Field(default=None, max_length=4000)


@router.post("/effects/{effect_id}/{action}", summary="Dispatch, observe, commit or fail an effect")
async def advance(
    request: Request, effect_id: str,
    action: Literal["dispatch", "observe", "commit", "fail"], body: Advance, caller: Caller,
) -> Response:  # fmt: skip
    """The effect's own body (its identity and generation) moves it to the next state."""
    validate_name(effect_id, "effect id")

    def owner() -> tuple[Ledger, int]:
        ledger = ledger_of(request)
        effect = ledger.get_effect(effect_id)
        return ledger, _generation(own_generation(caller, effect.node, body.generation), action)

    _, generation = await run_in_threadpool(owner)

    def work(ledger: Ledger) -> Answer:
        if action == "dispatch":
            got = ledger.dispatch_effect(effect_id, generation=generation)
        elif action == "observe":
            got = ledger.observe_effect(effect_id, generation=generation, result=body.result)
        elif action == "commit":
            got = ledger.commit_effect(effect_id, generation=generation)
        else:
            got = ledger.fail_effect(effect_id, generation=generation, reason=body.reason)
        return 200, got.to_json()

    return await _answer(request, caller, work)


# --------------------------------------------------------------------------------------------
# heartbeats, notes, messages


class Renew(_Body):
    """A heartbeat: extend the live lease of the body's generation."""

    generation: Generation | None = None
    ttl_seconds: int = Field(default=3600, ge=1, le=int(MAX_LEASE_TTL.total_seconds()))


@router.post("/nodes/{node}/lease/renew", summary="Heartbeat: extend the body's lease")
async def renew(request: Request, node: str, body: Renew, caller: Caller) -> Response:
    """As ``onstation lease renew``; a stale generation is denied (403 stale_generation)."""
    validate_name(node, "node")
    generation = _generation(own_generation(caller, node, body.generation), "a heartbeat")

    def work(ledger: Ledger) -> Answer:
        got = ledger.renew_lease(node, generation=generation,
                                 ttl=timedelta(seconds=body.ttl_seconds))  # fmt: skip
        return 200, got.to_json()

    return await _answer(request, caller, work)


class NoteIn(_Body):
    """A decision (with why) or a note for the identity's successor."""

    kind: Literal["decision", "note"]
    text: str = Field(min_length=1)
    why: str | None = None
    generation: Generation | None = None


@router.post("/nodes/{node}/notes", summary="Record a decision or a note for the successor")
async def note(request: Request, node: str, body: NoteIn, caller: Caller) -> Response:
    """As ``onstation note``: a body's (its generation, denied once fenced) or an operator's."""
    validate_name(node, "node")
    if body.kind == "decision" and not body.why:
        raise BadInput("why: a decision needs its rationale", field="why")
    generation = own_generation(caller, node, body.generation)

    def work(ledger: Ledger) -> Answer:
        got = HarnessLedger(ledger).add_note(node, kind=body.kind, text=body.text,
                                             rationale=body.why, by=caller.name,
                                             generation=generation)  # fmt: skip
        return 201, got.to_json()

    return await _answer(request, caller, work)


class MessageIn(_Body):
    """A message between actors (``generation``: the sender's, when it is an identity)."""

    sender: str
    recipient: str
    kind: str
    body: str = ""
    reply_to: int | None = None
    generation: Generation | None = None
    to_generation: Generation | None = None


def _agent_may_send_as(ledger: Ledger, caller: Principal, sender: str) -> None:
    node = caller.token.node
    if sender == node:
        return
    if any(a.actor == sender and a.node == node for a in ledger.list_actors()):
        return
    raise forbidden(f"an agent token of {node} may not send as {sender}")


@router.post("/messages", summary="Send a message")
async def send(request: Request, body: MessageIn, caller: Caller) -> Response:
    """As ``onstation message send``: a message from an identity is a write of its body."""
    for value, field in ((body.sender, "sender"), (body.recipient, "recipient"),
                         (body.kind, "kind")):  # fmt: skip
        validate_name(value, field)

    def work(ledger: Ledger) -> Answer:
        names = {n.node for n in ledger.list_nodes()}
        if caller.is_agent:
            _agent_may_send_as(ledger, caller, body.sender)
        generation = None
        if body.sender in names:
            generation = _generation(own_generation(caller, body.sender, body.generation),
                                     f"a message from {body.sender}")  # fmt: skip
        got = HarnessLedger(ledger).post_message(
            sender=body.sender, recipient=body.recipient, kind=body.kind, body=body.body,
            reply_to=body.reply_to, generation=body.to_generation, sender_generation=generation,
        )  # fmt: skip
        return 201, got.to_json()

    return await _answer(request, caller, work)


# --------------------------------------------------------------------------------------------
# the halt gate and the tokens (operators only)


class HaltIn(_Body):
    """Halt everything (``node`` null) or one identity, saying why."""

    node: str | None = None
    why: str = Field(min_length=1)


@router.post("/halts", summary="Halt (global or one identity; operators)")
async def halt(request: Request, body: HaltIn, caller: Caller) -> Response:
    """Block admission of new bodies and new effects until lifted."""
    by = operator_name(caller, "halt")

    def work(ledger: Ledger) -> Answer:
        return 201, ledger.halt(node=body.node, by=by, why=body.why).to_json()

    return await _answer(request, caller, work)


class LiftIn(_Body):
    """Lift the global halt (``node`` null) or one identity's."""

    node: str | None = None


@router.post("/halts/lift", summary="Lift a halt (operators)")
async def lift(request: Request, body: LiftIn, caller: Caller) -> Response:
    """As ``onstation unhalt``."""
    by = operator_name(caller, "lift a halt")

    def work(ledger: Ledger) -> Answer:
        return 200, {"lifted": [h.to_json() for h in ledger.unhalt(node=body.node, by=by)]}

    return await _answer(request, caller, work)


class BreakerIn(_Body):
    """Why the operator opens or closes an identity's breaker."""

    why: str = Field(min_length=1)


@router.post("/nodes/{node}/breaker/{action}", summary="Open or close a breaker (operators)")
async def breaker(
    request: Request, node: str, action: Literal["open", "close"], body: BreakerIn,
    caller: Caller,
) -> Response:  # fmt: skip
    """As ``onstation breaker open|close``: answers the identity's record."""
    by = operator_name(caller, f"{action} a breaker")
    validate_name(node, "node")

    def work(ledger: Ledger) -> Answer:
        if action == "open":
            return 200, ledger.open_breaker(node, by=by, why=body.why).to_json()
        return 200, ledger.close_breaker(node, by=by, why=body.why).to_json()

    return await _answer(request, caller, work)


class TokenIn(_Body):
    """An operator token for ``name``, or an agent token for ``node`` (and its generation)."""

    kind: Literal["operator", "agent"]
    name: str | None = None
    node: str | None = None
    generation: Generation | None = None


@router.post("/tokens", summary="Create a token (operators); its text is shown once")
async def create_token(request: Request, body: TokenIn, caller: Caller) -> Response:
    """As ``onstation token create``. A replay with the same Idempotency-Key answers with
    ``token`` null: the text is never stored."""
    by = operator_name(caller, "create tokens")
    if body.kind == "operator" and (body.name is None or body.node or body.generation):
        raise BadInput("an operator token takes name only", field="name")
    if body.kind == "agent" and (body.node is None or body.name):
        raise BadInput("an agent token takes node (and generation) only", field="node")

    def work(ledger: Ledger) -> Answer:
        if body.kind == "operator":
            assert body.name is not None
            issued = ledger.create_operator_token(body.name, by=by)
        else:
            assert body.node is not None
            generation = body.generation or ledger.get_node(body.node).generation
            issued = ledger.create_agent_token(body.node, generation=generation, by=by)
        return 201, {**issued.record.to_json(), "token": issued.token}

    return await _answer(request, caller, work)


class Empty(_Body):
    """No fields."""


@router.post("/tokens/{token_id}/revoke", summary="Revoke a token for good (operators)")
async def revoke_token(
    request: Request, token_id: str, caller: Caller, body: Empty | None = None
) -> Response:
    """As ``onstation token revoke`` (409 conflict when it already was)."""
    by = operator_name(caller, "revoke tokens")
    validate_name(token_id, "token_id")

    def work(ledger: Ledger) -> Answer:
        return 200, ledger.revoke_token(token_id, by=by).to_json()

    return await _answer(request, caller, work)


__all__ = ["IDEMPOTENCY_HEADER", "REPLAYED_HEADER", "request_digest", "router"]
