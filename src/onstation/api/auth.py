"""Who is asking: bearer tokens, the page's session cookie, CSRF, and an agent token's scope.

Every request under ``/api/v1`` (but the OpenAPI description and the login itself) carries a
token, as ``Authorization: Bearer onst_...`` or, for the page, in the HttpOnly, SameSite=Strict
cookie that ``POST /api/v1/session`` sets (so that ``EventSource`` can send it). A request
authenticated by the cookie that changes state must also carry ``X-Onstation-Csrf: 1``: a
cross-site form cannot set a header. Missing, malformed, unknown, tampered and revoked tokens
all get the same 401 (no oracle).

An agent token is bound to one identity and one generation. Every request made with one
first passes the ledger's generation guard, exactly as a body's own write would: once the
generation is fenced, the request is refused with the ledger's durable denial (403
``stale_generation``, recorded as a denial receipt). It may read; it may write only as its
own identity and generation (:func:`own_generation`); the operator's actions
(:func:`operator_name`) are refused with 403 ``forbidden``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from onstation.api.app import forbidden, json_response, ledger_of, unauthenticated
from onstation.ledger.token_records import AccessToken
from onstation.ledger.tokens import MAX_TOKEN_LENGTH

#: The page's session cookie (HttpOnly, SameSite=Strict; holds the token itself).
COOKIE = "onstation_session"
#: The header a cookie-authenticated request that changes state must carry, with value "1".
CSRF_HEADER = "X-Onstation-Csrf"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

router = APIRouter(tags=["session"])


@dataclass(frozen=True)
class Principal:
    """The token a request was authenticated with, and how it was presented."""

    token: AccessToken
    via: str  # "header" or "cookie"

    @property
    def is_agent(self) -> bool:
        """An agent token (bound to one identity and generation)."""
        return self.token.kind == "agent"

    @property
    def name(self) -> str:
        """Who the token speaks for: the operator's name, or the agent's identity."""
        return self.token.name


def _presented(request: Request) -> tuple[str, str] | None:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise unauthenticated()
        return value.strip(), "header"
    cookie = request.cookies.get(COOKIE)
    if cookie:
        return cookie, "cookie"
    return None


def _check_csrf(request: Request) -> None:
    if request.method not in SAFE_METHODS and request.headers.get(CSRF_HEADER) != "1":
        raise forbidden(
            f"a request authenticated by the session cookie must carry {CSRF_HEADER}: 1",
            reason="csrf",
        )


def guard_agent(request: Request, token: AccessToken) -> None:
    """The ledger's generation guard for an agent token (a refusal is recorded, then raised)."""
    if token.kind != "agent":
        return
    assert token.node is not None and token.generation is not None
    ledger_of(request).guard(
        token.node, generation=token.generation, action=f"api {request.method} {request.url.path}"
    )


def authenticate(request: Request) -> Principal:
    """The request's principal, or 401; an agent token is guarded before anything else."""
    presented = _presented(request)
    if presented is None or len(presented[0]) > MAX_TOKEN_LENGTH:
        raise unauthenticated()
    text, via = presented
    token = ledger_of(request).authenticate(text)
    if token is None:
        raise unauthenticated()
    if via == "cookie":
        _check_csrf(request)
    guard_agent(request, token)
    return Principal(token, via)


#: The dependency every authenticated route takes (a sync dependency: it runs on a worker
#: thread, with that thread's ledger).
Caller = Annotated[Principal, Depends(authenticate)]


def operator_name(principal: Principal, action: str) -> str:
    """The operator's name, recorded as ``by``; an agent token is refused (403 forbidden)."""
    if principal.is_agent:
        raise forbidden(f"an agent token may not {action}")
    return principal.name


def own_generation(principal: Principal, node: str, generation: int | None) -> int | None:
    """The generation a write for ``node`` is made under.

    An operator's is the one given (None: an operator's own record). An agent writes only for
    its own identity and generation: another identity or generation is refused."""
    if not principal.is_agent:
        return generation
    token = principal.token
    if node != token.node:
        raise forbidden(f"an agent token of {token.node} may not act for {node}")
    if generation is not None and generation != token.generation:
        raise forbidden(
            f"an agent token of {token.node} generation {token.generation} may not act as "
            f"generation {generation}"
        )
    return token.generation


# --------------------------------------------------------------------------------------------
# login and logout of the page


class Login(BaseModel):
    """The token the page's operator typed in."""

    model_config = ConfigDict(extra="forbid", strict=True)
    token: str = Field(max_length=MAX_TOKEN_LENGTH)


def _set_cookie(response: Response, token: str | None) -> None:
    if token is None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    else:
        response.set_cookie(COOKIE, token, path="/", httponly=True, samesite="strict")


@router.post("/session", summary="Log in: set the session cookie from a token")
async def login(request: Request, body: Login) -> Response:
    """Check the token and keep it in an HttpOnly, SameSite=Strict cookie; needs the CSRF
    header like every other state-changing browser request."""
    if request.headers.get(CSRF_HEADER) != "1":
        raise forbidden(f"a login must carry {CSRF_HEADER}: 1", reason="csrf")

    def check() -> AccessToken:
        token = ledger_of(request).authenticate(body.token)
        if token is None:
            raise unauthenticated()
        guard_agent(request, token)
        return token

    token = await run_in_threadpool(check)
    response = json_response(200, {"token": token.to_json()})
    _set_cookie(response, body.token)
    return response


@router.get("/session", summary="Who am I: the token this request was made with")
def whoami(caller: Caller) -> dict[str, Any]:
    """The token's record (never its secret)."""
    return {"token": caller.token.to_json(), "via": caller.via}


@router.delete("/session", summary="Log out: clear the session cookie")
def logout(request: Request) -> Response:
    """Clear the cookie (the token itself stays valid until revoked)."""
    if request.cookies.get(COOKIE):
        _check_csrf(request)
    response = json_response(200, {"logged_out": True})
    _set_cookie(response, None)
    return response


__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "Caller",
    "Principal",
    "authenticate",
    "guard_agent",
    "operator_name",
    "own_generation",
    "router",
]
