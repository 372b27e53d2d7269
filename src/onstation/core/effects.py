"""The effect state machine and the logical fingerprint of a non-idempotent effect.

An effect (push, PR, message, payment) moves::

    INTENDED ──dispatch──▶ DISPATCHED ──observe──▶ OBSERVED ──commit──▶ COMMITTED
       │                       │
       │                       ├─reconcile (generation fenced), or uncertain─▶ AMBIGUOUS
       │                       └─resolve-not-executed (the host did not run it)─▶ NOT_EXECUTED
       ├─reconcile (generation fenced)──────────────────────────▶ AMBIGUOUS
       └─fail, or reconcile with its dispatch refused─▶ FAILED_BEFORE_DISPATCH

AMBIGUOUS is absorbing for every automatic actor: only an operator's recorded observation
(-> COMMITTED) or compensating action (-> COMPENSATED) leaves it. An INTENDED effect of a
fenced generation is AMBIGUOUS too: a hook killed between recording the intent and its
dispatch gives the host no decision, and the host then runs the tool. Only evidence that the
tool did not run (the ledger refused its dispatch to that generation) settles it as
FAILED_BEFORE_DISPATCH. An effect that is INTENDED for a live body, FAILED_BEFORE_DISPATCH,
NOT_EXECUTED or COMPENSATED may be intended again.

A DISPATCHED effect was handed to a host that still had its permission step, its deny rules
and the user's interrupt ahead of it. Evidence that the host did not run the tool (its own
denial, the transcript's rejection of that very call, or the destination asked and found
unchanged) settles it as NOT_EXECUTED. Like an operator's resolution, that move is a
``resolve-`` action: it carries its evidence and is never taken on a guess. A tool that
failed after it may have reached its destination is AMBIGUOUS (``uncertain``).

The fingerprint is what makes "the same effect" a fact rather than a caller's claim: it is
recomputed by the ledger over the node, the operation, the normalized destination and the
canonical arguments, and never taken from the caller. An approval slot is part of it only for
a declared repeat (a slot *and* a reason): otherwise a fresh slot id would be enough to
disguise one repeated logical effect as a new one.
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from onstation.core.canonical import JsonValue, canonical_bytes, digest
from onstation.core.errors import BadInput

EFFECT_SCOPE = "onstation-effect-v1"


class EffectState(StrEnum):
    """Where one logical effect stands."""

    INTENDED = "INTENDED"
    DISPATCHED = "DISPATCHED"
    OBSERVED = "OBSERVED"
    COMMITTED = "COMMITTED"
    FAILED_BEFORE_DISPATCH = "FAILED_BEFORE_DISPATCH"
    AMBIGUOUS = "AMBIGUOUS"
    COMPENSATED = "COMPENSATED"
    #: Dispatched, and then the host did not run the tool (denied, declined, blocked), or the
    #: destination, asked, shows it unchanged.
    NOT_EXECUTED = "NOT_EXECUTED"


class EffectAction(StrEnum):
    """The moves an actor can ask for; each maps to one allowed source state set."""

    DISPATCH = "dispatch"
    OBSERVE = "observe"
    COMMIT = "commit"
    FAIL = "fail"
    RECONCILE = "reconcile"
    #: Reconciling an INTENDED effect whose dispatch the ledger refused to its generation.
    RECONCILE_REFUSED = "reconcile-refused"
    #: A dispatched call whose tool failed where it may have reached its destination.
    UNCERTAIN = "uncertain"
    RESOLVE_OBSERVED = "resolve-observed"
    RESOLVE_COMPENSATED = "resolve-compensated"
    #: Evidence that the host did not run a dispatched call (a ``resolve-`` move: it is taken
    #: only with its evidence recorded, never by reconciliation alone).
    RESOLVE_NOT_EXECUTED = "resolve-not-executed"


#: (action, from-state) -> to-state. Anything absent is an invalid transition.
TRANSITIONS: dict[tuple[EffectAction, EffectState], EffectState] = {
    (EffectAction.DISPATCH, EffectState.INTENDED): EffectState.DISPATCHED,
    (EffectAction.FAIL, EffectState.INTENDED): EffectState.FAILED_BEFORE_DISPATCH,
    (EffectAction.OBSERVE, EffectState.DISPATCHED): EffectState.OBSERVED,
    (EffectAction.COMMIT, EffectState.OBSERVED): EffectState.COMMITTED,
    # Reconciling a fenced generation settles what the ledger can prove and marks the rest:
    # an intent may have run (its hook killed before the dispatch was recorded) unless its
    # dispatch was refused.
    (EffectAction.RECONCILE, EffectState.INTENDED): EffectState.AMBIGUOUS,
    (EffectAction.RECONCILE_REFUSED, EffectState.INTENDED): EffectState.FAILED_BEFORE_DISPATCH,
    (EffectAction.RECONCILE, EffectState.DISPATCHED): EffectState.AMBIGUOUS,
    (EffectAction.RECONCILE, EffectState.OBSERVED): EffectState.COMMITTED,
    (EffectAction.UNCERTAIN, EffectState.DISPATCHED): EffectState.AMBIGUOUS,
    (EffectAction.RESOLVE_NOT_EXECUTED, EffectState.DISPATCHED): EffectState.NOT_EXECUTED,
    (EffectAction.RESOLVE_OBSERVED, EffectState.AMBIGUOUS): EffectState.COMMITTED,
    (EffectAction.RESOLVE_COMPENSATED, EffectState.AMBIGUOUS): EffectState.COMPENSATED,
}

#: States from which the same logical effect may be intended again (it never reached the world,
#: or an operator compensated it).
REINTENDABLE = frozenset(
    {
        EffectState.INTENDED,
        EffectState.FAILED_BEFORE_DISPATCH,
        EffectState.NOT_EXECUTED,
        EffectState.COMPENSATED,
    }
)

TERMINAL = frozenset({EffectState.COMMITTED})


def next_state(action: EffectAction, current: EffectState) -> EffectState | None:
    """The state ``action`` leads to from ``current``, or None when the move is not allowed."""
    return TRANSITIONS.get((action, current))


def normalize_operation(operation: str) -> str:
    """Operations are case-insensitive verbs such as ``git.push`` or ``gh.pr.create``."""
    op = unicodedata.normalize("NFC", operation).strip().lower()
    if not op:
        raise BadInput("op: must not be empty", field="op")
    if len(op) > 256 or any(ch.isspace() for ch in op):
        raise BadInput(
            f"op: must be one word of at most 256 characters ({operation!r})", field="op"
        )
    return op


_DEFAULT_PORTS = {"http": 80, "https": 443, "ssh": 22, "git": 9418}


def normalize_destination(destination: str) -> str:
    """Normalize where an effect lands, so spelling differences do not hide a repeat.

    URLs get a lower-case scheme and host, no default port, no trailing slash and no
    ``.git`` suffix; scp-like git remotes (``git@host:owner/repo.git``) are rewritten to
    ``ssh://git@host/owner/repo``; everything else is NFC-normalized and stripped.
    """
    dest = unicodedata.normalize("NFC", destination).strip()
    if not dest:
        raise BadInput("dest: must not be empty", field="dest")
    if len(dest) > 2048:
        raise BadInput("dest: longer than 2048 characters", field="dest")
    if "://" not in dest and "@" in dest and ":" in dest.split("@", 1)[1]:
        user, rest = dest.split("@", 1)
        host, path = rest.split(":", 1)
        if host and "/" not in host:
            dest = f"ssh://{user}@{host}/{path.lstrip('/')}"
    if "://" in dest:
        parts = urlsplit(dest)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        netloc = host
        if parts.username:
            netloc = f"{parts.username}@{host}"
        try:
            port = parts.port
        except ValueError as exc:
            raise BadInput(f"dest: invalid port in {destination!r}", field="dest") from exc
        if port is not None and _DEFAULT_PORTS.get(scheme) != port:
            netloc = f"{netloc}:{port}"
        path = parts.path.rstrip("/")
        if path.endswith(".git"):
            path = path[: -len(".git")]
        dest = urlunsplit((scheme, netloc, path, parts.query, ""))
    return dest


def identity_slot(approval_slot: str | None, repeat_reason: str | None) -> str | None:
    """The approval slot that belongs to an effect's identity: a declared repeat's, else None.

    A slot presented without a reason is not evidence of a second effect, so it is dropped
    here; that keeps one logical effect at one fingerprint whatever slot ids callers invent.
    """
    if repeat_reason is None:
        return None
    if approval_slot is None:
        raise BadInput(
            "--repeat-reason: a deliberate repeat needs its own --slot", field="repeat_reason"
        )
    if not repeat_reason.strip():
        raise BadInput("--repeat-reason: must not be empty", field="repeat_reason")
    if not approval_slot.strip():
        raise BadInput("slot: a deliberate repeat's slot must not be empty", field="slot")
    return approval_slot


def effect_payload(
    *, node: str, operation: str, destination: str, arguments: JsonValue, approval_slot: str | None
) -> dict[str, Any]:
    """The semantic payload the fingerprint covers (generation deliberately excluded).

    ``approval_slot`` is the slot of the identity (see :func:`identity_slot`): None for a
    logical effect itself, the slot for a declared repeat. The key is always present, so the
    fingerprints of effects recorded before repeats had to be declared stay what they were.
    """
    canonical_bytes(arguments)  # refuses NaN, huge integers and non-JSON values up front
    return {
        "node": node,
        "operation": normalize_operation(operation),
        "destination": normalize_destination(destination),
        "arguments": arguments,
        "approval_slot": approval_slot,
    }


def fingerprint(
    *, node: str, operation: str, destination: str, arguments: JsonValue, approval_slot: str | None
) -> str:
    """SHA-256 (scope ``onstation-effect-v1``) over the canonical semantic payload.

    Recomputing an effect record's fingerprint passes its recorded ``approval_slot``, which
    the ledger sets only for a declared repeat; an intent goes through
    :func:`intent_fingerprint` instead.
    """
    return digest(
        EFFECT_SCOPE,
        effect_payload(
            node=node,
            operation=operation,
            destination=destination,
            arguments=arguments,
            approval_slot=approval_slot,
        ),
    )


def intent_fingerprint(
    *,
    node: str,
    operation: str,
    destination: str,
    arguments: JsonValue,
    approval_slot: str | None,
    repeat_reason: str | None,
) -> str:
    """The fingerprint of an intent as presented: an undeclared slot does not change it."""
    return fingerprint(
        node=node,
        operation=operation,
        destination=destination,
        arguments=arguments,
        approval_slot=identity_slot(approval_slot, repeat_reason),
    )


def effect_id_for(fingerprint_hex: str) -> str:
    """Deterministic effect id, so the ledger's own retries are idempotent inserts."""
    return f"eff-{fingerprint_hex[:24]}"
