"""Sealing and verifying resurrection capsules.

A sealed capsule is ``{"capsule", "scope", "digest", "payload", "receipts"}``. Its digest is
``SHA-256("resurrection-capsule-v1" || 0x00 || JCS(payload))``. Verification, in order:

1. parse strictly (duplicate keys, NaN/Infinity, out-of-range integers, deep nesting refused);
2. schema (unknown fields refused everywhere, lower-case hex only);
3. recompute the digest from the payload; the file's digest is compared, never trusted;
4. every receipt: bound to the recomputed digest, scope, node, generation and sequence,
   signed by a trusted key, canonical signature, valid Ed25519 signature;
5. replay: another identity, a generation older than the caller's floor, or a
   (generation, sequence) older than the mark already accepted are refused.

The durable high-water mark lives in the ledger (``Ledger.accept_capsule``), which is called
only after all of the above passed.

The same capsule bytes are not checked against the schema twice in one process: a document
that passed is remembered by its fingerprint (the digest recomputed from its payload and the
canonical bytes of everything beside the payload), so sealing what was just built, and
verifying what was just sealed, re-check only what is new. The two newest documents sealed
here that the compiled schema validator accepted are held by identity, so a caller can show
that the very capsule object it embeds in an incident or a plan passed already
(:func:`compiled_schema_passed`; those documents are then checked around it, issue 14).
Every receipt's signature is checked by each verification, and the digest recomputed, except
where the caller itself built the payload and passes the digest it computed over that very
object (a relief seals, verifies and validates the payload it just built: the digest once per
relief, issue 14).
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onstation.core.canonical import canonical_bytes, digest, loads_strict
from onstation.core.errors import BadInput
from onstation.plan.schemas import schema_check
from onstation.plan.signing import SignatureRejected, sign_receipt, verify_receipt

CAPSULE_SCOPE = "resurrection-capsule-v1"
CAPSULE_FORMAT = "onstation.capsule/v1"
MAX_CAPSULE_BYTES = 16 << 20


class CapsuleRejected(BadInput):
    """The capsule or one of its receipts failed verification."""


@dataclass(frozen=True)
class VerifiedCapsule:
    """What verification established: exactly these facts, recomputed."""

    node: str
    generation: int
    sequence: int
    digest: str
    key_ids: tuple[str, ...]
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The summary ``capsule verify --json`` prints."""
        return {
            "verified": True,
            "node": self.node,
            "generation": self.generation,
            "sequence": self.sequence,
            "digest": self.digest,
            "keyIds": list(self.key_ids),
        }


@dataclass(frozen=True)
class AcceptedMark:
    """The newest capsule already accepted for an identity (the replay high-water mark)."""

    generation: int
    sequence: int
    digest: str


def capsule_digest(payload: Any) -> str:
    """The capsule digest of a payload (scope ``resurrection-capsule-v1``)."""
    return digest(CAPSULE_SCOPE, payload)


def unsealed(payload: dict[str, Any], payload_digest: str | None = None) -> dict[str, Any]:
    """A capsule document with its digest computed (or ``payload_digest``, see :func:`seal`)
    and no receipts yet."""
    return {
        "capsule": CAPSULE_FORMAT,
        "scope": CAPSULE_SCOPE,
        "digest": payload_digest or capsule_digest(payload),
        "payload": payload,
        "receipts": [],
    }


#: Fingerprints of capsule documents that passed the schema (newest last, bounded).
_SCHEMA_PASSED: OrderedDict[str, None] = OrderedDict()
_SCHEMA_PASSED_MAX = 256


def _fingerprint(doc: Any, payload_digest: str | None = None) -> str | None:
    """What identifies a capsule document's bytes: its payload's recomputed digest and the
    canonical bytes of the rest; None for a document that has no canonical form."""
    if not isinstance(doc, dict) or not isinstance(doc.get("payload"), dict):
        return None
    try:
        inner = payload_digest or capsule_digest(doc["payload"])
        rest = canonical_bytes({k: v for k, v in doc.items() if k != "payload"})
    except (BadInput, TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(inner.encode("ascii") + b"\0" + rest).hexdigest()


def schema_passed(doc: Any, payload_digest: str | None = None) -> None:
    """Remember that ``doc`` passed the capsule schema (its payload digest, when known)."""
    mark = _fingerprint(doc, payload_digest)
    if mark is not None:
        _remember_passed(mark)


def _remember_passed(mark: str) -> None:
    _SCHEMA_PASSED[mark] = None
    _SCHEMA_PASSED.move_to_end(mark)
    while len(_SCHEMA_PASSED) > _SCHEMA_PASSED_MAX:
        _SCHEMA_PASSED.popitem(last=False)


#: The capsule documents :func:`seal` made that the compiled validator accepted, the two
#: newest, each with its fingerprint then: held (so no other object takes its identity), and
#: only what this process sealed (a relief asks about the one it has just sealed; a document
#: read from anywhere and verified is never kept).
_COMPILED_PASSED: list[tuple[Any, str]] = []
_COMPILED_PASSED_MAX = 2


def compiled_schema_passed(doc: Any, payload_digest: str | None) -> bool:
    """Whether this very document object was sealed here (:func:`seal`) and passed the
    capsule schema on the compiled path then (so it held plain JSON, valid), and has the same
    fingerprint now. ``payload_digest``: as for :func:`verify`, the caller's own digest of
    this very payload object, unchanged since (the check is as good as that promise); never
    a digest read from anywhere."""
    if payload_digest is None:
        return False
    marks = [mark for held, mark in _COMPILED_PASSED if held is doc]
    return bool(marks) and _fingerprint(doc, payload_digest) == marks[-1]


def _require_schema(
    doc: Any, what: str, payload_digest: str | None = None, *, sealed_here: bool = False
) -> None:
    mark = _fingerprint(doc, payload_digest)
    if mark is not None and mark in _SCHEMA_PASSED:
        return  # these very bytes passed already
    problems, compiled = schema_check("capsule", doc)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CapsuleRejected(f"{what}: {first.pointer or '/'}: {first.message}{more}")
    if mark is not None:
        _remember_passed(mark)
        if sealed_here and compiled and payload_digest is not None:
            _COMPILED_PASSED.append((doc, mark))
            del _COMPILED_PASSED[:-_COMPILED_PASSED_MAX]


def seal(
    doc_or_payload: Mapping[str, Any],
    private: Ed25519PrivateKey,
    *,
    issued_at: str,
    payload_digest: str | None = None,
) -> dict[str, Any]:
    """Recompute the digest and sign it; returns a sealed capsule with one receipt.

    Accepts either a capsule document (its digest and receipts are replaced) or a bare
    payload. ``payload_digest`` is for a caller that computed the payload's capsule digest
    itself, over this very object, and has not changed it since (a relief that just built
    it: :func:`onstation.plan.build.build_digested_payload`); never a digest read from a file
    or a store.
    """
    payload = doc_or_payload.get("payload") if "payload" in doc_or_payload else doc_or_payload
    if not isinstance(payload, dict):
        raise BadInput("capsule: payload must be an object")
    doc = unsealed(payload, payload_digest)
    _require_schema(doc, "capsule", doc["digest"])
    subject = payload["subject"]
    receipt = sign_receipt(
        private,
        scope=CAPSULE_SCOPE,
        node=subject["node"],
        generation=subject["generation"],
        sequence=subject["sequence"],
        digest_hex=doc["digest"],
        issued_at=issued_at,
    )
    doc["receipts"] = [receipt]
    _require_schema(doc, "capsule", doc["digest"], sealed_here=True)
    return doc


def _recomputed(doc: Any) -> str | None:
    """The digest recomputed from a document's payload, or None when it has none (the schema
    check then says why)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("payload"), dict):
        return None
    try:
        return capsule_digest(doc["payload"])
    except (BadInput, TypeError, ValueError, RecursionError):
        return None


def parse(text: str | bytes) -> Any:
    """Strict parse of a capsule file's bytes."""
    if len(text) > MAX_CAPSULE_BYTES:
        raise CapsuleRejected(f"capsule: larger than {MAX_CAPSULE_BYTES} bytes")
    try:
        return loads_strict(text, "capsule")
    except BadInput as exc:
        raise CapsuleRejected(exc.message) from exc


def verify(
    doc: Any,
    trusted: Mapping[str, bytes],
    *,
    expect_node: str | None = None,
    min_generation: int | None = None,
    accepted: AcceptedMark | None = None,
    payload_digest: str | None = None,
) -> VerifiedCapsule:
    """Verify a parsed capsule document (see the module docstring for the order of checks).

    ``payload_digest``, as for :func:`seal`, only from a caller that computed it over this
    very payload object and has held it unchanged since; the document's stated digest and
    every receipt are still checked against it. A document read back from anywhere is
    verified without it (its digest recomputed)."""
    recomputed = payload_digest or _recomputed(doc)
    _require_schema(doc, "capsule", recomputed)
    payload = doc["payload"]
    if recomputed is None:
        recomputed = capsule_digest(payload)
    if not hmac.compare_digest(doc["digest"].encode("ascii"), recomputed.encode("ascii")):
        raise CapsuleRejected("capsule: digest differs from the digest recomputed from payload")
    receipts = doc["receipts"]
    if not receipts:
        raise CapsuleRejected("capsule: not sealed (no signature receipt)")
    subject = payload["subject"]
    node, generation, sequence = subject["node"], subject["generation"], subject["sequence"]
    signers: list[str] = []
    for index, receipt in enumerate(receipts):
        try:
            signers.append(
                verify_receipt(
                    receipt,
                    scope=doc["scope"],
                    node=node,
                    generation=generation,
                    sequence=sequence,
                    digest_hex=recomputed,
                    trusted=trusted,
                )
            )
        except SignatureRejected as exc:
            raise CapsuleRejected(f"capsule: receipts/{index}: {exc.message}") from exc
    if expect_node is not None and node != expect_node:
        raise CapsuleRejected(f"capsule replay refused: it is for {node!r}, not {expect_node!r}")
    if min_generation is not None and generation < min_generation:
        raise CapsuleRejected(
            f"capsule replay refused: generation {generation} is older than {min_generation}"
        )
    if accepted is not None:
        if (generation, sequence) < (accepted.generation, accepted.sequence):
            raise CapsuleRejected(
                f"capsule replay refused: generation {generation} sequence {sequence} is older "
                f"than the accepted generation {accepted.generation} sequence {accepted.sequence}"
            )
        if (generation, sequence) == (accepted.generation, accepted.sequence) and not (
            hmac.compare_digest(accepted.digest.encode("ascii"), recomputed.encode("ascii"))
        ):
            raise CapsuleRejected(
                "capsule replay refused: another capsule was accepted at this generation "
                "and sequence"
            )
    return VerifiedCapsule(node, generation, sequence, recomputed, tuple(signers), payload)


def verify_text(
    text: str | bytes,
    trusted: Mapping[str, bytes],
    *,
    expect_node: str | None = None,
    min_generation: int | None = None,
    accepted: AcceptedMark | None = None,
) -> VerifiedCapsule:
    """Parse strictly, then :func:`verify`."""
    return verify(
        parse(text),
        trusted,
        expect_node=expect_node,
        min_generation=min_generation,
        accepted=accepted,
    )
