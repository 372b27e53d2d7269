"""Canonical bytes and digests of a document that embeds another whose canonical bytes are
already known (issue 14).

A relief's incident and plan each carry the sealed capsule whole, and the capsule carries its
payload: canonicalizing each of them encoded the same payload again. JCS (RFC 8785) encodes
each member's value on its own and orders an object's members by their keys alone, so the
canonical bytes of ``{..., key: part}`` are those of ``{..., key: "PLACEHOLDER"}`` with the
placeholder's encoding replaced by the part's canonical bytes. The placeholder is a fresh
random string: a document that happens to hold it anywhere else is encoded whole instead.

Only for a part whose canonical bytes the caller computed itself, from that very object, and
which it has not changed since; the digests are then exactly
:func:`onstation.core.canonical.digest`'s (tests/unit/plan/test_embedded_digest.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from onstation.core.canonical import canonical_bytes, digest_of_canonical


def spliced_canonical(value: Mapping[str, Any], key: str, part: bytes) -> bytes:
    """The canonical bytes of ``value``, whose member ``key`` has the canonical bytes
    ``part``."""
    token = "onstation-embedded-" + secrets.token_hex(16)
    text = canonical_bytes({**value, key: token})
    marker = b'"' + token.encode("ascii") + b'"'
    head, found, tail = text.partition(marker)
    if not found or marker in tail:
        return canonical_bytes(dict(value))  # the placeholder is not the one member's alone
    return head + part + tail


def spliced_digest(scope: str, value: Mapping[str, Any], key: str, part: bytes) -> str:
    """``digest(scope, value)``, ``value[key]`` having the canonical bytes ``part``."""
    return digest_of_canonical(scope, spliced_canonical(value, key, part))


__all__ = ["digest_of_canonical", "spliced_canonical", "spliced_digest"]
